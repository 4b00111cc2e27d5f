package statuspage_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/statuspage"
)

// A slave that has not changed role yet has no Since: /status leaves it
// out. It used to show "since": "0001-01-01T00:00:00Z".
func TestZeroTimesOmitted(t *testing.T) {
	b, err := json.Marshal(statuspage.Status{Instance: statuspage.Instance{ID: "10.0.0.1:acme:billing:8080", Role: "slave"}, GeneratedAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "0001-01-01") || strings.Contains(string(b), `"since"`) {
		t.Errorf("a zero time is in the JSON: %s", b)
	}
	b, err = json.Marshal(statuspage.Member{ID: "10.0.0.1:acme:billing:8080"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "0001-01-01") {
		t.Errorf("a zero time is in the member's JSON: %s", b)
	}
}

// Waiters are named by their instance IDs; two places in one line with
// one instance ID (two processes that share it) keep their nonces, so
// that they can be told apart. They used to show every nonce.
func TestWaiterNames(t *testing.T) {
	const a, b = "10.0.0.1:acme:billing:8080", "10.0.0.2:acme:billing:8080"
	got := statuspage.WaiterNames([]string{a + "#00aa", b + "#00bb", a + "#00cc"})
	if want := []string{a + "#00aa", b, a + "#00cc"}; !slices.Equal(got, want) {
		t.Errorf("WaiterNames = %q; want %q", got, want)
	}
	if got := statuspage.WaiterNames(nil); got == nil || len(got) != 0 {
		t.Errorf("WaiterNames(nil) = %#v; want an empty list", got)
	}
	lk := statuspage.LockOf(nil, backend.LeaseInfo{
		Lease:   backend.Lease{Key: "{acme:billing}:lock:invoice:42", Owner: a + "#00aa", Token: 7, TTL: time.Second},
		Waiters: []string{b + "#00bb"},
	}, "{acme:billing}:", time.Now())
	if lk.Kind != "lock" || lk.Name != "invoice:42" || lk.Holder != a || lk.Owner != a+"#00aa" || !slices.Equal(lk.Waiters, []string{b}) {
		t.Errorf("LockOf = %+v", lk)
	}
}
