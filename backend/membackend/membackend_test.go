package membackend_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/backend/membackend"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// The store's own clock decides expiry: real time passing changes nothing,
// the store's clock passing the TTL frees the key at that instant.
func TestExpiryFollowsStoreClock(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(start)
	s := membackend.New(membackend.WithClock(clk))
	defer s.Close()

	if _, err := s.Acquire(ctx, "k", "a", 10*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10*time.Second - time.Millisecond)
	l, err := s.Get(ctx, "k")
	if err != nil || l.Owner != "a" || l.TTL != time.Millisecond {
		t.Fatalf("1ms before expiry: Get = %+v, %v; want owner a with 1ms left", l, err)
	}
	clk.Advance(time.Millisecond)
	if _, err := s.Get(ctx, "k"); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("at expiry: Get err = %v, want ErrNotFound", err)
	}
	if _, err := s.Renew(ctx, "k", "a", time.Second); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("renew after expiry: err = %v, want ErrNotHeld", err)
	}
}

func TestWatchSignalsExpiry(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(start)
	s := membackend.New(membackend.WithClock(clk))
	defer s.Close()

	if _, err := s.Acquire(ctx, "k", "a", time.Second, 0); err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	select {
	case <-w.C():
		t.Fatal("signalled while the lease is live")
	default:
	}
	clk.Advance(time.Second)
	select {
	case <-w.C():
	case <-time.After(10 * time.Second):
		t.Fatal("no signal after the lease expired")
	}
}

func TestReleaseKeepForUsesStoreClock(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(start)
	s := membackend.New(membackend.WithClock(clk))
	defer s.Close()

	first, err := s.Acquire(ctx, "k", "a", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, "k", "a", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// A second release with a keep time changes nothing.
	clk.Advance(20 * time.Second)
	if err := s.Release(ctx, "k", "a", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "k", "b", time.Minute, 0); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("acquire while kept: err = %v, want ErrHeld", err)
	}
	clk.Advance(10 * time.Second)
	l, err := s.Acquire(ctx, "k", "b", time.Minute, 0)
	if err != nil || l.Token <= first.Token {
		t.Fatalf("acquire after keep time: %+v, %v; want a token above %d", l, err, first.Token)
	}
}

// Tokens come from the store's clock when the counter is gone: a Reset
// (all data lost) and a brand-new caller without a floor still get a token
// above every earlier one, even on a fake clock that does not move.
func TestTokensIncreaseAcrossResetWithoutFloor(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(start)
	s := membackend.New(membackend.WithClock(clk))
	defer s.Close()
	var last uint64
	grant := func(what string, floor uint64) {
		t.Helper()
		l, err := s.Acquire(ctx, "k", "a", time.Minute, floor)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if l.Token <= last {
			t.Fatalf("%s: token %d, not above the earlier %d", what, l.Token, last)
		}
		if l.Token <= uint64(start.UnixMicro()) {
			t.Fatalf("%s: token %d is below the store's clock in µs (%d)", what, l.Token, start.UnixMicro())
		}
		last = l.Token
		if err := s.Release(ctx, "k", "a", 0); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		grant("before Reset", 0)
	}
	s.Reset()
	grant("after Reset without a floor", 0)
	s.Reset()
	grant("after Reset with a floor below the clock", 3)
	big := last + uint64(10*time.Hour/time.Microsecond)
	grant("with a floor far above the clock", big)
	s.Reset()
	grant("after Reset with the big floor", last)
}

// A counter lapses FenceLife after its key's last grant, so per-entity keys
// do not pile up, and the next token, from the clock, is still larger. A
// counter that a floor put far ahead of the clock is kept.
func TestIdleCountersLapse(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(start)
	s := membackend.New(membackend.WithClock(clk))
	defer s.Close()
	cycle := func(key string, floor uint64) uint64 {
		t.Helper()
		l, err := s.Acquire(ctx, key, "a", time.Second, floor)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, key, "a", 0); err != nil {
			t.Fatal(err)
		}
		return l.Token
	}
	const keys = 200
	var before [keys]uint64
	for i := range keys {
		before[i] = cycle(fmt.Sprintf("invoice:%d", i), 0)
	}
	ahead := cycle("ahead", uint64(start.Add(100*membackend.FenceLife).UnixMicro()))
	if n := membackend.Counters(s); n != keys+1 {
		t.Fatalf("%d counters after %d keys were granted; want %d", n, keys+1, keys+1)
	}
	clk.Advance(membackend.FenceLife)
	for i := range keys {
		if tok := cycle(fmt.Sprintf("invoice:%d", i), 0); tok <= before[i] {
			t.Fatalf("invoice:%d, idle past its counter's life: token %d, not above %d", i, tok, before[i])
		}
	}
	clk.Advance(membackend.FenceLife)
	// Grants sweep lapsed counters once their number has doubled.
	for i := range 2 * keys {
		cycle(fmt.Sprintf("later:%d", i), 0)
	}
	if n := membackend.Counters(s); n != 2*keys+1 {
		t.Errorf("%d counters are kept after %d keys were granted and all others but one were idle past FenceLife; want %d", n, 2*keys, 2*keys+1)
	}
	if tok := cycle("ahead", 0); tok <= ahead {
		t.Errorf("a key whose counter a floor put ahead of the clock got token %d after idling, not above %d", tok, ahead)
	}
}

