package consulbackend_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

// sessionWrites counts the requests a store sends, the session creates
// and destroys among them, the transactions that only read, and the
// blocking queries that returned.
type sessionWrites struct {
	next                                      http.RoundTripper
	requests, created, removed, wakeup, reads atomic.Int64
	blocks                                    chan struct{} // receives as each blocking query is sent
}

func (c *sessionWrites) RoundTrip(req *http.Request) (*http.Response, error) {
	c.requests.Add(1)
	switch {
	case strings.HasPrefix(req.URL.Path, "/v1/session/create"):
		c.created.Add(1)
	case strings.HasPrefix(req.URL.Path, "/v1/session/destroy"):
		c.removed.Add(1)
	case req.URL.Path == "/v1/txn" && readOnly(req):
		c.reads.Add(1)
	}
	blocking := req.Method == http.MethodGet && req.URL.Query().Get("index") != ""
	if blocking {
		select {
		case c.blocks <- struct{}{}:
		default:
		}
	}
	resp, err := c.next.RoundTrip(req)
	if err == nil && blocking {
		c.wakeup.Add(1)
	}
	return resp, err
}

// readOnly reports whether the transaction req sends only reads.
func readOnly(req *http.Request) bool {
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	req.Body = io.NopCloser(bytes.NewReader(body))
	var ops []struct{ KV struct{ Verb string } }
	if err != nil || json.Unmarshal(body, &ops) != nil {
		return false
	}
	for _, op := range ops {
		if !strings.HasPrefix(op.KV.Verb, "get") {
			return false
		}
	}
	return true
}

// countingStore is newStore whose session creates and destroys are
// counted.
func countingStore(t testing.TB, a *testenv.Consul) (*consulbackend.Store, *sessionWrites) {
	t.Helper()
	c := &sessionWrites{next: http.DefaultTransport.(*http.Transport).Clone(), blocks: make(chan struct{}, 1)}
	return storeVia(t, a, c), c
}

