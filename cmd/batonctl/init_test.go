package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/testkit/consultest"
	"github.com/baton-go/baton/testkit/storetest"
)

// init declares a store whole after a confirmation (or --yes): on the
// servers the tests started a moment ago, a store with the restart guard
// on then grants a service's first key at once, even for an hour's lease,
// where it would have refused it for that hour.
func TestInit(t *testing.T) {
	eachFixture(t, func(t *testing.T, fx fixture) {
		const app = "fresh"
		var guarded backend.Store
		if fx.name == "redis" {
			guarded = storetest.Redis(t, redisServer, redisbackend.WithRestartGuard(time.Hour))
		} else {
			guarded = consultest.Consul(t, consulServer, consulbackend.WithRestartGuard(time.Hour))
		}
		key := backend.AppKey(tenant, app, "lock", "nightly")
		if _, err := guarded.Acquire(t.Context(), key, "a", time.Hour, 0); !errorsIsRecovering(err) {
			t.Fatalf("a guarded store's first grant on a fresh server: %v; want the restart guard's refusal", err)
		}

		r := fx.ctl(t, "", "--app", app, "init")
		r.want(t, exitNo, "init with nothing on stdin")
		if !strings.Contains(r.stderr, "nothing declared") {
			t.Errorf("init without a confirmation: stderr %q; want it to say nothing was declared", r.stderr)
		}
		r = fx.ctl(t, "y\n", "--app", app, "init")
		r.want(t, exitNo, "init answered y")

		r = fx.ctl(t, "yes\n", "--app", app, "init")
		r.want(t, exitOK, "init confirmed")
		if !strings.Contains(r.stderr, "Type yes to declare") || !strings.Contains(r.stdout, "declared the baton data of tenant "+tenant) {
			t.Errorf("init confirmed: stdout %q, stderr %q; want the question and what was declared", r.stdout, r.stderr)
		}
		if _, err := guarded.Acquire(t.Context(), key, "a", time.Hour, 0); err != nil {
			t.Fatalf("the first grant after batonctl init: %v; want it at once", err)
		}
		if _, err := guarded.Acquire(t.Context(), backend.AppKey(tenant, "other", "role"), "a", time.Hour, 0); err != nil {
			t.Errorf("another service of the tenant after batonctl init: %v; want it at once", err)
		}
		r = fx.ctl(t, "", "--app", app, "init", "--yes", "--output", "json")
		r.want(t, exitOK, "init --yes")
		if !strings.Contains(r.stdout, `"declared": true`) {
			t.Errorf("init --yes --output json: %q", r.stdout)
		}
	})
}

// errorsIsRecovering reports whether err is the restart guard's refusal.
func errorsIsRecovering(err error) bool {
	var he *backend.HeldError
	return errors.As(err, &he) && he.Recovering
}
