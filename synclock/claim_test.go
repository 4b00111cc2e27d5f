package synclock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/storetest"
)

// renewCounter counts the lease extensions a locker makes; it keeps the
// Redis store's line and handover.
type renewCounter struct {
	*redisbackend.Store
	renews atomic.Int64
}

func (c *renewCounter) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	c.renews.Add(1)
	return c.Store.Renew(ctx, key, owner, ttl)
}

// memRenewCounter is renewCounter on the in-memory store, which keeps its
// line and handover too.
type memRenewCounter struct {
	*membackend.Store
	renews atomic.Int64
}

func (c *memRenewCounter) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	c.renews.Add(1)
	return c.Store.Renew(ctx, key, owner, ttl)
}

// lineStore is a store that keeps waiting lines and hands over.
type lineStore interface {
	backend.Store
	backend.Queue
	backend.Handover
}

// crashingWaiter is a store for an instance that dies while it waits in
// line: it never collects a lock handed to it and never leaves the line,
// as a killed process would not.
type crashingWaiter struct{ lineStore }

func (c crashingWaiter) AwaitHandover(ctx context.Context, key, owner string, max time.Duration) (backend.Lease, bool, error) {
	<-ctx.Done()
	return backend.Lease{}, false, backend.ContextError(ctx)
}

func (crashingWaiter) Dequeue(context.Context, string, string) error { return nil }

// A grant first lasts ClaimWindow: a short section never extends it, a
// long one extends it to HoldDuration and keeps the lock past the window.
// The Locker runs on the fake clock, so how long a section runs is up to
// the test, not the machine's load; the windows are long, so that the
// store, on the real clock, keeps each lease far longer than the test
// needs.
func TestClaimWindowExtendsLongSections(t *testing.T) {
	t.Run("mem", func(t *testing.T) {
		st := &memRenewCounter{Store: membackend.New()}
		t.Cleanup(func() { st.Close() })
		testClaimWindowExtendsLongSections(t, st, st.renews.Load)
	})
	t.Run("redis", func(t *testing.T) {
		st := &renewCounter{Store: newRedisStore(t)}
		testClaimWindowExtendsLongSections(t, st, st.renews.Load)
	})
}

