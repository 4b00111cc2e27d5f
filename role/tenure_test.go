package role

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/backend/membackend"
)

// recorder keeps the callbacks of one elector in the order they ran.
// OnElected is recorded as "elected"; the tenures' contexts, and their
// epochs, are kept in order beside.
type recorder struct {
	mu      sync.Mutex
	got     []string
	tenures []context.Context
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	r.got = append(r.got, s)
	r.mu.Unlock()
}

func (r *recorder) options() []Option {
	return []Option{
		OnElected(func(ctx context.Context) {
			r.mu.Lock()
			r.tenures = append(r.tenures, ctx)
			r.mu.Unlock()
			r.add("elected")
		}),
		OnDemoted(func() { r.add("demoted") }),
		OnMasterChange(func(id string) { r.add("master " + id) }),
	}
}

func (r *recorder) events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (r *recorder) has(s string) bool { return slices.Contains(r.events(), s) }

func (r *recorder) tenure(i int) context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tenures[i]
}

// epoch returns the epoch of the i-th tenure.
func (r *recorder) epoch(i int) uint64 {
	ep, _ := EpochFromContext(r.tenure(i))
	return ep
}

// receive waits for ch to deliver or be closed, failing t after the
// patience.
func receive[T any](t *testing.T, what string, ch <-chan T) T {
	t.Helper()
	var v T
	select {
	case v = <-ch:
	case <-time.After(patience):
		t.Fatalf("timed out waiting for: %s", what)
	}
	return v
}

// stalling wraps a store. While stall is set, the next Renew tells entered
// and waits for resume before it reaches the store, then reports its
// result on returned. While holdAcquire is set, Acquire tells claiming and
// waits for letClaim.
type stalling struct {
	backend.Store
	stall    atomic.Bool
	entered  chan struct{}
	resume   chan struct{}
	returned chan error

	holdAcquire atomic.Bool
	claiming    chan struct{}
	letClaim    chan struct{}

	mu     sync.Mutex
	grants []uint64 // the tokens Acquire was granted, in order

	resumeOnce, claimOnce sync.Once
}

func newStalling(s backend.Store) *stalling {
	return &stalling{
		Store:    s,
		entered:  make(chan struct{}, 1),
		resume:   make(chan struct{}),
		returned: make(chan error, 1),
		claiming: make(chan struct{}, 1),
		letClaim: make(chan struct{}),
	}
}

func (s *stalling) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	if !s.stall.CompareAndSwap(true, false) {
		return s.Store.Renew(ctx, key, owner, ttl)
	}
	s.entered <- struct{}{}
	<-s.resume // the store does not honour ctx here, as go-redis on a read
	l, err := s.Store.Renew(context.WithoutCancel(ctx), key, owner, ttl)
	s.returned <- err
	return l, err
}

func (s *stalling) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	if s.holdAcquire.CompareAndSwap(true, false) {
		s.claiming <- struct{}{}
		<-s.letClaim
	}
	l, err := s.Store.Acquire(ctx, key, owner, ttl, floor)
	if err == nil {
		s.mu.Lock()
		s.grants = append(s.grants, l.Token)
		s.mu.Unlock()
	}
	return l, err
}

// granted returns the tokens of the grants so far.
func (s *stalling) granted() []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.grants)
}

// resumeRenew lets the stalled Renew go on.
func (s *stalling) resumeRenew() { s.resumeOnce.Do(func() { close(s.resume) }) }

// resumeClaim lets the held Acquire go on.
func (s *stalling) resumeClaim() { s.claimOnce.Do(func() { close(s.letClaim) }) }

// open lets every stalled call go on; tests register it as a cleanup.
func (s *stalling) open() {
	s.resumeRenew()
	s.resumeClaim()
}