// After Restart, a key not granted since is refused, as recovering, until
// the ttl asked for (or WithRestartGuard, if longer) has passed since the
// restart: the holder of a lease the restart lost may believe in it until
// then. AcquireQueued is refused the same way and joins no line.
func TestRestartGuard(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		opts  []membackend.Option
		guard time.Duration
	}{
		{"ttl", nil, 10 * time.Second},
		{"WithRestartGuard", []membackend.Option{membackend.WithRestartGuard(time.Minute)}, time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(start)
			s := membackend.New(append(c.opts, membackend.WithClock(clk))...)
			defer s.Close()
			old, err := s.Acquire(ctx, "k", "a", 10*time.Second, 0)
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(5 * time.Second)
			s.Restart()
			refused := func(what string, left time.Duration) {
				t.Helper()
				_, err := s.Acquire(ctx, "k", "b", 10*time.Second, 0)
				var he *backend.HeldError
				if !errors.As(err, &he) || !he.Recovering || he.Holder.Owner != "" || he.Holder.TTL != left {
					t.Fatalf("%s: Acquire = %v; want a recovering HeldError with %v left", what, err, left)
				}
				_, err = s.AcquireQueued(ctx, "k", "b", 10*time.Second, 0, time.Hour)
				if !errors.As(err, &he) || !he.Recovering || he.Holder.TTL != left || he.Next != "" {
					t.Fatalf("%s: AcquireQueued = %v; want a recovering HeldError with %v left and nobody in line", what, err, left)
				}
			}
			refused("at the restart", c.guard)
			clk.Advance(c.guard - time.Millisecond)
			refused("just before the guard ends", time.Millisecond)
			clk.Advance(time.Millisecond)
			l, err := s.Acquire(ctx, "k", "c", 10*time.Second, 0)
			if err != nil || l.Token <= old.Token {
				t.Fatalf("after the guard: %+v, %v; want a grant above token %d", l, err, old.Token)
			}
			// Granted since the restart: no longer guarded.
			if err := s.Release(ctx, "k", "c", 0); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Acquire(ctx, "k", "d", 10*time.Second, 0); err != nil {
				t.Fatalf("a key granted since the restart: %v", err)
			}
		})
	}
}

// Reset, a FLUSHALL, does not start the guard: the store cannot tell it
// from its clock, as Redis cannot.
func TestResetDoesNotGuard(t *testing.T) {
	ctx := context.Background()
	s := membackend.New()
	defer s.Close()
	s.Reset()
	if _, err := s.Acquire(ctx, "k", "a", time.Minute, 0); err != nil {
		t.Fatalf("after Reset: %v", err)
	}
}

func TestClosedStore(t *testing.T) {
	ctx := context.Background()
	s := membackend.New()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "k", "a", time.Second, 0); !errors.Is(err, backend.ErrClosed) {
		t.Fatalf("acquire after Close: err = %v, want ErrClosed", err)
	}
	if _, err := s.Watch(ctx, "k"); !errors.Is(err, backend.ErrClosed) {
		t.Fatalf("watch after Close: err = %v, want ErrClosed", err)
	}
}

// A handover collected after it happened carries what is left of the
// lease on the store's clock, as every Lease does, and one whose lease
// ended before it was collected is not returned.
func TestHandoverTTLIsWhatIsLeft(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(start)
	s := membackend.New(membackend.WithClock(clk))
	defer s.Close()

	handOver := func(key string) {
		t.Helper()
		if _, err := s.Acquire(ctx, key, "holder", time.Minute, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AcquireQueued(ctx, key, "waiter", 10*time.Second, 0, time.Hour); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("the waiter's AcquireQueued: %v, want ErrHeld", err)
		}
		if err := s.Release(ctx, key, "holder", 0); err != nil {
			t.Fatal(err)
		}
	}
	handOver("k")
	clk.Advance(4 * time.Second)
	l, ok, err := s.AwaitHandover(ctx, "k", "waiter", time.Millisecond)
	if err != nil || !ok || l.Owner != "waiter" || l.TTL != 6*time.Second {
		t.Fatalf("AwaitHandover 4s after a handover for 10s: %+v, %v, %v; want the waiter's lease with 6s left", l, ok, err)
	}

	handOver("gone")
	clk.Advance(10 * time.Second)
	type result struct {
		l   backend.Lease
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, ok, err := s.AwaitHandover(ctx, "gone", "waiter", time.Second)
		done <- result{l, ok, err}
	}()
	for { // the wait ends by the store's clock, which only the test moves
		select {
		case r := <-done:
			if r.err != nil || r.ok {
				t.Fatalf("AwaitHandover after the handed lease ended: %+v, %v, %v; want nothing", r.l, r.ok, r.err)
			}
			return
		case <-time.After(time.Millisecond):
			clk.Advance(time.Second)
		}
	}
}
