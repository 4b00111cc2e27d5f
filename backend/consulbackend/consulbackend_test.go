package consulbackend_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"go.uber.org/goleak"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/backendtest"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const patience = 30 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// config returns a client config for agent a.
func config(a *testenv.Consul) *api.Config {
	cfg := api.DefaultConfig()
	cfg.Address = a.Addr()
	cfg.Token = a.ManagementToken()
	return cfg
}

// newStore returns a store on agent a that knows the agent's short
// session minimum, closed with the test. Its restart guard is off, since
// the agents are started for the tests and a fresh one would otherwise
// refuse every new key for its ttl; pass WithRestartGuard to turn it on.
func newStore(t testing.TB, a *testenv.Consul, opts ...consulbackend.Option) *consulbackend.Store {
	t.Helper()
	base := []consulbackend.Option{consulbackend.WithSessionTTLMin(a.SessionTTLMin()), consulbackend.WithoutRestartGuard()}
	s, err := consulbackend.New(config(a), append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The suite restarts the agent, empty; stores opened after that guard
// their grants, as stores do by default.
func TestConformance(t *testing.T) {
	a := testenv.NewConsul(t)
	var restarted atomic.Bool
	backendtest.Run(t, backendtest.Harness{
		NewStore: func(t testing.TB) backend.Store {
			if restarted.Load() {
				return newStore(t, a, consulbackend.WithRestartGuard(0))
			}
			return newStore(t, a)
		},
		Wipe: func(t testing.TB) {
			if err := a.DeleteAll(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		},
		Restart: func(t testing.TB) {
			if err := a.Restart(); err != nil {
				t.Fatal(err)
			}
			restarted.Store(true)
		},
		GivenTTL: true,
		MinTTL:   a.SessionTTLMin(),
		MaxTTL:   consulbackend.MaxSessionTTL,
		Forge:    forger(a),
	})
}

// A lease released with a keep time ends when the keep time is over, by
// the releasing store's timer, not when Consul gets round to its session
// (up to twice its TTL later). The store's lock-delay tells the two
// apart: a session that ran out while it held the key would put the key
// under a minute of lock-delay; the timer deletes the key first.
func TestKeptLeaseEndsOnTime(t *testing.T) {
	a := testenv.NewConsul(t)
	s := newStore(t, a, consulbackend.WithLockDelay(time.Minute))
	other := newStore(t, a)
	ctx := ctxT(t)
	const key = "{acme:billing}:lock:kept"
	if _, err := s.Acquire(ctx, key, "job-a", 10*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, key, "job-a", 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	for {
		_, err := other.Get(ctx, key)
		if errors.Is(err, backend.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := other.Acquire(ctx, key, "job-b", 10*time.Second, 0); err != nil {
		t.Fatalf("Acquire after the keep time: %v; want a grant (the key was not deleted by the keeper, but by its session running out)", err)
	}
}

// A store closed while it keeps a lease leaves the lease to its session:
// the keep time still holds, however the process ends.
func TestCloseLeavesKeptLease(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	s, err := consulbackend.New(config(a), consulbackend.WithSessionTTLMin(a.SessionTTLMin()), consulbackend.WithoutRestartGuard())
	if err != nil {
		t.Fatal(err)
	}
	const key = "{acme:billing}:lock:kept-close"
	l, err := s.Acquire(ctx, key, "job-a", 10*time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, key, "job-a", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	g, err := newStore(t, a).Get(ctx, key)
	if err != nil || g.Owner != "job-a" || g.Token != l.Token {
		t.Fatalf("after Close the kept key is %+v, %v; want job-a's lease (token %d)", g, err, l.Token)
	}
}

// A fencing counter ends some time after its key's last grant, so that
// per-entity keys leave nothing behind for ever; the key's next grant
// still gets a larger token.
func TestCounterEndsAfterKeep(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	s := newStore(t, a, consulbackend.WithCounterKeep(100*time.Millisecond))
	const key = "invoice:42"
	l, err := s.Acquire(ctx, key, "a", time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}
	kv := client(t, a).KV()
	p, _, err := kv.Get(s.FenceKey(key), nil)
	if err != nil || p == nil || p.Session == "" {
		t.Fatalf("the counter after a grant: %+v, %v; want it locked by a keeper session", p, err)
	}
	awaitCounterGone(t, kv, s, key)
	l2, err := s.Acquire(ctx, key, "b", time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token <= l.Token {
		t.Fatalf("the grant after the counter ended has token %d, not above %d", l2.Token, l.Token)
	}
}

// A counter that a floor put further ahead of the clock than its life
// (backend.CounterLife) outlives the keeper sessions, as on the other
// stores: were it to end, the next grant's token would come from the
// clock, below the tokens the counter gave, for a caller that never saw
// one. A key granted beside it from the clock loses its counter as usual.
func TestCounterAheadOfTheClockIsKept(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	s := newStore(t, a, consulbackend.WithCounterKeep(100*time.Millisecond))
	const ahead, usual = "ahead:1", "usual:1"
	floor := uint64(time.Now().Add(time.Hour).UnixMicro())
	la, err := s.Acquire(ctx, ahead, "a", time.Second, floor)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, usual, "a", time.Second, 0); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{ahead, usual} {
		if err := s.Release(ctx, k, "a", 0); err != nil {
			t.Fatal(err)
		}
	}
	kv := client(t, a).KV()
	awaitCounterGone(t, kv, s, usual) // its keeper ended
	l, err := s.Acquire(ctx, ahead, "b", time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token <= la.Token {
		t.Fatalf("a grant with no floor after the keepers ended has token %d, not above %d, which a floor put an hour ahead of the clock", l.Token, la.Token)
	}
}

// awaitCounterGone waits until Consul deleted key's fencing counter, as it
// does when the counter's keeper session ends (a keep time of 100ms).
func awaitCounterGone(t *testing.T, kv *api.KV, s *consulbackend.Store, key string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		p, _, err := kv.Get(s.FenceKey(key), nil)
		if err != nil {
			t.Fatal(err)
		}
		if p == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the counter of %q is still there %v after its last grant, with a keep time of 100ms", key, patience)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A keeper session that Consul ended (an operator destroyed it, or the
// agent lost its data) is replaced: grants do not fail on it.
func TestEndedKeeperIsReplaced(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	s := newStore(t, a)
	const key = "keeper-ended"
	if _, err := s.Acquire(ctx, key, "a", time.Second, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}
	p, _, err := client(t, a).KV().Get(s.FenceKey(key), nil)
	if err != nil || p == nil || p.Session == "" {
		t.Fatalf("the counter after a grant: %+v, %v; want it locked by a keeper session", p, err)
	}
	if err := a.DestroySession(ctx, p.Session); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{key, "keeper-ended-other"} {
		if _, err := s.Acquire(ctx, k, "b", time.Second, 0); err != nil {
			t.Fatalf("Acquire of %q after the keeper session was destroyed: %v", k, err)
		}
	}
}

// A renewal reaches watchers as EventRenewed. Consul skips a write that
// changes nothing, so the rewrite of the lease must change it (its mark):
// the key rewritten as it was did not wake them.
func TestRenewalWakesWatchers(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	s := newStore(t, a)
	const key = "renewal-seen"
	if _, err := s.Acquire(ctx, key, "a", 10*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := s.Renew(ctx, key, "a", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.C():
		if ev.Kind != backend.EventRenewed || ev.TTL != 10*time.Second {
			t.Fatalf("after a renewal the watch says %v (ttl %v); want EventRenewed for 10s", ev.Kind, ev.TTL)
		}
	case <-time.After(patience):
		t.Fatal("the watch did not see the renewal")
	}
}

// A lease or fencing counter written with a token no grant can have made
// (far beyond the clock) is reported by every call that reads it as
// ErrCorrupt naming the KV key, never as a token a caller would keep as
// its floor; the counter is not raised; once the bad key is deleted, the
// key is granted again with a token from the clock.
func TestForgedTokens(t *testing.T) {
	a := testenv.NewConsul(t)
	s := newStore(t, a)
	ctx := ctxT(t)
	kv := client(t, a).KV()
	sess, _, err := client(t, a).Session().Create(&api.SessionEntry{TTL: "60s", Behavior: api.SessionBehaviorDelete, LockDelay: time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	forged := map[string]uint64{
		"MaxToken":       backend.MaxToken,
		"2^52":           1 << 52,
		"two years away": uint64(time.Now().Add(2 * backend.MaxTokenLead).UnixMicro()),
	}
	i := 0
	for name, tok := range forged {
		for _, where := range []string{"lease", "counter"} {
			i++
			key := backend.AppKey("forged", fmt.Sprint(i), "lock", "k")
			t.Run(where+"/"+name, func(t *testing.T) {
				target := s.FenceKey(key)
				p := &api.KVPair{Key: target, Value: []byte(fmt.Sprint(tok))}
				if where == "lease" {
					target = s.LeaseKey(key)
					p = &api.KVPair{Key: target, Session: sess, Value: []byte(fmt.Sprintf(`{"owner":"forger","token":%d,"ttl_ms":60000}`, tok))}
					if ok, _, err := kv.Acquire(p, nil); err != nil || !ok {
						t.Fatalf("forging the lease: %v, %v", ok, err)
					}
				} else if _, err := kv.Put(p, nil); err != nil {
					t.Fatal(err)
				}
				check := func(op string, l backend.Lease, err error) {
					t.Helper()
					if !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), target) {
						t.Errorf("%s with token %d in the %s: %+v, %v; want ErrCorrupt naming %s", op, tok, where, l, err, target)
					}
				}
				l, err := s.Acquire(ctx, key, "me", 10*time.Second, 0)
				check("Acquire", l, err)
				l, err = s.AcquireQueued(ctx, key, "me", 10*time.Second, 0, time.Second)
				check("AcquireQueued", l, err)
				if where == "lease" {
					l, err = s.Get(ctx, key)
					check("Get", l, err)
					l, err = s.Renew(ctx, key, "forger", 10*time.Second)
					check("Renew by the forged owner", l, err)
				}
				if got, _, err := kv.Get(target, nil); err != nil || got == nil || string(got.Value) != string(p.Value) {
					t.Errorf("the %s holds %+v, %v after the calls; want %q left alone", where, got, err, p.Value)
				}
				if _, err := kv.Delete(target, nil); err != nil {
					t.Fatal(err)
				}
				sent := time.Now()
				// A deleted lease key keeps no lock-delay (1 ms here).
				var he *backend.HeldError
				for {
					l, err = s.Acquire(ctx, key, "me", 10*time.Second, 0)
					if !errors.As(err, &he) || !he.Recovering || ctx.Err() != nil {
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
				if err != nil || l.Token > uint64(sent.Add(time.Hour).UnixMicro()) {
					t.Fatalf("Acquire once the forged %s was deleted: %+v, %v; want a grant with a token from the clock", where, l, err)
				}
				if err := s.Release(ctx, key, "me", 0); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// New refuses a prefix with glob characters, braces or spaces, naming
// the option, and an agent address with credentials without showing the
// password; neither needs an agent.
func TestNewRejectsBadOptions(t *testing.T) {
	for _, p := range []string{"bat[on", "b?ton", "svc*", "a{b}", "bat on", "/baton", "baton/"} {
		if s, err := consulbackend.New(&api.Config{Address: "127.0.0.1:1"}, consulbackend.WithPrefix(p)); !errors.Is(err, backend.ErrInvalidArgument) ||
			!strings.Contains(err.Error(), "WithPrefix") {
			if s != nil {
				s.Close()
			}
			t.Errorf("WithPrefix(%q): %v; want ErrInvalidArgument naming WithPrefix", p, err)
		}
	}
	const pw = "pw-in-url-9"
	for _, addr := range []string{"user:" + pw + "@127.0.0.1:8500", "https://user:" + pw + "@127.0.0.1:8501"} {
		s, err := consulbackend.New(&api.Config{Address: addr})
		if !errors.Is(err, backend.ErrInvalidArgument) || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "consul.token") {
			if s != nil {
				s.Close()
			}
			t.Errorf("New with address %q: %v; want ErrInvalidArgument saying where the token goes, without the password", addr, err)
		}
		_, err = consulbackend.NewService(&api.Config{Address: addr}, consulbackend.ServiceOptions{ID: "10.0.0.7:acme:billing:8080", Name: "billing", Port: 8080})
		if !errors.Is(err, backend.ErrInvalidArgument) || strings.Contains(err.Error(), pw) {
			t.Errorf("NewService with address %q: %v; want ErrInvalidArgument without the password", addr, err)
		}
	}
}

// encodings records the Accept-Encoding of each request a store sends and
// the Content-Encoding of each reply.
type encodings struct {
	next      http.RoundTripper
	mu        sync.Mutex
	asked, by []string
}

func (e *encodings) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := e.next.RoundTrip(req)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.asked = append(e.asked, req.Header.Get("Accept-Encoding"))
	if err == nil {
		e.by = append(e.by, resp.Header.Get("Content-Encoding"))
	}
	return resp, err
}

// The store's replies are small; the agent compresses any reply of a
// kilobyte or more that a client accepts compressed (a read of a line of
// a few waiters), which costs both sides more time than the bytes it
// saves: the store asks for them as they are.
func TestRepliesUncompressed(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	e := &encodings{next: http.DefaultTransport.(*http.Transport).Clone()}
	cfg := config(a)
	cfg.HttpClient = &http.Client{Transport: e}
	s, err := consulbackend.New(cfg, consulbackend.WithSessionTTLMin(a.SessionTTLMin()), consulbackend.WithoutRestartGuard())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const key, ttl = "uncompressed", 10 * time.Second
	w := newStore(t, a)
	if _, err := w.Acquire(ctx, key, "holder", ttl, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 8 { // a line whose read is a few kilobytes
		join(t, w, key, fmt.Sprintf("waiter-%d-with-a-longer-name", i), ttl)
	}
	if _, err := s.AcquireQueued(ctx, key, "last", ttl, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("AcquireQueued of the held key: %v; want ErrHeld", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, asked := range e.asked {
		if asked != "identity" {
			t.Errorf("request %d asked for replies encoded %q; want identity", i, asked)
		}
	}
	for i, by := range e.by {
		if by != "" {
			t.Errorf("reply %d came encoded %q; want it as it is", i, by)
		}
	}
}
