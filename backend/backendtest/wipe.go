package backendtest

import "testing"

// testFloorAfterWipe raises a key's counter above the clock with a floor,
// wipes the store, and checks that an Acquire passing the highest token
// seen as its floor is granted a higher one, and that an Acquire without a
// floor — a brand-new process, which has seen no token — is still granted
// a token above every earlier one (the clock). It first checks that the
// harness's Wipe really dropped leases and counters (a held lease is gone,
// and a counter raised far above the clock is back at the clock), so that
// the floor and the clock are what kept the tokens rising. A watcher of a
// lease the wipe lost may be told the key may be free, never that it was
// released.
func (s *suite) testFloorAfterWipe(t *testing.T) {
	ahead := aheadOfClock()
	ctx := testCtx(t)
	st := s.store(t)
	key, other, clocked := s.key("wipe", "fenced"), s.key("wipe", "unfenced"), s.key("wipe", "clocked")

	var seen uint64
	for range 3 {
		l := s.acquire(t, ctx, st, key, "before", longTTL, seen)
		seen = l.Token
		release(t, ctx, st, key, "before", 0)
	}
	seen = s.acquire(t, ctx, st, key, "before", longTTL, ahead).Token // left held
	s.acquire(t, ctx, st, other, "before", longTTL, ahead)
	release(t, ctx, st, other, "before", 0)
	s.acquire(t, ctx, st, other, "before", longTTL, 0) // left held
	var last uint64
	for range 3 {
		last = s.acquire(t, ctx, st, clocked, "before", longTTL, 0).Token
		release(t, ctx, st, clocked, "before", 0)
	}
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
	if l := s.acquire(t, ctx, st, other, "after", longTTL, 0); l.Token >= ahead {
		t.Fatalf("after Wipe, Acquire without a floor was granted token %d, above the clock; want one from the clock (the harness's Wipe must drop the fencing counters)", l.Token)
	}

	l := s.acquire(t, ctx, st, key, "after", longTTL, seen)
	if l.Token != seen+1 {
		t.Errorf("after Wipe, Acquire(floor %d) was granted token %d; want %d", seen, l.Token, seen+1)
	}
	if l := s.acquire(t, ctx, st, clocked, "after", longTTL, 0); l.Token <= last {
		t.Errorf("after Wipe, Acquire without a floor was granted token %d, not above the %d granted before: a caller that has seen no token must still get a larger one", l.Token, last)
	}
	release(t, ctx, st, key, "after", 0)
	release(t, ctx, st, other, "after", 0)
	release(t, ctx, st, clocked, "after", 0)
}