// A renewal that is out when the tenure's deadline comes and then
// succeeds does not revive the tenure: the tenure ends at the deadline
// (IsMaster false, context cancelled, OnDemoted, Master not self), the
// late reply is void, and the elector's next tenure is a new one with a
// larger epoch.
func TestLateRenewalDoesNotReviveTenure(t *testing.T) {
	clk := clock.NewFake(t0)
	store := newStore(t, membackend.WithClock(clk))
	st := newStalling(leaseOnly{store})
	var rec recorder
	a, _ := NewElector(st, mustID(t, 1), fast, append(rec.options(), quiet, withClock(clk))...)
	start(t, a)
	t.Cleanup(st.open) // runs before the Stop registered by start
	eventually(t, "a elected", func() bool { return rec.has("elected") })
	clk.AwaitTimers(t, 3) // a: heartbeat, deadline; store: expiry

	st.stall.Store(true)
	clk.Advance(fast.HeartbeatInterval)
	receive(t, "the renewal to stall", st.entered)
	// The deadline comes while the renewal is out.
	clk.Advance(fast.HeartbeatExpiration - fast.SafetyMargin - fast.HeartbeatInterval)
	if a.IsMaster() {
		t.Error("IsMaster true at the deadline")
	}
	eventually(t, "OnDemoted at the deadline", func() bool { return rec.has("demoted") })
	check := func(when string) {
		t.Helper()
		if a.IsMaster() {
			t.Errorf("%s: IsMaster true", when)
		}
		if _, ep, ok := a.Tenure(); ok {
			t.Errorf("%s: Tenure() reports epoch %d", when, ep)
		}
		if m := a.Status().Master; m == a.Status().Instance {
			t.Errorf("%s: Master() is still self", when)
		}
		if rec.tenure(0).Err() == nil {
			t.Errorf("%s: the first tenure's context is live", when)
		}
	}
	check("at the deadline")

	// The renewal now succeeds on the store, too late.
	st.holdAcquire.Store(true)
	st.resumeRenew()
	if err := receive(t, "the late renewal's reply", st.returned); err != nil {
		t.Fatalf("the late renewal failed on the store (%v); the test needs it to succeed", err)
	}
	receive(t, "the next claim, after the late reply was dropped", st.claiming)
	check("after the late renewal succeeded")
	if got := a.Status().IsMaster; got {
		t.Error("Status reports master after the late renewal")
	}
	st.resumeClaim()

	// The next tenure is a new one.
	eventually(t, "a second tenure", func() bool { return len(rec.events()) >= 5 })
	want := []string{"elected", "master " + a.Status().Instance, "demoted", "elected", "master " + a.Status().Instance}
	if got := rec.events(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("callbacks %q, want %q", got, want)
	}
	first, second := rec.epoch(0), rec.epoch(1)
	if !a.IsMaster() || second <= first || a.Status().Epoch != second {
		t.Fatalf("after the new claim: IsMaster %v, epoch %d (tenures %d then %d); want true and a new, larger epoch", a.IsMaster(), a.Status().Epoch, first, second)
	}
}

// cutRenew wraps a store whose renewals fail while down is set, as a store
// out of reach would; the first claim after that finds it reachable again.
type cutRenew struct {
	backend.Store
	down atomic.Bool
}

func (c *cutRenew) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	if c.down.Load() {
		return backend.Lease{}, errDown
	}
	return c.Store.Renew(ctx, key, owner, ttl)
}

func (c *cutRenew) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	c.down.Store(false)
	return c.Store.Acquire(ctx, key, owner, ttl, floor)
}

// A master that stepped down because its store failed, and then finds its
// own lease still live on the store, starts a new tenure with a new epoch
// instead of taking the old lease back.
func TestOwnLiveKeyAfterStepDownTakesNewEpoch(t *testing.T) {
	clk := clock.NewFake(t0)
	store := newStore(t, membackend.WithClock(clk))
	cut := &cutRenew{Store: leaseOnly{store}}
	var rec recorder
	a, _ := NewElector(cut, mustID(t, 1), fast, append(rec.options(), quiet, withClock(clk))...)
	start(t, a)
	eventually(t, "a elected", func() bool { return rec.has("elected") })
	clk.AwaitTimers(t, 3) // a: heartbeat, deadline; store: expiry

	cut.down.Store(true)
	// To the deadline in one step: the key, granted for the TTL, is still
	// live on the store when a steps down and claims again.
	clk.Advance(fast.HeartbeatExpiration - fast.SafetyMargin)
	eventually(t, "a second tenure", func() bool { return len(rec.events()) >= 4 })
	got := rec.events()
	want := []string{"elected", "master " + a.Status().Instance, "demoted", "elected"}
	if fmt.Sprint(got[:4]) != fmt.Sprint(want) {
		t.Fatalf("callbacks %q, want %q first", got, want)
	}
	first, second := rec.epoch(0), rec.epoch(1)
	if second <= first || a.Status().Epoch != second {
		t.Fatalf("second tenure's epoch %d (Epoch %d), want one above the first tenure's %d", second, a.Status().Epoch, first)
	}
	l, err := store.Get(context.Background(), a.Status().Key)
	if err != nil || l.Token != second || l.Owner != a.owner {
		t.Fatalf("role key %+v, %v; want a's lease with token %d", l, err, second)
	}
}

// recovering wraps a store that, while on, refuses every claim as a store
// does after it may have lost data: a *HeldError without an owner whose
// TTL is how long nothing is granted. It counts the claims it refuses.
type recovering struct {
	backend.Store
	on      atomic.Bool
	ttl     time.Duration
	refused atomic.Int32
}

