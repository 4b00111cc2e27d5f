package role_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/testkit/storetest"
	"github.com/baton-go/baton/testkit/testenv"
)

// These tests run the elector against a private redis-server.

const patience = 15 * time.Second

var quiet = role.WithLogger(slog.New(slog.DiscardHandler))

func id(t testing.TB, port int) instanceid.ID {
	t.Helper()
	v, err := instanceid.New("127.0.0.1", "acme", "billing", port)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func waitFor(t testing.TB, what string, cond func() bool, els ...*role.Elector) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s%s", what, statuses(els))
		}
		time.Sleep(time.Millisecond)
	}
}

// statuses describes each elector's view, for a failure message.
func statuses(els []*role.Elector) string {
	var b strings.Builder
	for _, el := range els {
		st := el.Status()
		fmt.Fprintf(&b, "\n  %s: running %v, master %v (sees %q), epoch %d, since %s, last error %v",
			st.Instance, st.Running, st.IsMaster, st.Master, st.Epoch, st.Since.Format("15:04:05.000"), st.LastError)
	}
	return b.String()
}

func redisStore(t testing.TB, r *testenv.Redis) *redisbackend.Store {
	t.Helper()
	s, err := redisbackend.New(r.Client(t), redisbackend.WithoutRestartGuard()) // a server started for the tests
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func stopAll(t testing.TB, els ...*role.Elector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	for _, el := range els {
		if err := el.Halt(ctx); err != nil {
			t.Error(err)
		}
	}
}

// tenures records every tenure of a set of electors, and whether one began
// while the elector of an earlier one (by epoch) still read as master of
// it. IsMaster reads the clock on every call, so that is judged at the
// moment the later tenure's OnElected runs, however late; the earlier
// tenure's context is ended by a timer, which on a busy machine may fire
// after the successor was elected (the context's order on a graceful
// handover is checked by TestOneMasterAcrossHandovers).
type tenures struct {
	mu       sync.Mutex
	els      map[uint64]*role.Elector
	overlaps []string
}

// option returns the OnElected option of the elector that *el will point
// to once it has been made.
func (ts *tenures) option(el **role.Elector) role.Option {
	return role.OnElected(func(ctx context.Context) {
		ep, _ := role.EpochFromContext(ctx)
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if ts.els == nil {
			ts.els = make(map[uint64]*role.Elector)
		}
		if _, dup := ts.els[ep]; dup {
			ts.overlaps = append(ts.overlaps, fmt.Sprintf("epoch %d granted twice", ep))
		}
		for old, oel := range ts.els {
			if old >= ep {
				continue
			}
			before := oel.Status().Epoch
			if oel.IsMaster() && oel.Status().Epoch == before && before < ep {
				ts.overlaps = append(ts.overlaps, fmt.Sprintf("epoch %d began while %s was still master of epoch %d", ep, oel.Status().Instance, before))
			}
		}
		ts.els[ep] = *el
	})
}

func (ts *tenures) check(t testing.TB, want int) {
	t.Helper()
	// OnElected runs on the elector's callback goroutine, a little after
	// IsMaster turned true.
	waitFor(t, fmt.Sprintf("%d tenures recorded", want), func() bool {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		return len(ts.els) >= want
	})
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.overlaps) > 0 {
		t.Fatal(ts.overlaps)
	}
}

func master(els []*role.Elector) *role.Elector {
	var m *role.Elector
	for _, el := range els {
		if el.IsMaster() {
			if m != nil {
				return nil
			}
			m = el
		}
	}
	return m
}

// Five electors over many graceful handovers, on every store.
func TestManyTerms(t *testing.T) {
	storetest.Each(t, testManyTerms)
}

func testManyTerms(t *testing.T, b storetest.Backend) {
	newStore := b.Open(t)
	cfg := role.Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatExpiration: time.Second}
	var ts tenures
	var els []*role.Elector
	for i := range 5 {
		var el *role.Elector
		el, err := role.NewElector(newStore(t), id(t, 7000+i), cfg, quiet, ts.option(&el))
		if err != nil {
			t.Fatal(err)
		}
		if err := el.Launch(); err != nil {
			t.Fatal(err)
		}
		els = append(els, el)
	}
	defer stopAll(t, els...)
	for round := range 12 {
		var m *role.Elector
		waitFor(t, fmt.Sprintf("one master in round %d", round), func() bool { m = master(els); return m != nil })
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		if err := m.Halt(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
		if err := m.Launch(); err != nil { // rejoin as a slave
			t.Fatal(err)
		}
	}
	ts.check(t, 12)
}

