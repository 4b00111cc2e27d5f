package synclock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/synclock"
)

// countingClock counts the timers armed on a fake clock.
type countingClock struct {
	*clock.Fake
	armed atomic.Int32 // AfterFunc and Reset calls
}

func (c *countingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.armed.Add(1)
	return countingTimer{c.Fake.AfterFunc(d, f), c}
}

type countingTimer struct {
	clock.Timer
	c *countingClock
}

func (t countingTimer) Reset(d time.Duration) bool {
	t.c.armed.Add(1)
	return t.Timer.Reset(d)
}

// shortStore grants the store key ending in key short leases of ttl, as
// a store does that hands over a lease granted a while ago.
type shortStore struct {
	grantingStore
	key string
	ttl time.Duration
}

func (s *shortStore) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	lease, err := s.grantingStore.Acquire(ctx, key, owner, ttl, floor)
	if strings.HasSuffix(key, s.key) {
		lease.TTL = s.ttl
	}
	return lease, err
}

// Arming a runtime timer on every lock cycle wakes a scheduler thread
// each time; the grants' deadlines share one timer, which an uncontended
// cycle does not touch.
func TestLockCyclesArmNoTimer(t *testing.T) {
	clk := &countingClock{Fake: clock.NewFake(time.Unix(1_700_000_000, 0))}
	lk := lockerOn(t, 1, &grantingStore{}, synclock.Config{}, synclock.WithClock(clk))
	ctx := ctxT(t)
	m := lk.Mutex("cycles")
	for range 100 {
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Millisecond)
	}
	if n := clk.armed.Load(); n != 1 {
		t.Errorf("100 lock cycles armed a timer %d times, want 1", n)
	}
}

// The shared timer still ends every lease on time: after going off for a
// released grant it is armed again for the next deadline, and a grant due
// before the armed time moves it earlier.
func TestLeaseDeadlinesShareOneTimer(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0)) // T
	// Leases of 10 s, given up a margin (1 s) before they end, except c's:
	// a 2 s lease, as a store hands over, which the holder starts renewing
	// after a third of it.
	store := &shortStore{key: ":c", ttl: 2 * time.Second}
	cfg := synclock.Config{HoldDuration: 10 * time.Second, ClaimWindow: 10 * time.Second}
	extended := make(chan string, 1)
	observe := synclock.WithObserver(func(ev synclock.Event) {
		if ev.Kind == synclock.EventExtended {
			extended <- ev.Key
		}
	})
	lk := lockerOn(t, 1, store, cfg, observe, synclock.WithClock(clk))
	ctx := ctxT(t)
	lock := func(key string) *synclock.Mutex {
		t.Helper()
		m := lk.Mutex(key)
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		return m
	}
	held := func(m *synclock.Mutex, name, when string) {
		t.Helper()
		if m.Context().Err() != nil {
			t.Fatalf("%s's lease was given up at %s, before its time", name, when)
		}
	}

	a := lock("a") // due at T+9s: the timer is armed for then
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	b := lock("b") // due at T+11s: the timer stays armed for T+9s
	clk.Advance(7 * time.Second)
	if !clk.WaitForTimers(1, ctx.Done()) {
		t.Fatal("the timer was not armed again after going off for a released grant")
	}
	held(b, "b", "T+9s")

	c := lock("c") // due for renewal at T+9.67s, before the timer's T+11s
	clk.Advance(700 * time.Millisecond)
	select {
	case key := <-extended:
		if key != "c" {
			t.Fatalf("the lease of %q was extended, want c's", key)
		}
	case <-ctx.Done():
		t.Fatal("c's lease was not renewed a third into it: its deadline did not move the timer earlier")
	}
	held(b, "b", "T+9.7s")

	clk.Advance(1300 * time.Millisecond) // T+11s: b's lease is given up
	select {
	case <-b.Context().Done():
		if cause := context.Cause(b.Context()); !errors.Is(cause, synclock.ErrLeaseExpired) {
			t.Errorf("b's section ended with %v, want ErrLeaseExpired", cause)
		}
	case <-ctx.Done():
		t.Fatal("b's lease was never given up")
	}
	if err := b.Unlock(ctx); !errors.Is(err, synclock.ErrLeaseExpired) {
		t.Errorf("b: Unlock after the lease was given up: %v, want ErrLeaseExpired", err)
	}
	held(c, "c", "T+11s")
	if err := c.Unlock(ctx); err != nil {
		t.Errorf("c: Unlock of a renewed lease: %v", err)
	}
}

// A renewed holding ends at the Config.AutoRenew ceiling, a margin before
// its last lease does, and not a moment earlier: a 3s hold renewed once,
// a third into it, lasts to the 4s ceiling less the 300ms margin.
func TestAutoRenewStopsAtCeiling(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0)) // T
	extended := make(chan struct{}, 1)
	observe := synclock.WithObserver(func(ev synclock.Event) {
		if ev.Kind == synclock.EventExtended {
			extended <- struct{}{}
		}
	})
	cfg := synclock.Config{HoldDuration: 3 * time.Second, ClaimWindow: 3 * time.Second, AutoRenew: 4 * time.Second}
	lk := lockerOn(t, 1, &grantingStore{}, cfg, observe, synclock.WithClock(clk))
	ctx := ctxT(t)
	m := lk.Mutex("ceiling")
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if !clk.WaitForTimers(1, ctx.Done()) {
		t.Fatal("no deadline was armed")
	}
	clk.Advance(time.Second) // T+1s: the renewal extends to T+4s
	select {
	case <-extended:
	case <-ctx.Done():
		t.Fatal("the lease was not extended a third into it")
	}
	clk.Advance(2700*time.Millisecond - time.Nanosecond)
	if !alarmSettled(t, clk, m) {
		t.Fatalf("the holding ended before the ceiling's deadline (T+3.7s): %v", context.Cause(m.Context()))
	}
	clk.Advance(time.Nanosecond)
	select {
	case <-m.Context().Done():
		if cause := context.Cause(m.Context()); !errors.Is(cause, synclock.ErrLeaseExpired) {
			t.Errorf("the holding ended with %v, want ErrLeaseExpired", cause)
		}
	case <-ctx.Done():
		t.Fatal("the holding did not end at the ceiling")
	}
	if err := m.Unlock(ctx); !errors.Is(err, synclock.ErrLeaseExpired) {
		t.Errorf("Unlock past the ceiling: %v, want ErrLeaseExpired", err)
	}
}

// alarmSettled waits, after an Advance that made the Locker's alarm go off
// for a deadline m's grant no longer has (it was extended), until the
// alarm has acted: armed itself again for a later deadline, or ended m's
// section because its deadline had come. The fake clock runs the alarm on
// a goroutine of its own, so a look at m's context right after Advance
// may come before the alarm runs and miss a section ended too early. It
// reports whether m's section is still live. Only m's grant may be on the
// Locker's alarm, and no other timer of the clock may be armed.
func alarmSettled(t *testing.T, clk *clock.Fake, m *synclock.Mutex) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(ctxT(t))
	defer cancel()
	stop := context.AfterFunc(m.Context(), cancel)
	defer stop()
	if !clk.WaitForTimers(1, ctx.Done()) && m.Context().Err() == nil {
		t.Fatalf("the alarm neither armed itself again nor ended the section within %v", patience)
	}
	return m.Context().Err() == nil
}
