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
		{"BreakChanged", s.testBreakChanged},
	}
	if queue {
		cases = append(cases, testCase{"BreakWithWaiter", s.testBreakWithWaiter}, testCase{"BreakHandedOver", s.testBreakHandedOver})
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

// breakLease breaks want's lease on key through b and fails t unless the
// store returns want's lease, with a TTL in (0, max].
func breakLease(t testing.TB, b backend.Breaker, key string, want backend.Lease, max time.Duration, what string) {
	t.Helper()
	got, err := b.Break(testCtx(t), key, want.Owner, want.Token)
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

	_, err := b.Break(ctx, key, "a", 1)
	if !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Break of a key never held: %v; want an error wrapping backend.ErrNotFound", err)
	}
	held := s.acquire(t, ctx, a, key, "a", longTTL, 0)
	release(t, ctx, a, key, "a", longTTL)
	breakLease(t, b, key, held, longTTL, "Break of a lease kept after its release")
	checkFree(t, ctx, a, key, "after Break of the kept lease")
	_, err = b.Break(ctx, key, held.Owner, held.Token)
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

// testBreakArguments checks that Break validates its key and owner and
// honours an ended context, changing nothing.
func (s *suite) testBreakArguments(t *testing.T) {
	ctx := testCtx(t)
	a, b := s.store(t), s.breaker(t)
	key := s.key("break-args")
	for why, bad := range invalidKeys(key) {
		if _, err := b.Break(ctx, bad, "a", 1); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("Break(%q) (%s): %v; want an error wrapping backend.ErrInvalidArgument", bad, why, err)
		}
	}
	held := s.acquire(t, ctx, a, key, "a", longTTL, 0)
	for why, bad := range invalidOwners() {
		if _, err := b.Break(ctx, key, bad, held.Token); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("Break(%q, owner %q) (%s): %v; want an error wrapping backend.ErrInvalidArgument", key, bad, why, err)
		}
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := b.Break(ended, key, held.Owner, held.Token); !errors.Is(err, context.Canceled) {
		t.Errorf("Break with a cancelled context: %v; want an error wrapping context.Canceled", err)
	}
	if l := get(t, ctx, a, key); l.Owner != "a" || l.Token != held.Token {
		t.Errorf("Break with an ended context changed the lease: %q (token %d); want a's (token %d)", l.Owner, l.Token, held.Token)
	}
	release(t, ctx, a, key, "a", 0)
}

// checkChanged fails t unless err is a *backend.ChangedError for the
// grant to owner with token on key, naming holder as the lease on key now.
func checkChanged(t testing.TB, what string, err error, key, owner string, token uint64, holder backend.Lease) {
	t.Helper()
	var ce *backend.ChangedError
	if !errors.As(err, &ce) || !errors.Is(err, backend.ErrLeaseChanged) {
		t.Fatalf("%s: err = %v; want a *backend.ChangedError", what, err)
	}
	if ce.Key != key || ce.Owner != owner || ce.Token != token {
		t.Errorf("%s: ChangedError is about %q (token %d) on %q; want %q (token %d) on %q", what, ce.Owner, ce.Token, ce.Key, owner, token, key)
	}
	if h := ce.Holder; h.Owner != holder.Owner || h.Token != holder.Token || h.Key != key || h.TTL <= 0 {
		t.Errorf("%s: ChangedError names %q's lease on %q (token %d, %v left); want %q's on %q (token %d)",
			what, h.Owner, h.Key, h.Token, h.TTL, holder.Owner, key, holder.Token)
	}
}

// checkUnbroken fails t unless want's lease is still on key, renewable by
// its owner.
func checkUnbroken(t testing.TB, ctx context.Context, st backend.Store, want backend.Lease, what string) {
	t.Helper()
	if l := get(t, ctx, st, want.Key); l.Owner != want.Owner || l.Token != want.Token {
		t.Fatalf("%s: key %q is held by %q (token %d); want %q's lease (token %d) untouched", what, want.Key, l.Owner, l.Token, want.Owner, want.Token)
	}
	if _, err := st.Renew(ctx, want.Key, want.Owner, longTTL); err != nil {
		t.Errorf("%s: %q's Renew: %v", what, want.Owner, err)
	}
}

// testBreakChanged checks that Break ends only the grant it names: an
// operator shows a's lease, a releases and b takes the key before the
// operator confirms; a Break of a's grant then ends nothing and names
// b's lease (ErrLeaseChanged), and so does a Break with b's owner and
// a's token, and one of a's older grant once a holds the key again.
func (s *suite) testBreakChanged(t *testing.T) {
	ctx := testCtx(t)
	a, b, c := s.store(t), s.store(t), s.breaker(t)
	key := s.key("break-changed")

	shown := s.acquire(t, ctx, a, key, "a", longTTL, 0)
	release(t, ctx, a, key, "a", 0)
	now := s.acquire(t, ctx, b, key, "b", longTTL, 0)
	_, err := c.Break(ctx, key, shown.Owner, shown.Token)
	checkChanged(t, "Break of a's grant once b holds the key", err, key, "a", shown.Token, now)
	checkUnbroken(t, ctx, b, now, "after the Break of a's grant")
	_, err = c.Break(ctx, key, "b", shown.Token)
	checkChanged(t, "Break of b with a's token", err, key, "b", shown.Token, now)
	checkUnbroken(t, ctx, b, now, "after the Break of b with a's token")
	release(t, ctx, b, key, "b", 0)

	again := s.acquire(t, ctx, a, key, "a", longTTL, 0)
	_, err = c.Break(ctx, key, "a", shown.Token)
	checkChanged(t, "Break of a's older grant once a holds the key again", err, key, "a", shown.Token, again)
	checkUnbroken(t, ctx, a, again, "after the Break of a's older grant")
	breakLease(t, c, key, again, longTTL, "Break of a's grant")
	checkFree(t, ctx, b, key, "after the Break of a's grant")
}

// testBreakHandedOver checks Break of a grant that its holder released
// to the waiter first in line (stores with backend.Queue) before the
// Break: nothing is ended, the waiter keeps the key.
func (s *suite) testBreakHandedOver(t *testing.T) {
	ctx := testCtx(t)
	h, a, watcher := s.queue(t), s.queue(t), s.queue(t)
	b := s.breaker(t)
	key := s.key("break-handed")

	w, held := s.holdWithWaiter(t, ctx, h, a, watcher, key, waitPatience)
	release(t, ctx, h, key, "h", 0)
	la := s.passedTo(t, ctx, w, a, watcher, key, "a", longTTL, held.Token, "h's release with a in line")
	_, err := b.Break(ctx, key, held.Owner, held.Token)
	checkChanged(t, "Break of h's grant once a was handed the key", err, key, "h", held.Token, la)
	checkUnbroken(t, ctx, a, la, "after the Break of h's grant")
	release(t, ctx, a, key, "a", 0)
}