// A master that crashes (stops talking to the store) is replaced once its
// key expires, and not before: the new master's claim returns no earlier
// than TTL after the old master's last successful renewal was sent. That
// the slave claims at the key's remaining TTL, not at a later heartbeat,
// is checked to the millisecond on the fake clock
// (TestStepDownBeforeExpiryAndFailover); here a busy machine may delay it.
// Every store runs it; Consul ends the lease up to twice its TTL late.
func TestCrashFailover(t *testing.T) {
	storetest.Each(t, testCrashFailover)
}

func testCrashFailover(t *testing.T, b storetest.Backend) {
	newStore := b.Open(t)
	cfg := role.Config{HeartbeatInterval: 300 * time.Millisecond, HeartbeatExpiration: 1500 * time.Millisecond}
	var ts tenures
	var els []*role.Elector
	var cuts []*role.Flaky
	var grants []*grantTimes
	for i := range 3 {
		c := &role.Flaky{Store: newStore(t)}
		g := &grantTimes{Store: c}
		var el *role.Elector
		el, err := role.NewElector(g, id(t, 7100+i), cfg, quiet, ts.option(&el))
		if err != nil {
			t.Fatal(err)
		}
		if err := el.Launch(); err != nil {
			t.Fatal(err)
		}
		els, cuts, grants = append(els, el), append(cuts, c), append(grants, g)
	}
	defer stopAll(t, els...)
	var m *role.Elector
	waitFor(t, "a master", func() bool { m = master(els); return m != nil })
	i := 0
	for els[i] != m {
		i++
	}
	cuts[i].Cut(true)
	last := grants[i].lastBefore(t, time.Now())
	var next *role.Elector
	waitFor(t, "a new master", func() bool {
		for _, el := range els {
			if el != m && el.IsMaster() {
				next = el
				return true
			}
		}
		return false
	})
	if since := time.Since(last); since < cfg.HeartbeatExpiration {
		t.Fatalf("a new master was elected %v after the crashed master's last renewal was sent, before its TTL %v had run out", since, cfg.HeartbeatExpiration)
	}
	if m.IsMaster() {
		t.Fatal("the crashed master still reports IsMaster after its key expired")
	}
	if next.Status().Epoch <= 1 {
		t.Fatalf("new master's epoch %d", next.Status().Epoch)
	}
	ts.check(t, 2)
}

// Redis restarted without its data: the master loses its key, one master
// is elected again, and its epoch is larger than every earlier one.
func TestRedisRestartedEmpty(t *testing.T) {
	r := testenv.NewRedis(t)
	cfg := role.Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatExpiration: time.Second}
	var ts tenures
	var els []*role.Elector
	for i := range 3 {
		var el *role.Elector
		el, err := role.NewElector(redisStore(t, r), id(t, 7200+i), cfg, quiet, ts.option(&el))
		if err != nil {
			t.Fatal(err)
		}
		if err := el.Launch(); err != nil {
			t.Fatal(err)
		}
		els = append(els, el)
	}
	defer stopAll(t, els...)
	var m *role.Elector
	waitFor(t, "a master", func() bool { m = master(els); return m != nil })
	before := m.Status().Epoch
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a master with a larger epoch", func() bool {
		m = master(els)
		return m != nil && m.Status().Epoch > before
	})
	ts.check(t, 2)
}

// grantTimes wraps a store and records when each claim and renewal was
// sent (by the wrapper's clock, which reads no earlier than the elector's
// before the same call) and which succeeded.
type grantTimes struct {
	backend.Store
	mu       sync.Mutex
	last     time.Time           // when the latest successful call was sent
	inflight map[*time.Time]bool // when the calls under way were sent
}

