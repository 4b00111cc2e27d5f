package role

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/internal/clock"
)

// stop stops el, failing t if it does not stop within the patience.
func stop(t *testing.T, el *Elector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := el.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// An elector started again after Stop claims with the highest epoch it
// has seen as its floor, so its next tenure's epoch is larger than every
// earlier one even when the store lost its data in between.
func TestRestartedElectorKeepsEpochFloor(t *testing.T) {
	store := newStore(t)
	a, _ := NewElector(leaseOnly{store}, mustID(t, 1), fast, quiet)
	for want := uint64(1); want <= 2; want++ {
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a elected", a.IsMaster)
		if got := a.Epoch(); got != want {
			t.Fatalf("tenure %d: epoch %d", want, got)
		}
		stop(t, a)
	}
	store.Reset() // the store restarts empty while a is stopped
	start(t, a)
	eventually(t, "a elected again", a.IsMaster)
	_, ep, ok := a.Tenure()
	if !ok || ep <= 2 {
		t.Fatalf("after a restart and a data loss the tenure's epoch is %d (ok %v), want more than 2", ep, ok)
	}
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
