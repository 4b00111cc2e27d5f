package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// breakCases are the parallel subtests of stores that implement
// backend.Breaker (Run adds them only for those); BreakWithWaiter only
// with queue, for stores that also implement backend.Queue.
func (s *suite) breakCases(queue bool) []testCase {
	cases := []testCase{
		{"Break", s.testBreak},
		{"BreakKept", s.testBreakKept},
		{"BreakArguments", s.testBreakArguments},
	}
	if queue {
		cases = append(cases, testCase{"BreakWithWaiter", s.testBreakWithWaiter})
	}
	return cases
}

// breaker returns a new client of the store under test as a
// backend.Breaker; Run calls the Break subtests only for stores that
// implement it.
func (s *suite) breaker(t *testing.T) backend.Breaker {
	t.Helper()
	b, ok := s.store(t).(backend.Breaker)
	if !ok {
		t.Fatal("backendtest: a Break subtest ran on a store without backend.Breaker")
	}
	return b
}

// breakLease breaks key's lease through b and fails t unless the store
// returns want's lease, with a TTL in (0, max].
func breakLease(t testing.TB, b backend.Breaker, key string, want backend.Lease, max time.Duration, what string) {
	t.Helper()
	got, err := b.Break(testCtx(t), key)
	if err != nil {
		t.Fatalf("%s: Break(%q): %v", what, key, err)
	}
	if got.Key != key || got.Owner != want.Owner || got.Token != want.Token || got.TTL <= 0 || got.TTL > max {
		t.Errorf("%s: Break(%q) returned %+v; want %q's lease (token %d) with a TTL in (0, %v]", what, key, got, want.Owner, want.Token, max)
	}
}

// testBreak checks Break on a lease nobody waits for: it returns the
// holder's lease, the key is free at once and watchers on another client
// are told (EventReleased), the old holder's Renew and Release are
// refused with ErrNotHeld, before and after another owner takes the key,
// and the next grant's token is above every token granted before the
// break (the broken one, and the earlier grant whose release left the
// counter where the broken grant found it).
func (s *suite) testBreak(t *testing.T) {
	ctx := testCtx(t)
	a, b, watcher := s.store(t), s.breaker(t), s.store(t)
	key := s.key("break")

	first := s.acquire(t, ctx, a, key, "a", longTTL, 0)
	release(t, ctx, a, key, "a", 0)
	held := s.acquire(t, ctx, a, key, "a", longTTL, 0)
	if held.Token <= first.Token {
		t.Fatalf("a's second token %d is not above its first %d", held.Token, first.Token)
	}
	w := watch(t, ctx, watcher, key)

	breakLease(t, b, key, held, longTTL, "Break of a's lease")
	awaitRelease(t, w, longTTL, "", "watchers of the broken key")
	checkFree(t, ctx, watcher, key, "after Break")
	_, err := a.Renew(ctx, key, "a", longTTL)
	checkNotHeld(t, "the old holder's Renew after Break", err, key, "a", backend.Lease{})
	err = a.Release(ctx, key, "a", 0)
	checkNotHeld(t, "the old holder's Release after Break", err, key, "a", backend.Lease{})

	next := s.acquire(t, ctx, watcher, key, "c", longTTL, 0)
	if next.Token <= held.Token || next.Token <= first.Token {
		t.Errorf("the next grant's token %d is not above the broken token %d and the counter before the break", next.Token, held.Token)
	}
	_, err = a.Renew(ctx, key, "a", longTTL)
	checkNotHeld(t, "the old holder's Renew once c holds the key", err, key, "a", next)
	err = a.Release(ctx, key, "a", 0)
	checkNotHeld(t, "the old holder's Release once c holds the key", err, key, "a", next)
	if l := get(t, ctx, a, key); l.Owner != "c" || l.Token != next.Token {
		t.Errorf("the old holder's calls changed the lease: %q (token %d); want c's (token %d)", l.Owner, l.Token, next.Token)
	}
	release(t, ctx, watcher, key, "c", 0)
}

// testBreakKept checks that Break ends a lease released with a keep time
// (a job lock's lockAtLeastFor) too, and that a free key cannot be broken
// (ErrNotFound) and stays free.
func (s *suite) testBreakKept(t *testing.T) {
	ctx := testCtx(t)
	a, b := s.store(t), s.breaker(t)
	key := s.key("break-kept")

	_, err := b.Break(ctx, key)
	if !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Break of a key never held: %v; want an error wrapping backend.ErrNotFound", err)
	}
	held := s.acquire(t, ctx, a, key, "a", longTTL, 0)
	release(t, ctx, a, key, "a", longTTL)
	breakLease(t, b, key, held, longTTL, "Break of a lease kept after its release")
	checkFree(t, ctx, a, key, "after Break of the kept lease")
	_, err = b.Break(ctx, key)
	if !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Break of the broken key: %v; want an error wrapping backend.ErrNotFound", err)
	}
	next := s.acquire(t, ctx, a, key, "a", longTTL, 0)
	if next.Token <= held.Token {
		t.Errorf("the next grant's token %d is not above the broken token %d", next.Token, held.Token)
	}
	release(t, ctx, a, key, "a", 0)
}

// testBreakWithWaiter checks Break on a key with a waiter in line (stores
// with backend.Queue): the key passes to the waiter as the holder's
// release would pass it (see passedTo), with a token above the broken
// one, and the old holder's Renew and Release are refused.
func (s *suite) testBreakWithWaiter(t *testing.T) {
	ctx := testCtx(t)
	h, a, watcher := s.queue(t), s.queue(t), s.queue(t)
	b := s.breaker(t)
	key := s.key("break-waiter")

	w, held := s.holdWithWaiter(t, ctx, h, a, watcher, key, waitPatience)
	breakLease(t, b, key, held, longTTL, "Break of h's lease with a in line")
	la := s.passedTo(t, ctx, w, a, watcher, key, "a", longTTL, held.Token, "Break with a in line")
	_, err := h.Renew(ctx, key, "h", longTTL)
	checkNotHeld(t, "the old holder's Renew after Break", err, key, "h", la)
	err = h.Release(ctx, key, "h", 0)
	checkNotHeld(t, "the old holder's Release after Break", err, key, "h", la)
	release(t, ctx, a, key, "a", 0)
}

// testBreakArguments checks that Break validates its key and honours an
// ended context, changing nothing.
func (s *suite) testBreakArguments(t *testing.T) {
	ctx := testCtx(t)
	a, b := s.store(t), s.breaker(t)
	key := s.key("break-args")
	for why, bad := range invalidKeys(key) {
		if _, err := b.Break(ctx, bad); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("Break(%q) (%s): %v; want an error wrapping backend.ErrInvalidArgument", bad, why, err)
		}
	}
	held := s.acquire(t, ctx, a, key, "a", longTTL, 0)
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Break(ended, key); !errors.Is(err, context.Canceled) {
		t.Errorf("Break with a cancelled context: %v; want an error wrapping context.Canceled", err)
	}
	if l := get(t, ctx, a, key); l.Owner != "a" || l.Token != held.Token {
		t.Errorf("Break with an ended context changed the lease: %q (token %d); want a's (token %d)", l.Owner, l.Token, held.Token)
	}
	release(t, ctx, a, key, "a", 0)
}