func (g *grantTimes) call(f func() error) {
	sent := time.Now()
	g.mu.Lock()
	if g.inflight == nil {
		g.inflight = make(map[*time.Time]bool)
	}
	g.inflight[&sent] = true
	g.mu.Unlock()
	err := f()
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.inflight, &sent)
	if err == nil && sent.After(g.last) {
		g.last = sent
	}
}

func (g *grantTimes) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (l backend.Lease, err error) {
	g.call(func() error { l, err = g.Store.Acquire(ctx, key, owner, ttl, floor); return err })
	return l, err
}

func (g *grantTimes) Renew(ctx context.Context, key, owner string, ttl time.Duration) (l backend.Lease, err error) {
	g.call(func() error { l, err = g.Store.Renew(ctx, key, owner, ttl); return err })
	return l, err
}

// lastBefore waits until every call sent before t has returned and then
// returns when the latest successful call was sent.
func (g *grantTimes) lastBefore(tb testing.TB, t time.Time) time.Time {
	tb.Helper()
	var last time.Time
	waitFor(tb, "the store calls sent before a moment to return", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		for sent := range g.inflight {
			if sent.Before(t) {
				return false
			}
		}
		last = g.last
		return true
	})
	return last
}

// Redis paused (SIGSTOP): the master cannot renew and stops calling itself
// master before its key could expire on the server: IsMaster reads false
// from TTL less the safety margin after the last successful renewal was
// sent. IsMaster reads the clock on every call, so that holds however late
// the test looks; the tenure's context is ended by a timer, which on a
// busy machine may fire a little later (that it is armed for the same
// instant is checked on the fake clock, TestStepDownBeforeExpiryAndFailover).
func TestRedisPausedMasterStepsDown(t *testing.T) {
	r := testenv.NewRedis(t)
	cfg := role.Config{HeartbeatInterval: 300 * time.Millisecond, HeartbeatExpiration: 1500 * time.Millisecond, SafetyMargin: 200 * time.Millisecond}
	rdbOpts := r.Options()
	rdbOpts.ReadTimeout = 100 * time.Millisecond
	rdbOpts.WriteTimeout = 100 * time.Millisecond
	rdbOpts.ContextTimeoutEnabled = true
	rs, err := redisbackend.New(redisClient(t, rdbOpts), redisbackend.WithoutRestartGuard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	s := &grantTimes{Store: rs}
	var ended atomic.Bool
	el, err := role.NewElector(s, id(t, 7300), cfg, quiet, role.OnElected(func(ctx context.Context) {
		<-ctx.Done()
		ended.Store(true)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := el.Launch(); err != nil {
		t.Fatal(err)
	}
	defer stopAll(t, el)
	waitFor(t, "elected", el.IsMaster)
	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	defer r.Resume()
	waitStopped(t, r.PID())
	// Every call the server answered was sent before it stopped, so
	// before now; once those have returned, the latest success is known.
	last := s.lastBefore(t, time.Now())
	time.Sleep(time.Until(last.Add(cfg.HeartbeatExpiration - cfg.SafetyMargin)))
	if el.IsMaster() {
		t.Fatalf("IsMaster is true %v after the last successful renewal was sent, past TTL %v less the safety margin %v",
			time.Since(last), cfg.HeartbeatExpiration, cfg.SafetyMargin)
	}
	waitFor(t, "tenure context cancelled", ended.Load)
}

// waitStopped waits until the kernel reports process pid stopped, where
// /proc tells: SIGSTOP takes effect a moment after kill returns, and a
// command the server is running then still completes.
func waitStopped(t testing.TB, pid int) {
	t.Helper()
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	if _, err := os.Stat(stat); err != nil {
		return // no /proc: SIGSTOP's moment of delay is left
	}
	waitFor(t, "the paused server to stop", func() bool {
		b, err := os.ReadFile(stat)
		if err != nil {
			return false
		}
		// The state follows the command name, which is in parentheses.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		return len(f) > 0 && (f[0] == "T" || f[0] == "t")
	})
}

func redisClient(t testing.TB, opts *redis.Options) *redis.Client {
	c := redis.NewClient(opts)
	t.Cleanup(func() { c.Close() })
	return c
}

// A master cut off from Redis by the network — its connection goes through
// a proxy that stops forwarding without closing anything, while the other
// instance connects directly — ends its tenure at its own deadline:
// IsMaster, Master() and OnDemoted all change before the successor is
// elected, although its client (go-redis defaults) does not let a
// context's deadline end a read.
func TestRedisPartitionedMasterStepsDownBeforeSuccessor(t *testing.T) {
	r := testenv.NewRedis(t)
	proxy := testenv.NewProxy(t, r.Addr())
	// A wide safety margin: the ordering under test must hold on a loaded
	// machine, where goroutines can start late.
	cfg := role.Config{HeartbeatInterval: 1200 * time.Millisecond, HeartbeatExpiration: 3 * time.Second, SafetyMargin: time.Second}
	opts := r.Options()
	opts.Addr = proxy.Addr()
	sa, err := redisbackend.New(redisClient(t, opts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sa.Close() })

	var demoted atomic.Bool
	a, err := role.NewElector(sa, id(t, 7400), cfg, quiet, role.OnDemoted(func() { demoted.Store(true) }))
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		isMaster, demoted bool
		master            string
		tenureLive        bool
	}
	seen := make(chan view, 1) // a as b saw it when b was elected
	b, err := role.NewElector(redisStore(t, r), id(t, 7401), cfg, quiet, role.OnElected(func(context.Context) {
		_, _, live := a.Tenure()
		seen <- view{isMaster: a.IsMaster(), demoted: demoted.Load(), master: a.Status().Master, tenureLive: live}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Launch(); err != nil {
		t.Fatal(err)
	}
	defer stopAll(t, a, b)
	defer proxy.Close() // before the Stops: a's calls then fail at once instead of hanging
	waitFor(t, "a elected", a.IsMaster)
	if err := b.Launch(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b sees a", func() bool { return b.Status().Master == a.Status().Instance })

	proxy.Blackhole(true)
	var v view
	select {
	case v = <-seen:
	case <-time.After(patience):
		t.Fatal("timed out waiting for b to be elected")
	}
	if v.isMaster || v.tenureLive || v.master == a.Status().Instance || !v.demoted {
		t.Fatalf("when b was elected, the cut-off a still had: IsMaster %v, a live tenure %v, Master() %q, OnDemoted called %v",
			v.isMaster, v.tenureLive, v.master, v.demoted)
	}
}

// A wrong password is logged as refused credentials, not as a store out
// of reach, and the elector's last error wraps backend.ErrAuth; the
// password shows nowhere.
func TestRedisWrongPassword(t *testing.T) {
	const pw = "wrong-pass-7"
	r := testenv.NewRedis(t, testenv.RedisOptions{Config: []string{"requirepass right-pass"}})
	o := r.Options()
	o.Password = pw
	rdb := redis.NewClient(o)
	defer rdb.Close()
	st, err := redisbackend.New(rdb, redisbackend.WithoutRestartGuard())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	logs := &testenv.SyncBuffer{}
	el := startElector(t, st, 7950, role.Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatExpiration: 2 * time.Second}, nil,
		role.WithLogger(slog.New(slog.NewTextHandler(logs, nil))))
	defer stopAll(t, el)
	waitFor(t, "the log to say the store refused the credentials", func() bool {
		return strings.Contains(logs.String(), "refused the credentials")
	}, el)
	if err := el.Status().LastError; !errors.Is(err, backend.ErrAuth) || !strings.Contains(err.Error(), "redis.password") {
		t.Errorf("last error %v; want one wrapping backend.ErrAuth that names redis.password", err)
	}
	if out := logs.String(); strings.Contains(out, "cannot reach") || strings.Contains(out, pw) {
		t.Errorf("log:\n%s\nwant no \"cannot reach\" and no password", out)
	}
}

// startElector makes an elector for instance port on st, records its
// tenures in ts (if not nil) and starts it; the caller stops it.
func startElector(t testing.TB, st backend.Store, port int, cfg role.Config, ts *tenures, opts ...role.Option) *role.Elector {
	t.Helper()
	var el *role.Elector
	opts = append([]role.Option{quiet}, opts...)
	if ts != nil {
		opts = append(opts, ts.option(&el))
	}
	el, err := role.NewElector(st, id(t, port), cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := el.Launch(); err != nil {
		t.Fatal(err)
	}
	return el
}
