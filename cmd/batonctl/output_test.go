package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/statuspage"
)

// hostile is stored text that a terminal would act on: a screen clear,
// a colour, a window title, a newline and a bidirectional override.
const hostile = "\x1b[2J\x1b[31mevil\x1b]0;pwned\x07\nline\u202e"

// The tables quote stored text that is not plain printable, so that
// batonctl never writes a terminal escape or a newline from the store
// raw, whatever a store returns; printable text is shown as it is.
func TestTablesQuoteStoredText(t *testing.T) {
	var out bytes.Buffer
	s := &session{stdout: &out, stderr: &out, tenant: tenant, app: "billing", kind: "redis"}
	l := backend.Lease{Key: backend.AppKey(tenant, "billing", "lock", "k"), Owner: hostile + "#00aa", Token: 7, TTL: time.Second}
	if err := s.printLocks([]backend.LeaseInfo{{Lease: l, Waiters: []string{"plain-waiter", hostile}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.printMembers([]statuspage.Member{{ID: hostile, Owner: hostile + "#00aa"}}); err != nil {
		t.Fatal(err)
	}
	s.printHolder(l.Key, l)
	s.printHolder(s.roleKey(), l)
	got := out.String()
	if strings.ContainsAny(got, "\x1b\x07\u202e") || strings.Count(got, "\n") != 6 {
		t.Errorf("the tables wrote stored text raw:\n%q", got)
	}
	if !strings.Contains(got, `\x1b[2J`) || !strings.Contains(got, "plain-waiter") {
		t.Errorf("the tables do not show the stored text quoted:\n%s", got)
	}
}

// status --output json and the status page's /status describe one store
// state alike: the same service, master, members and locks, with the
// same field names and, but for what changes between two reads (leases
// left, heartbeats' ages, lower bounds read from tokens) and what only
// an instance can know (since, self), the same values. The two used to
// differ in names (ttl_ms and lease_ms, id and holder, started and
// started_at) and in waiters (with nonces on one side).
func TestStatusJSONMatchesStatusPage(t *testing.T) {
	eachFixture(t, func(t *testing.T, fx fixture) {
		const app = "compared"
		m, _ := service(t, fx, app)
		st := fx.newStore(t)
		acquire(t, st, app, "lock:invoice:7", owner(app, 8081, "00000000000000aa"))
		if _, err := st.(backend.Queue).AcquireQueued(t.Context(), backend.AppKey(tenant, app, "lock:invoice:7"), owner(app, 8082, "00000000000000bb"), time.Minute, 0, time.Minute); err == nil {
			t.Fatal("the waiter was granted the held lock")
		}
		page, err := statuspage.New(fx.newStore(t), m)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := json.Marshal(page.Status(t.Context()))
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		r := fx.ctl(t, "", "--app", app, "--output", "json", "status")
		r.want(t, exitOK, "status --output json")
		var got map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("status --output json: %v\n%s", err, r.stdout)
		}
		for _, field := range []string{"service", "master", "members", "locks"} {
			g, w := comparable(got[field]), comparable(want[field])
			if !reflect.DeepEqual(g, w) {
				gj, _ := json.MarshalIndent(g, "", "  ")
				wj, _ := json.MarshalIndent(w, "", "  ")
				t.Errorf("%s differs (volatile values blanked):\n--- batonctl\n%s\n--- /status\n%s", field, gj, wj)
			}
		}
	})
}

// comparable returns v, decoded JSON, with the values that change
// between two reads or that only an instance knows replaced by "*" (the
// field stays, so that names still compare), since (only an instance
// that saw the tenure begin has it) and held_at_least_ms (absent when 0)
// left out, and lists of objects sorted by their JSON.
func comparable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			switch k {
			case "since", "held_at_least_ms": // absent when unknown or 0
			case "lease_ms", "last_heartbeat_ms", "ttl_ms", "self":
				out[k] = "*"
			default:
				out[k] = comparable(x)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = comparable(x)
		}
		slices.SortFunc(out, func(a, b any) int {
			aj, _ := json.Marshal(a)
			bj, _ := json.Marshal(b)
			return strings.Compare(string(aj), string(bj))
		})
		return out
	}
	return v
}
