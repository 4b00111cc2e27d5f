package synclock_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/synclock"
)

// recorder collects a Locker's events.
type recorder struct {
	mu     sync.Mutex
	events []synclock.Event
}

func (r *recorder) observe(e synclock.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

// take returns the events so far and forgets them.
func (r *recorder) take() []synclock.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

func kinds(ev []synclock.Event) []synclock.EventKind {
	var ks []synclock.EventKind
	for _, e := range ev {
		ks = append(ks, e.Kind)
	}
	return ks
}

func observedLocker(t testing.TB, n int, st backend.Store, cfg synclock.Config) (*synclock.Locker, *recorder) {
	t.Helper()
	r := &recorder{}
	return lockerOn(t, n, st, cfg, synclock.WithObserver(r.observe)), r
}

// The observer sees each step of a lock with the figures metrics need:
// acquisitions with their wait and claims, refusals with their reason,
// releases with the time held, and whether a release handed the lock on.
func TestObserverSeesEachStep(t *testing.T) {
	st := membackend.New()
	defer st.Close()
	a, ra := observedLocker(t, 1, st, synclock.Config{})
	b, rb := observedLocker(t, 2, st, synclock.Config{RetryInterval: time.Hour})
	key := "observed"

	if err := a.DoKey(ctxT(t), key, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	ev := ra.take()
	if want := []synclock.EventKind{synclock.EventAcquired, synclock.EventReleased}; !slices.Equal(kinds(ev), want) {
		t.Fatalf("events of one DoKey: %v, want %v", kinds(ev), want)
	}
	if acq, rel := ev[0], ev[1]; acq.Key != key || acq.Tries != 1 || acq.Handed || acq.Token == 0 ||
		rel.Token != acq.Token || rel.Err != nil {
		t.Fatalf("acquired %+v, released %+v: want key %q, 1 try, not handed, one token, no error", acq, rel, key)
	}

	// b waits while a holds; a's release hands the lock to b.
	m := a.Mutex(key)
	if err := m.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := tryDo(b, ctxT(t), key, func(context.Context) error { return nil }); !errors.Is(err, synclock.ErrLocked) {
		t.Fatalf("TryLock on a held lock: %v", err)
	}
	if ev := rb.take(); len(ev) != 1 || ev[0].Kind != synclock.EventRefused || !errors.Is(ev[0].Err, synclock.ErrLocked) || ev[0].Tries != 1 {
		t.Fatalf("events of a refused TryLock: %+v, want one EventRefused wrapping ErrLocked after 1 try", ev)
	}
	done := make(chan error, 1)
	go func() { done <- b.DoKey(ctxT(t), key, func(context.Context) error { return nil }) }()
	waitFor(t, "b waits in line", func() bool { return someoneInLine(st, key) })
	if err := m.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ev = rb.take()
	if len(ev) != 2 || ev[0].Kind != synclock.EventAcquired || !ev[0].Handed || ev[0].Tries != 1 || ev[0].Wait <= 0 {
		t.Fatalf("events of the waiter: %+v, want EventAcquired handed over after 1 claim, then EventReleased", ev)
	}
}

// someoneInLine reports whether the memory store names a waiter first in
// key's line: a try with patience 0, which never joins, is refused naming
// it. Call it only while the key is held.
func someoneInLine(st *membackend.Store, key string) bool {
	_, err := st.AcquireQueued(context.Background(), backend.AppKey("acme", "billing", "lock", key), "probe", time.Second, 0, 0)
	var held *backend.HeldError
	return errors.As(err, &held) && held.Next != ""
}

// A lease that runs out is reported as lost, then released with
// ErrLeaseExpired; a section that outlives the claim window reports the
// extension.
func TestObserverSeesLeaseEvents(t *testing.T) {
	st := membackend.New()
	defer st.Close()

	// An observer slow to take EventLost must still see it before
	// EventReleased, which the section's return brings at once.
	rs := &recorder{}
	short := lockerOn(t, 1, st, synclock.Config{HoldDuration: 100 * time.Millisecond}, synclock.WithObserver(func(e synclock.Event) {
		if e.Kind == synclock.EventLost {
			time.Sleep(50 * time.Millisecond)
		}
		rs.observe(e)
	}))
	_ = short.DoKey(ctxT(t), "short", func(ctx context.Context) error { <-ctx.Done(); return nil })
	ev := rs.take()
	if want := []synclock.EventKind{synclock.EventAcquired, synclock.EventLost, synclock.EventReleased}; !slices.Equal(kinds(ev), want) {
		t.Fatalf("events of a section past its hold: %v, want %v", kinds(ev), want)
	}
	if !errors.Is(ev[1].Err, synclock.ErrLeaseExpired) || !errors.Is(ev[2].Err, synclock.ErrLeaseExpired) || ev[2].Held < ev[1].Held {
		t.Fatalf("lost %+v, released %+v: want both ErrLeaseExpired, released no earlier than lost", ev[1], ev[2])
	}

	// A holding past a third of its claim window is extended. On the fake
	// clock, so that the extension has all the time it needs to land.
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	fst := membackend.New(membackend.WithClock(clk))
	defer fst.Close()
	const claim = 600 * time.Millisecond
	rl := &recorder{}
	extended := make(chan struct{}, 1)
	long := lockerOn(t, 2, fst, synclock.Config{HoldDuration: 5 * time.Second, ClaimWindow: claim}, synclock.WithClock(clk), synclock.WithObserver(func(e synclock.Event) {
		rl.observe(e)
		if e.Kind == synclock.EventExtended {
			extended <- struct{}{}
		}
	}))
	m := long.Mutex("long")
	if err := m.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	clk.Advance(claim / 3)
	select {
	case <-extended:
	case <-m.Context().Done():
		t.Fatalf("the holding ended (%v) instead of being extended", context.Cause(m.Context()))
	case <-time.After(patience):
		t.Fatal("the lease was never extended")
	}
	if err := m.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if got, want := kinds(rl.take()), []synclock.EventKind{synclock.EventAcquired, synclock.EventExtended, synclock.EventReleased}; !slices.Equal(got, want) {
		t.Fatalf("events of a section past its claim window: %v, want %v", got, want)
	}
}