func (r *recovering) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	if r.on.Load() {
		r.refused.Add(1)
		return backend.Lease{}, &backend.HeldError{Holder: backend.Lease{Key: key, TTL: r.ttl}, Recovering: true}
	}
	return r.Store.Acquire(ctx, key, owner, ttl, floor)
}

// A store that grants nothing for a while after a possible data loss
// makes a slave wait that long, asking once, and never report a master
// named "".
func TestRecoveringStoreMakesSlaveWait(t *testing.T) {
	clk := clock.NewFake(t0)
	store := newStore(t, membackend.WithClock(clk))
	rs := &recovering{Store: leaseOnly{store}, ttl: 2 * time.Second}
	a, _ := NewElector(leaseOnly{store}, mustID(t, 1), fast, quiet, withClock(clk))
	var rec recorder
	b, _ := NewElector(rs, mustID(t, 2), fast, append(rec.options(), quiet, withClock(clk))...)
	start(t, a)
	eventually(t, "a elected", a.IsMaster)
	start(t, b)
	eventually(t, "b sees a", func() bool { return rec.has("master " + a.Status().Instance) })

	aEpoch := a.Status().Epoch
	rs.on.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := a.Halt(ctx); err != nil { // the release wakes b
		t.Fatal(err)
	}
	eventually(t, "b's claim refused", func() bool { return rs.refused.Load() == 1 })
	clk.AwaitTimers(t, 1) // b: its wait for the store to grant again
	clk.Advance(rs.ttl - time.Millisecond)
	if n := clk.Timers(); n != 1 {
		t.Errorf("%d timers armed just before the refusal's TTL ended, want b's wait only", n)
	}
	if n := rs.refused.Load(); n != 1 {
		t.Errorf("b asked %d times while the store said it grants nothing for %v, want once", n, rs.ttl)
	}
	if rec.has("master ") || b.Status().Master == "" {
		t.Errorf("b reported an empty master: callbacks %q, Master() %q", rec.events(), b.Status().Master)
	}
	if b.IsMaster() {
		t.Error("b master while the store grants nothing")
	}
	if until := b.Status().RecoveringUntil; !until.After(clk.Now()) {
		t.Errorf("b's Status().RecoveringUntil = %v while the store grants nothing; want a time after %v", until, clk.Now())
	}

	rs.on.Store(false)
	clk.Advance(30 * time.Millisecond) // past the TTL and its jitter
	eventually(t, "b elected once the store grants again", b.IsMaster)
	if b.Status().Epoch <= aEpoch {
		t.Fatalf("b's epoch %d, want more than a's %d", b.Status().Epoch, aEpoch)
	}
	if until := b.Status().RecoveringUntil; !until.IsZero() {
		t.Errorf("b's Status().RecoveringUntil = %v once it is master; want zero", until)
	}
}

// A grant that comes back after the tenure it would begin had already
// ended by the local clock is void: no OnElected, no IsMaster, and the
// claim that follows starts a tenure with a new epoch.
func TestLateGrantIsVoid(t *testing.T) {
	clk := clock.NewFake(t0)
	store := newStore(t, membackend.WithClock(clk))
	st := newStalling(leaseOnly{store})
	st.holdAcquire.Store(true)
	var rec recorder
	a, _ := NewElector(st, mustID(t, 1), fast, append(rec.options(), quiet, withClock(clk))...)
	start(t, a)
	t.Cleanup(st.open)
	receive(t, "the first claim to stall", st.claiming)
	clk.Advance(fast.HeartbeatExpiration - fast.SafetyMargin)
	st.resumeClaim()
	clk.AwaitTimers(t, 2) // store: the granted key's expiry; a: its back-off
	if a.IsMaster() {
		t.Error("IsMaster true on a grant that came back too late")
	}
	if _, ep, ok := a.Tenure(); ok {
		t.Errorf("Tenure() reports epoch %d from a grant that came back too late", ep)
	}
	clk.Advance(50 * time.Millisecond) // the back-off's longest first delay
	eventually(t, "a elected", func() bool { return len(rec.events()) >= 2 })
	want := []string{"elected", "master " + a.Status().Instance}
	if got := rec.events(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("callbacks %q, want %q", got, want)
	}
	if granted := st.granted(); len(granted) != 2 || rec.epoch(0) != granted[1] || granted[1] <= granted[0] {
		t.Fatalf("grants %d, tenure's epoch %d; want the second, larger grant's token", granted, rec.epoch(0))
	}
}
