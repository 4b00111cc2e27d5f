package bench

import (
	"bytes"
	"net/http"
	"testing"
)

// TestConsulWritePurpose checks that a transaction of baton's Consul
// store is counted as a Raft write or a read, and named by what it does.
func TestConsulWritePurpose(t *testing.T) {
	for _, c := range []struct {
		body, purpose string
		write         bool
	}{
		{`[{"KV":{"Verb":"get-or-empty","Key":"baton/lease/k"}},{"KV":{"Verb":"get-tree","Key":"baton/line/k/"}}]`, "read key+line", false},
		{`[{"KV":{"Verb":"get-or-empty","Key":"baton/lease/k"}}]`, "read key", false},
		{`[{"KV":{"Verb":"check-index","Key":"baton/lease/k"}},{"KV":{"Verb":"delete","Key":"baton/lease/k"}},{"KV":{"Verb":"lock","Key":"baton/line/k/w"}},{"KV":{"Verb":"lock","Key":"baton/lease/k"}}]`, "handover", true},
		{`[{"KV":{"Verb":"check-session","Key":"baton/lease/k"}},{"KV":{"Verb":"delete-cas","Key":"baton/lease/k"}},{"KV":{"Verb":"delete","Key":"baton/line/k/h"}},{"KV":{"Verb":"cas","Key":"baton/line/k/w"}},{"KV":{"Verb":"lock","Key":"baton/lease/k"}}]`, "handover", true},
		{`[{"KV":{"Verb":"lock","Key":"baton/fence/k"}},{"KV":{"Verb":"lock","Key":"baton/lease/k"}}]`, "grant", true},
		{`[{"KV":{"Verb":"check-session","Key":"baton/lease/k"}},{"KV":{"Verb":"delete-cas","Key":"baton/lease/k"}},{"KV":{"Verb":"cas","Key":"baton/fence/k"}}]`, "release", true},
		{`[{"KV":{"Verb":"delete","Key":"baton/lease/k"}},{"KV":{"Verb":"cas","Key":"baton/fence/k"}}]`, "release", true},
		{`[{"KV":{"Verb":"check-session","Key":"baton/lease/k"}},{"KV":{"Verb":"lock","Key":"baton/line/k/w"}}]`, "join", true},
		{`[{"KV":{"Verb":"delete","Key":"baton/fence/k"}},{"KV":{"Verb":"lock","Key":"baton/fence/k"}},{"KV":{"Verb":"lock","Key":"baton/line/k/w"}}]`, "join+counter", true},
		{`[{"KV":{"Verb":"check-index","Key":"baton/line/k/w"}},{"KV":{"Verb":"delete","Key":"baton/line/k/w"}}]`, "leave line", true},
	} {
		req, err := http.NewRequest(http.MethodPut, "http://agent/v1/txn", bytes.NewBufferString(c.body))
		if err != nil {
			t.Fatal(err)
		}
		write, purpose, err := consulWrite(req)
		if err != nil || write != c.write || purpose != c.purpose {
			t.Errorf("%s: got write %v, purpose %q, err %v; want %v, %q", c.body, write, purpose, err, c.write, c.purpose)
		}
	}
}
