package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/testkit/all/chaos"
)

// A Consul agent without a leader (just restarted) refuses with a server
// error: the store's own error, which baton documents may reach the
// caller. A corrupt store or an unknown error stays undocumented.
func TestClassifyConsulErrors(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("synclock: acquiring lock: consulbackend: acquire: %w", errors.New("Failed request: No cluster leader")), chaos.ClassDocumented},
		{fmt.Errorf("consulbackend: get: %w", api.StatusError{Code: 500, Body: "rpc error making call: No cluster leader"}), chaos.ClassDocumented},
		// An agent shutting down for a restart answers a transaction so.
		{fmt.Errorf("consulbackend: acquire queued: %w", errors.New("Failed request: raft apply failed: raft is already shutdown")), chaos.ClassDocumented},
		// A session renewal reports a 500 as text alone.
		{fmt.Errorf("consulbackend: renew %q: %w", "k", errors.New("Unexpected response code: 500")), chaos.ClassDocumented},
		{fmt.Errorf("consulbackend: renew %q: %w", "k", errors.New("Unexpected response code: 403")), chaos.ClassUndocumented},
		{fmt.Errorf("consulbackend: get: %w", api.StatusError{Code: 403, Body: "ACL not found"}), chaos.ClassUndocumented},
		{fmt.Errorf("consulbackend: acquire: %w", backend.ErrCorrupt), chaos.ClassUndocumented},
		{errors.New("something else"), chaos.ClassUndocumented},
	} {
		if got := classify(c.err); got != c.want {
			t.Errorf("classify(%v) = %s, want %s", c.err, got, c.want)
		}
	}
}