// storeVia is newStore whose requests go through rt.
func storeVia(t testing.TB, a *testenv.Consul, rt http.RoundTripper) *consulbackend.Store {
	t.Helper()
	cfg := config(a)
	cfg.HttpClient = &http.Client{Transport: rt}
	s, err := consulbackend.New(cfg, consulbackend.WithSessionTTLMin(a.SessionTTLMin()), consulbackend.WithoutRestartGuard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A store keeps the sessions of released leases idle for its next grants
// of the same TTL (creating and destroying a session are Raft writes,
// renewing one is not): lock cycles after the first (which also makes the
// store's keeper of fencing counters) create no session, and Close
// destroys the idle ones.
func TestLockCyclesReuseSessions(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	s, c := countingStore(t, a)
	const key, ttl = "reuse", 10 * time.Second
	var first int64
	for i := range 5 {
		if _, err := s.AcquireQueued(ctx, key, "a", ttl, 0, time.Minute); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if err := s.Release(ctx, key, "a", 0); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if i == 0 {
			first = c.created.Load()
		}
	}
	if n := c.created.Load() - first; n != 0 {
		t.Errorf("4 lock cycles after the first created %d sessions; want 0, the first one's reused", n)
	}
	if n := c.removed.Load(); n != 0 {
		t.Errorf("5 lock cycles destroyed %d sessions; want none", n)
	}
	s.Close()
	sessions, _, err := client(t, a).Session().List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range sessions {
		if e.Name == "baton lease under "+s.Prefix() {
			t.Errorf("session %s (%s) outlived Close, idle", e.ID, e.Name)
		}
	}
}

// A waiter makes the session of its lease when it joins the line, so that
// a release hands the key over without creating one: the handover path
// from holder to holder is one read and one transaction.
func TestHandoverCreatesNoSession(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	h, hc := countingStore(t, a)
	w := newStore(t, a)
	const key, ttl = "handover-session", 10 * time.Second
	if _, err := h.Acquire(ctx, key, "holder", ttl, 0); err != nil {
		t.Fatal(err)
	}
	join(t, w, key, "waiter", ttl)
	before := hc.created.Load()
	if err := h.Release(ctx, key, "holder", 0); err != nil {
		t.Fatal(err)
	}
	if n := hc.created.Load() - before; n != 0 {
		t.Errorf("the release that handed the key over created %d sessions; want 0", n)
	}
	awaitHanded(t, w, key, "waiter", "AwaitHandover")
	p, _, err := client(t, a).KV().Get(h.LeaseKey(key), nil)
	if err != nil || p == nil {
		t.Fatalf("the lease: %+v, %v", p, err)
	}
	if want := leaseSessionOf(t, a, w, key, "waiter"); want != "" && p.Session != want {
		t.Errorf("the handed-over lease is locked by session %s; want %s, the one the waiter made when it joined", p.Session, want)
	}
}

// leaseSessionOf returns the session a waiter's place in line carries
// for its lease, or "" once the place is gone.
func leaseSessionOf(t testing.TB, a *testenv.Consul, s *consulbackend.Store, key, owner string) string {
	t.Helper()
	p, _, err := client(t, a).KV().Get(s.LineKey(key)+owner, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p == nil {
		return ""
	}
	var rec struct {
		Session string `json:"session"`
	}
	if err := json.Unmarshal(p.Value, &rec); err != nil {
		t.Fatal(err)
	}
	return rec.Session
}

// A handover whose waiter's lease session ended (the waiter waited longer
// than its ttl allows without asking again, or an operator destroyed it)
// hands the key over with a session of the releasing store's.
func TestHandoverAfterTheWaitersSessionEnded(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	h, w := newStore(t, a), newStore(t, a)
	const key, ttl = "handover-ended-session", 10 * time.Second
	if _, err := h.Acquire(ctx, key, "holder", ttl, 0); err != nil {
		t.Fatal(err)
	}
	join(t, w, key, "waiter", ttl)
	ended := leaseSessionOf(t, a, w, key, "waiter")
	if ended == "" {
		t.Fatal("the waiter's place carries no session for its lease")
	}
	if err := a.DestroySession(ctx, ended); err != nil {
		t.Fatal(err)
	}
	if err := h.Release(ctx, key, "holder", 0); err != nil {
		t.Fatal(err)
	}
	awaitHanded(t, w, key, "waiter", "AwaitHandover")
	p, _, err := client(t, a).KV().Get(h.LeaseKey(key), nil)
	if err != nil || p == nil || p.Session == "" || p.Session == ended {
		t.Fatalf("the handed-over lease: %+v, %v; want it locked by a live session", p, err)
	}
}

// refusedRenewals answers 500 to session renewals while refuse is set, as
// an agent without a leader does (the client reports it as "Unexpected
// response code: 500", without the status error other calls give).
type refusedRenewals struct {
	next    http.RoundTripper
	refuse  atomic.Bool
	refused atomic.Int64
}

func (r *refusedRenewals) RoundTrip(req *http.Request) (*http.Response, error) {
	if r.refuse.Load() && strings.HasPrefix(req.URL.Path, "/v1/session/renew/") {
		r.refused.Add(1)
		if req.Body != nil {
			req.Body.Close()
		}
		return &http.Response{StatusCode: http.StatusInternalServerError, Status: "500 Internal Server Error",
			Body: io.NopCloser(strings.NewReader("No cluster leader")), Header: http.Header{}, Request: req}, nil
	}
	return r.next.RoundTrip(req)
}

// An idle session whose renewal the agent refuses does not fail the
// acquisition it was taken for: the store drops it and makes a new one.
func TestRefusedIdleRenewalMakesANewSession(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	rt := &refusedRenewals{next: http.DefaultTransport.(*http.Transport).Clone()}
	s := storeVia(t, a, rt)
	const key, ttl = "refused-renewal", 10 * time.Second
	if _, err := s.AcquireQueued(ctx, key, "a", ttl, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, key, "a", 0); err != nil { // its session is kept idle
		t.Fatal(err)
	}
	rt.refuse.Store(true)
	l, err := s.AcquireQueued(ctx, key, "b", ttl, 0, time.Minute)
	if err != nil || l.Owner != "b" {
		t.Fatalf("an acquisition whose idle session's renewal was refused: %+v, %v; want b's lease on a new session", l, err)
	}
	if rt.refused.Load() == 0 {
		t.Fatal("no renewal was refused: the test did not reach the idle session")
	}
}