// testClaimWindowExtendsLongSections runs the test on st, whose renewals
// renews counts.
func testClaimWindowExtendsLongSections(t *testing.T, st backend.Store, renews func() int64) {
	const claim, hold = time.Minute, 10 * time.Minute
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	extended := make(chan struct{}, 1)
	lk := lockerOn(t, 1, st, synclock.Config{HoldDuration: hold, ClaimWindow: claim}, synclock.WithClock(clk), synclock.WithObserver(func(ev synclock.Event) {
		if ev.Kind == synclock.EventExtended {
			extended <- struct{}{}
		}
	}))
	key := uniqueKey(t)
	sk := backend.AppKey("acme", "billing", "lock", key)

	err := lk.DoKey(ctxT(t), key, func(ctx context.Context) error {
		l, err := st.Get(ctx, sk)
		if err != nil {
			return err
		}
		if l.TTL > claim {
			t.Errorf("a fresh grant lasts %v, want at most the claim window %v", l.TTL, claim)
		}
		clk.Advance(claim/3 - time.Nanosecond) // a short section
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := renews(); n != 0 {
		t.Fatalf("a short section extended its lease %d times, want 0", n)
	}

	err = lk.DoKey(ctxT(t), key, func(ctx context.Context) error {
		clk.Advance(claim / 3) // the extension starts
		select {
		case <-extended:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		clk.Advance(2 * claim) // past the first lease
		if err := ctx.Err(); err != nil {
			return context.Cause(ctx)
		}
		l, err := st.Get(ctx, sk)
		if err != nil {
			return err
		}
		if l.TTL <= claim {
			t.Errorf("after the extension the lease has %v left, want it extended towards the %v hold", l.TTL, hold)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("a section longer than the claim window: %v", err)
	}
	if n := renews(); n != 1 {
		t.Fatalf("the long section extended its lease %d times, want once (to the hold)", n)
	}
}

// renewLog grants every request at once and records the lease length
// each extension asks for.
type renewLog struct {
	grantingStore
	mu   sync.Mutex
	ttls []time.Duration
}

func (s *renewLog) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	s.mu.Lock()
	s.ttls = append(s.ttls, ttl)
	s.mu.Unlock()
	return s.grantingStore.Renew(ctx, key, owner, ttl)
}

func (s *renewLog) taken() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ttls)
}

// HoldDuration still caps a holding whose first lease is the claim window:
// a third into the window the lease is extended once, to the end of the
// hold counted from the grant's request, and the section is cancelled a
// margin (a tenth of the claim window) before the hold ends: not before
// the claim window does, and not a moment after the hold's margin. On the
// fake clock, so the instants are exact on any machine.
func TestClaimWindowKeepsHoldCap(t *testing.T) {
	const claim, hold = time.Second, 3 * time.Second
	const margin = claim / 10
	clk := clock.NewFake(time.Unix(1_700_000_000, 0)) // T
	extended := make(chan struct{}, 1)
	observe := synclock.WithObserver(func(ev synclock.Event) {
		if ev.Kind == synclock.EventExtended {
			extended <- struct{}{}
		}
	})
	st := &renewLog{}
	lk := lockerOn(t, 1, st, synclock.Config{HoldDuration: hold, ClaimWindow: claim}, observe, synclock.WithClock(clk))
	ctx := ctxT(t)
	m := lk.Mutex(uniqueKey(t))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	clk.AwaitTimers(t, 1)
	clk.Advance(claim / 3) // the extension starts
	select {
	case <-extended:
	case <-ctx.Done():
		t.Fatal("the lease was not extended a third into the claim window")
	}
	if got, want := st.taken(), []time.Duration{hold - claim/3}; !slices.Equal(got, want) {
		t.Fatalf("extensions asked for %v, want %v: one, to the end of the %v hold", got, want, hold)
	}
	clk.Advance(hold - margin - claim/3 - time.Nanosecond)
	if !alarmSettled(t, clk, m) {
		t.Fatalf("the section ended before T+%v, the hold less the margin (claim window %v): %v", hold-margin, claim, context.Cause(m.Context()))
	}
	clk.Advance(time.Nanosecond)
	select {
	case <-m.Context().Done():
		if cause := context.Cause(m.Context()); !errors.Is(cause, synclock.ErrLeaseExpired) {
			t.Errorf("the section ended with %v, want ErrLeaseExpired", cause)
		}
	case <-ctx.Done():
		t.Fatalf("the section was not cancelled at T+%v, the %v hold less the margin", hold-margin, hold)
	}
	if err := m.Unlock(ctx); !errors.Is(err, synclock.ErrLeaseExpired) {
		t.Errorf("Unlock at the end of the hold: %v, want ErrLeaseExpired", err)
	}
	if n := len(st.taken()); n != 1 {
		t.Errorf("the lease was extended %d times, want once", n)
	}
}

// An instance that dies while it waits in line may be handed the lock by
// the next release; the lock then stays blocked only for that waiter's
// claim window, not for the whole hold, and the next waiter gets it.
func TestCrashedWaiterBlocksOnlyClaimWindow(t *testing.T) {
	eachStore(t, testCrashedWaiterBlocksOnlyClaimWindow)
}

func testCrashedWaiterBlocksOnlyClaimWindow(t *testing.T, newStore func(testing.TB) backend.Store) {
	cfg := synclock.Config{HoldDuration: time.Minute, ClaimWindow: 500 * time.Millisecond}
	key := uniqueKey(t)
	store := newStore(t)
	// The holder's own first lease is the whole hold: a 500ms one would
	// have to be extended in time on a busy machine.
	holder := lockerOn(t, 1, store, synclock.Config{HoldDuration: time.Minute, ClaimWindow: time.Minute})
	m := holder.Mutex(key)
	if err := m.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}

	// The doomed waiter joins the line, then dies: its Lock gives up and,
	// like a killed process, leaves its place behind.
	doomed := lockerOn(t, 2, crashingWaiter{newStore(t).(lineStore)}, cfg)
	dctx, kill := context.WithCancel(ctxT(t))
	died := make(chan error, 1)
	go func() { died <- doomed.DoKey(dctx, key, func(context.Context) error { return nil }) }()
	waitFor(t, "the doomed waiter is in line", func() bool { return waiters(t, store, key) == 1 })
	kill()
	if err := <-died; !errors.Is(err, context.Canceled) {
		t.Fatalf("doomed waiter: %v, want Canceled", err)
	}

	next := lockerOn(t, 3, newStore(t), cfg)
	got := make(chan time.Time, 1)
	done := make(chan error, 1)
	go func() {
		done <- next.DoKey(ctxT(t), key, func(context.Context) error { got <- time.Now(); return nil })
	}()
	defer func() {
		if err := <-done; err != nil {
			t.Errorf("next waiter: %v", err)
		}
	}()
	waitFor(t, "the next waiter is in line", func() bool { return waiters(t, store, key) == 2 })

	released := time.Now()
	if err := m.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// The release hands the lock to the dead waiter, first in line.
	select {
	case at := <-got:
		// Well inside the one-minute hold a dead grantee would have kept
		// without the claim window.
		if wait := at.Sub(released); wait >= 20*time.Second {
			t.Fatalf("the next waiter got the lock %v after the release", wait)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the lock stayed with the dead waiter for 20s; its claim window is 500ms")
	}
}

// A lock key written with a token no grant can have made (2^53-1, far
// beyond the server's clock) is corrupt data: TryLock fails with
// ErrCorrupt naming the Redis key and runs nothing, the Locker keeps no
// floor from it, and once the bad key is deleted the lock is taken again,
// by the same Locker, with a token from the clock.
func TestForgedTokenDoesNotPoison(t *testing.T) {
	ctx := ctxT(t)
	lk, st := redisLocker(t, 1, synclock.Config{})
	key := uniqueKey(t)
	name := st.(*redisbackend.Store).LeaseKey(backend.AppKey("acme", "billing", "lock", key))
	rdb := server.Client(t)
	if err := rdb.Set(ctx, name, "9007199254740991 forger", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	ran := false
	err := tryDo(lk, ctx, key, func(context.Context) error { ran = true; return nil })
	if ran || !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), name) {
		t.Fatalf("TryLock on the forged key: ran %v, %v; want ErrCorrupt naming %s", ran, err, name)
	}
	if err := rdb.Del(ctx, name).Err(); err != nil {
		t.Fatal(err)
	}
	var token uint64
	err = tryDo(lk, ctx, key, func(ctx context.Context) error { token, _ = synclock.Token(ctx); return nil })
	if err != nil || token == 0 || token > uint64(time.Now().Add(time.Hour).UnixMicro()) {
		t.Fatalf("TryLock once the forged key was deleted: token %d, %v; want the lock, with a token from the clock", token, err)
	}
}

// A floor the store refuses as ahead of its clock (ErrFloorAhead) is
// forgotten: the next claim asks without it and is granted, so a token
// once seen never locks the Locker out of the key.
func TestFloorAheadIsForgotten(t *testing.T) {
	ctx := ctxT(t)
	st := &storetest.Forging{Store: membackend.New()}
	lk := lockerOn(t, 1, st, synclock.Config{})
	if err := tryDo(lk, ctx, "k", func(context.Context) error { return nil }); !errors.Is(err, synclock.ErrLocked) {
		t.Fatalf("TryLock while the forged holder is named: %v; want ErrLocked", err)
	}
	var token uint64
	err := tryDo(lk, ctx, "k", func(ctx context.Context) error { token, _ = synclock.Token(ctx); return nil })
	if err != nil || token >= backend.MaxToken-1 {
		t.Fatalf("TryLock after a floor the store refuses: token %d, %v; want the lock with a token from the clock", token, err)
	}
}
