package statuspage_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/statuspage"
)

// TestNosniff checks that every response, whatever its path, method and
// code, says X-Content-Type-Options: nosniff, so that no browser reads a
// lock name or owner in it as another type than the one sent.
func TestNosniff(t *testing.T) {
	in := start(t, shared, newApp(), 8081)
	waitFor(t, "master", in.el.IsMaster)
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		for _, path := range []string{"", "status", "healthz", "nope"} {
			res, _ := fetch(t, method, in.srv, path)
			if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("%s /baton/%s answered %d with X-Content-Type-Options %q; want nosniff", method, path, res.StatusCode, got)
			}
		}
	}
}

// TestListsAreNeverNull checks that /status shows every list as [],
// never null, when it is empty: the jobs and transitions of an instance
// that saw none, the members and locks of a store that has none, and the
// waiters of a lock nobody waits for.
func TestListsAreNeverNull(t *testing.T) {
	in := start(t, shared, newApp(), 8081)
	// Not started yet as master: transitions may be empty too. The
	// elector runs, so jobs stay empty whatever happens.
	_, body := get(t, in, "status")
	var s map[string]any
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("/status answered %q: %v", body, err)
	}
	for _, list := range []string{"members", "locks", "transitions", "jobs"} {
		if _, ok := s[list].([]any); !ok {
			t.Errorf("/status shows %q as %v; want a list, [] when empty", list, s[list])
		}
	}
}

// TestEmptyLockPrefixRefused checks that New refuses WithLockPrefix(""),
// which would list the leases of every tenant and app sharing the store,
// and the limits below 1.
func TestEmptyLockPrefixRefused(t *testing.T) {
	in := start(t, shared, newApp(), 8081)
	for name, opt := range map[string]statuspage.Option{
		`WithLockPrefix("")`: statuspage.WithLockPrefix(""),
		"WithLimits(0, 10)":  statuspage.WithLimits(0, 10),
		"WithLimits(10, -1)": statuspage.WithLimits(10, -1),
	} {
		if _, err := statuspage.New(in.store, in.el, opt); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("New with %s: err = %v; want ErrInvalidArgument", name, err)
		}
	}
}
