package role

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/backend/membackend"
)

// stop stops el, failing t if it does not stop within the patience.
func stop(t *testing.T, el *Elector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := el.Halt(ctx); err != nil {
		t.Fatal(err)
	}
}

// An elector started again after Stop claims with the highest epoch it
// has seen as its floor, so its next tenure's epoch is larger than every
// earlier one even when the store lost its data in between and its clock
// is behind the old one's (a server restarted empty on another host).
func TestRestartedElectorKeepsEpochFloor(t *testing.T) {
	later := newStore(t, membackend.WithClock(clock.NewFake(t0.Add(time.Hour))))
	sw := &swappable{cur: later}
	a, _ := NewElector(sw, mustID(t, 1), fast, quiet)
	var last uint64
	for range 2 {
		if err := a.Launch(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a elected", a.IsMaster)
		_, ep, _ := a.Tenure()
		if ep <= last || a.Status().Epoch != ep {
			t.Fatalf("tenure's epoch %d (Epoch %d), want one above the last tenure's %d", ep, a.Status().Epoch, last)
		}
		last = ep
		stop(t, a)
	}
	// The store restarts empty while a is stopped, with a clock an hour
	// behind: its own tokens would start below a's epochs.
	sw.swap(newStore(t, membackend.WithClock(clock.NewFake(t0))))
	start(t, a)
	eventually(t, "a elected again", a.IsMaster)
	_, ep, ok := a.Tenure()
	if !ok || ep <= last {
		t.Fatalf("after a restart and a data loss the tenure's epoch is %d (ok %v), want more than %d", ep, ok, last)
	}
}

// swappable is a lease store that a test can replace by another, as a
// server restarted elsewhere.
type swappable struct {
	mu  sync.Mutex
	cur backend.Store
}

func (s *swappable) swap(to backend.Store) {
	s.mu.Lock()
	s.cur = to
	s.mu.Unlock()
}

func (s *swappable) store() backend.Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

func (s *swappable) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	return s.store().Acquire(ctx, key, owner, ttl, floor)
}

func (s *swappable) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	return s.store().Renew(ctx, key, owner, ttl)
}

func (s *swappable) Release(ctx context.Context, key, owner string, keepFor time.Duration) error {
	return s.store().Release(ctx, key, owner, keepFor)
}

func (s *swappable) Get(ctx context.Context, key string) (backend.Lease, error) {
	return s.store().Get(ctx, key)
}

func (s *swappable) Watch(ctx context.Context, key string) (backend.Watch, error) {
	return s.store().Watch(ctx, key)
}

// OnDuplicateID runs on the callback goroutine like the other callbacks:
// a slow one never holds up the election.
func TestSlowDuplicateCallbackDoesNotStallElection(t *testing.T) {
	store := newStore(t)
	id := mustID(t, 1)
	a, _ := NewElector(store, id, fast, quiet)
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	// b has no member list, so only its campaign can see the duplicate:
	// in the role key, held by a with b's instance ID.
	b, _ := NewElector(leaseOnly{store}, id, fast, quiet, OnDuplicateID(func(string) { <-release }))
	start(t, a)
	eventually(t, "a elected", a.IsMaster)
	start(t, b)
	t.Cleanup(unblock) // runs before b's Stop, which waits for callbacks
	eventually(t, "b reports the duplicate", func() bool { return b.Status().Duplicate != "" })
	stop(t, a)
	eventually(t, "b elected while its duplicate callback is still running", b.IsMaster)
}

// keepsOwn is a store that always reports the role key held by the
// claimant itself and fails to release it: an elector's stale lease it
// cannot get rid of. It counts the claims.
type keepsOwn struct {
	backend.Store
	claims atomic.Int32
}

func (k *keepsOwn) Acquire(_ context.Context, key, owner string, ttl time.Duration, _ uint64) (backend.Lease, error) {
	k.claims.Add(1)
	return backend.Lease{}, &backend.HeldError{Holder: backend.Lease{Key: key, Owner: owner, Token: 1, TTL: ttl}}
}

func (k *keepsOwn) Release(context.Context, string, string, time.Duration) error { return errDown }

// An elector that finds its own stale lease on the store and cannot
// release it backs off between tries, as for any other store failure,
// instead of asking again every few tens of milliseconds.
func TestOwnStaleLeaseBacksOff(t *testing.T) {
	clk := clock.NewFake(t0)
	st := &keepsOwn{Store: leaseOnly{newStore(t, membackend.WithClock(clk))}}
	a, _ := NewElector(st, mustID(t, 1), fast, quiet, withClock(clk))
	start(t, a)
	// One second of the elector's clock, in 5ms steps; each step waits
	// until the elector has armed its next back-off timer.
	for range 200 {
		clk.AwaitTimers(t, 1)
		clk.Advance(5 * time.Millisecond)
	}
	// A back-off from 50ms (25-50ms with its jitter) doubling to the 1s
	// heartbeat interval, once before each claim and once after each
	// failed release, makes at most 5 claims in a second.
	if n := st.claims.Load(); n > 6 {
		t.Fatalf("%d claims in a second against a store that keeps this process's lease, want a back-off (at most 6)", n)
	}
}

// pausingClock is a fake clock whose next Since call, once armed, tells
// hit and waits for resume before it returns the time it read: it stops
// the elector between reading the clock and acting on what it read.
type pausingClock struct {
	*clock.Fake
	armed  atomic.Bool
	hit    chan struct{}
	resume chan struct{}
}

func (p *pausingClock) Since(t time.Time) time.Duration {
	d := p.Fake.Since(t)
	if p.armed.CompareAndSwap(true, false) {
		p.hit <- struct{}{}
		<-p.resume
	}
	return d
}

// A renewal whose reply the elector reads just before the deadline, and
// acts on just after it, while IsMaster already read false: the tenure is
// over for good (OnDemoted), and IsMaster never reads true again in it.
func TestIsMasterNeverTurnsTrueAgainInATenure(t *testing.T) {
	clk := &pausingClock{Fake: clock.NewFake(t0), hit: make(chan struct{}), resume: make(chan struct{})}
	store := newStore(t, membackend.WithClock(clk.Fake))
	st := newStalling(leaseOnly{store})
	var rec recorder
	a, _ := NewElector(st, mustID(t, 1), fast, append(rec.options(), quiet, withClock(clk))...)
	start(t, a)
	t.Cleanup(st.open)
	eventually(t, "a elected", func() bool { return rec.has("elected") })
	clk.AwaitTimers(t, 3) // a: heartbeat, deadline; store: expiry

	st.stall.Store(true)
	clk.Advance(fast.HeartbeatInterval)
	receive(t, "the renewal to stall", st.entered)
	deadline := fast.HeartbeatExpiration - fast.SafetyMargin
	clk.Advance(deadline - fast.HeartbeatInterval - time.Millisecond)
	clk.armed.Store(true)
	st.resumeRenew() // the reply comes back a millisecond before the deadline
	receive(t, "the elector to read the clock on the reply", clk.hit)
	clk.Advance(2 * time.Millisecond)
	if a.IsMaster() {
		t.Fatal("IsMaster true after the deadline")
	}
	st.holdAcquire.Store(true) // the next tenure's claim waits
	close(clk.resume)
	eventually(t, "OnDemoted", func() bool { return rec.has("demoted") })
	receive(t, "the next claim", st.claiming)
	if a.IsMaster() {
		t.Fatal("IsMaster true again after it read false in the same tenure")
	}
	if rec.tenure(0).Err() == nil {
		t.Fatal("the tenure's context is live after OnDemoted")
	}
}
