package membackend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/internal/clock"
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

	if _, err := s.Acquire(ctx, "k", "a", time.Minute, 0); err != nil {
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
	if err != nil || l.Token != 2 {
		t.Fatalf("acquire after keep time: %+v, %v; want token 2", l, err)
	}
}

func TestResetDropsFencingCounters(t *testing.T) {
	ctx := context.Background()
	s := membackend.New()
	defer s.Close()
	for i := range 3 {
		if _, err := s.Acquire(ctx, "k", "a", time.Minute, 0); err != nil {
			t.Fatal(i, err)
		}
		if err := s.Release(ctx, "k", "a", 0); err != nil {
			t.Fatal(i, err)
		}
	}
	s.Reset()
	l, err := s.Acquire(ctx, "k", "a", time.Minute, 0)
	if err != nil || l.Token != 1 {
		t.Fatalf("after Reset without floor: %+v, %v; want token 1", l, err)
	}
	s.Reset()
	l, err = s.Acquire(ctx, "k", "a", time.Minute, 3)
	if err != nil || l.Token != 4 {
		t.Fatalf("after Reset with floor 3: %+v, %v; want token 4", l, err)
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
