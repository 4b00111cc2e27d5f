package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"
)

// consulCounts counts what the clients of one measurement ask of the
// Consul agent: every HTTP request, the ones Consul commits through Raft
// (session create and destroy, KV writes, transactions with a write in
// them; a session renewal is not one), and the blocking queries that
// returned (each is one wake-up of a waiter or watcher); of the writes,
// those Consul refused (a transaction that failed a check, status 409,
// is a Raft write too), and the reads that did not block.
type consulCounts struct {
	requests, writes, wakeups, failed, reads atomic.Int64

	mu    sync.Mutex
	kinds map[string]*kindCount // requests by method, path, write, blocking and status
}

type kindCount struct {
	n    int
	took time.Duration // in all, from sending the request to its response
}

// config returns a client configuration for the agent at addr whose
// requests c counts.
func (c *consulCounts) config(addr string) *api.Config {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return &api.Config{Address: addr, HttpClient: &http.Client{Transport: &countingTransport{next: t, c: c}}}
}

// perOp sets r's counts per op, divided by r.Ops.
func (c *consulCounts) perOp(r *ConsulRun) {
	if r.Ops == 0 {
		return
	}
	n := float64(r.Ops)
	r.RequestsPerOp, r.WritesPerOp, r.WakeupsPerOp = float64(c.requests.Load())/n, float64(c.writes.Load())/n, float64(c.wakeups.Load())/n
	r.FailedPerOp, r.ReadsPerOp = float64(c.failed.Load())/n, float64(c.reads.Load())/n
}

type countingTransport struct {
	next http.RoundTripper
	c    *consulCounts
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := txnBody(req)
	if err != nil {
		return nil, err
	}
	blocking := req.Method == http.MethodGet && req.URL.Query().Get("index") != ""
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	took := time.Since(start)
	if err != nil {
		return resp, err
	}
	// Decoding a transaction takes tens of µs: after the reply, so that
	// the count does not delay the request it counts.
	write, purpose := classify(req, body)
	t.c.requests.Add(1)
	t.c.addKind(kindOf(req, purpose, write, blocking, resp.StatusCode), took)
	switch {
	case write:
		t.c.writes.Add(1)
		if resp.StatusCode == http.StatusConflict {
			t.c.failed.Add(1)
		}
	case blocking:
		t.c.wakeups.Add(1)
	case req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/v1/kv/"), req.URL.Path == "/v1/txn":
		t.c.reads.Add(1)
	}
	return resp, nil
}

// kindOf names a request's kind: method, path (a session's and a KV
// key's without the ID or key), purpose, write, blocking and status.
func kindOf(req *http.Request, purpose string, write, blocking bool, status int) string {
	kind := req.Method + " " + req.URL.Path
	if strings.HasPrefix(req.URL.Path, "/v1/session/") {
		kind = req.Method + " " + strings.Join(strings.Split(req.URL.Path, "/")[:4], "/")
	} else if strings.HasPrefix(req.URL.Path, "/v1/kv/") {
		kind = req.Method + " /v1/kv"
	}
	if purpose != "" {
		kind += " " + purpose
	}
	if write {
		kind += " write"
	}
	if blocking {
		kind += " blocking"
	}
	return kind + " " + strconv.Itoa(status)
}

// addKind counts a request of kind that took took.
func (c *consulCounts) addKind(kind string, took time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kinds == nil {
		c.kinds = map[string]*kindCount{}
	}
	k := c.kinds[kind]
	if k == nil {
		k = &kindCount{}
		c.kinds[kind] = k
	}
	k.n++
	k.took += took
}

// consulWrite reports whether req is a request Consul commits through
// Raft. A transaction is one if any of its operations writes; purpose
// then names what it does, by the keys it writes (txnPurpose).
func consulWrite(req *http.Request) (write bool, purpose string, err error) {
	body, err := txnBody(req)
	if err != nil {
		return false, "", err
	}
	write, purpose = classify(req, body)
	return write, purpose, nil
}

// txnBody returns the body of req if it is a transaction, leaving req's
// body to be read again.
func txnBody(req *http.Request) ([]byte, error) {
	if req.URL.Path != "/v1/txn" || req.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// classify is consulWrite on req whose transaction body, if any, is body.
func classify(req *http.Request, body []byte) (write bool, purpose string) {
	path := req.URL.Path
	switch {
	case strings.HasPrefix(path, "/v1/session/create"), strings.HasPrefix(path, "/v1/session/destroy"):
		return true, ""
	case strings.HasPrefix(path, "/v1/kv/"):
		return req.Method == http.MethodPut || req.Method == http.MethodDelete, ""
	case body != nil:
		var ops []txnOp
		if json.Unmarshal(body, &ops) != nil {
			return true, ""
		}
		purpose, write = txnPurpose(ops)
		return write, purpose
	}
	return false, ""
}

// txnOp is what consulWrite reads of a transaction's operation.
type txnOp struct{ KV *struct{ Verb, Key string } }

// txnPurpose names what a transaction of baton's store does, from the
// verbs and the kinds of keys (lease, fence, line: the second segment of
// "<prefix>/lease/K") it touches, and whether it writes.
func txnPurpose(ops []txnOp) (purpose string, write bool) {
	reads, writes, ok := txnKeys(ops)
	if !ok {
		return "", true
	}
	switch lease, line := writes["lease"], writes["line"]; {
	case len(writes) == 0 && reads["line"]:
		return "read key+line", false
	case len(writes) == 0:
		return "read key", false
	case lease == "lock" && (line == "lock" || line == "set"):
		return "handover", true
	case lease == "lock":
		return "grant", true
	case lease == "delete":
		return "release", true
	case line == "lock" && writes["fence"] != "":
		return "join+counter", true
	case line == "lock":
		return "join", true
	case line == "delete":
		return "leave line", true
	}
	return "other", true
}

// txnKeys returns the kinds of keys a transaction reads and, by kind, the
// verb that writes them (a lock or set before any other); ok false if an
// operation is not a KV one.
func txnKeys(ops []txnOp) (reads map[string]bool, writes map[string]string, ok bool) {
	reads, writes = map[string]bool{}, map[string]string{}
	for _, op := range ops {
		if op.KV == nil {
			return nil, nil, false
		}
		kind := ""
		if parts := strings.SplitN(op.KV.Key, "/", 3); len(parts) == 3 {
			kind = parts[1]
		}
		switch op.KV.Verb {
		case "get", "get-or-empty", "get-tree":
			reads[kind] = true
		case "check-index", "check-session", "check-not-exists":
		default:
			verb := op.KV.Verb
			switch verb { // a check-and-set writes as a set, a check-and-delete deletes
			case "cas":
				verb = "set"
			case "delete-cas":
				verb = "delete"
			}
			if writes[kind] != "lock" && writes[kind] != "set" {
				writes[kind] = verb
			}
		}
	}
	return reads, writes, true
}

// writeKinds prints the requests by kind, per op, and how long each took
// on average.
func (c *consulCounts) writeKinds(w io.Writer, ops int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kinds := slices.Sorted(maps.Keys(c.kinds))
	for _, k := range kinds {
		kc := c.kinds[k]
		fmt.Fprintf(w, "    %-45s %6.2f/op, %7.0f µs each\n", k, float64(kc.n)/float64(max(ops, 1)), float64(kc.took.Microseconds())/float64(kc.n))
	}
}
