package backendtest

import "testing"

// testFloorAfterWipe raises a key's tokens, wipes the store as a restart
// without data would, and checks that an Acquire passing the highest
// token seen as its floor is granted a higher one. It first checks that
// the harness's Wipe really dropped leases and counters (a held lease is
// gone, and another key's tokens restart at 1 without a floor), so that
// the floor is what kept the tokens rising. A watcher of a lease the
// wipe lost may be told the key may be free, never that it was released.
func (s *suite) testFloorAfterWipe(t *testing.T) {
	ctx := testCtx(t)
	st := s.store(t)
	key, other := s.key("wipe", "fenced"), s.key("wipe", "unfenced")

	var seen uint64
	for range 3 {
		l := s.acquire(t, ctx, st, key, "before", longTTL, seen)
		seen = l.Token
		release(t, ctx, st, key, "before", 0)
	}
	seen = s.acquire(t, ctx, st, key, "before", longTTL, 500).Token // left held
	for range 3 {
		s.acquire(t, ctx, st, other, "before", longTTL, 0)
		release(t, ctx, st, other, "before", 0)
	}
	s.acquire(t, ctx, st, other, "before", longTTL, 0) // left held
	// A key never released, so that no earlier release can be reported
	// late (that is checked by Parallel/NoStaleReleaseEvents).
	watched := s.key("wipe", "watched")
	s.acquire(t, ctx, st, watched, "before", longTTL, 0)
	w := watch(t, ctx, st, watched)

	s.h.Wipe(t)
	checkNotReleaseEvent(t, w, "Wipe")
	st = s.store(t)
	checkFree(t, ctx, st, key, "after Wipe (the harness's Wipe must drop every lease)")
	checkFree(t, ctx, st, other, "after Wipe (the harness's Wipe must drop every lease)")
	if l := s.acquire(t, ctx, st, other, "after", longTTL, 0); l.Token != 1 {
		t.Fatalf("after Wipe, Acquire without a floor was granted token %d; want 1 (the harness's Wipe must drop the fencing counters)", l.Token)
	}

	l := s.acquire(t, ctx, st, key, "after", longTTL, seen)
	if l.Token != seen+1 {
		t.Errorf("after Wipe, Acquire(floor %d) was granted token %d; want %d", seen, l.Token, seen+1)
	}
	release(t, ctx, st, key, "after", 0)
	release(t, ctx, st, other, "after", 0)
}
