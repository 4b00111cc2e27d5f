package backendtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// testReleaseKeepFor releases a long lease with a short keep time and
// checks that the key stays held by the same lease for that long and no
// longer: others are refused, the owner can no longer renew it, a second
// Release with a keep time is accepted and changes nothing, and once the
// keep time is over another owner acquires the key with a higher token.
// Watchers are not told the key was released while it is kept.
func (s *suite) testReleaseKeepFor(t *testing.T) {
	const keep = 500 * time.Millisecond
	ctx := testCtx(t)
	a, b := s.store(t), s.store(t)
	s.retrySlow(t, "release-keep-for", func(key string) bool {
		l := s.acquire(t, ctx, a, key, "job-a", longTTL, 0)
		w := watch(t, ctx, b, key)
		released := time.Now()
		release(t, ctx, a, key, "job-a", keep)
		checkNotReleaseEvent(t, w, fmt.Sprintf("Release(keepFor %v)", keep))

		// Every check below is judged only while the keep time surely runs.
		g, err := b.Get(ctx, key)
		if !s.surelyLive(released, keep, time.Now()) {
			return false
		}
		if err != nil {
			t.Fatalf("Get right after Release(keepFor %v): %v; the key must stay held", keep, err)
		}
		if g.Owner != l.Owner || g.Token != l.Token {
			t.Fatalf("after Release(keepFor %v) the key is held by %q (token %d); want the released lease of %q (token %d)",
				keep, g.Owner, g.Token, l.Owner, l.Token)
		}
		s.checkTTL(t, fmt.Sprintf("Get after Release(keepFor %v)", keep), g.TTL, keep, released)

		_, err = b.Acquire(ctx, key, "job-b", longTTL, 0)
		if !s.surelyLive(released, keep, time.Now()) {
			return false
		}
		checkHeldBy(t, "another owner's Acquire of a kept key", err, l, keep)

		_, err = a.Acquire(ctx, key, "job-a", longTTL, 0)
		if !s.surelyLive(released, keep, time.Now()) {
			return false
		}
		checkHeldBy(t, "the owner's Acquire of its own kept key", err, l, keep)

		_, err = a.Renew(ctx, key, "job-a", longTTL)
		if !s.surelyLive(released, keep, time.Now()) {
			return false
		}
		checkNotHeld(t, "the owner's Renew of a released lease", err, key, "job-a", l)

		err = a.Release(ctx, key, "job-a", time.Minute)
		if !s.surelyLive(released, keep, time.Now()) {
			return false
		}
		if err != nil {
			t.Errorf("a second Release(keepFor %v) of a lease released with a keep time: %v; want nil", time.Minute, err)
		}

		g, err = b.Get(ctx, key)
		if !s.surelyLive(released, keep, time.Now()) {
			return false
		}
		if err != nil {
			t.Fatalf("Get after the refused Renew and the second Release: %v; the key must stay held", err)
		}
		if g.Owner != l.Owner || g.Token != l.Token {
			t.Fatalf("after the second Release the key is held by %q (token %d); want %q (token %d)", g.Owner, g.Token, l.Owner, l.Token)
		}
		s.checkTTL(t, "Get after the refused Renew and the second Release", g.TTL, keep, released)

		next, free := s.pollAcquire(t, ctx, b, key, "job-b", longTTL, 0)
		s.checkNotEarly(t, fmt.Sprintf("Release(keepFor %v)", keep), free, released, keep)
		if next.Token <= l.Token {
			t.Errorf("the token %d granted after the keep time is not above the released lease's %d", next.Token, l.Token)
		}
		_, err = a.Renew(ctx, key, "job-a", longTTL)
		checkNotHeld(t, "the old owner's Renew after the keep time", err, key, "job-a", next)
		release(t, ctx, b, key, "job-b", 0)
		return true
	})
}

// testReleaseKeepForLonger checks that a keep time longer than what is
// left of the lease keeps the key exactly that long, and that a second
// Release without a keep time frees a kept key at once.
func (s *suite) testReleaseKeepForLonger(t *testing.T) {
	const (
		ttl  = 5 * time.Second
		keep = 20 * time.Second
	)
	ctx := testCtx(t)
	a, b := s.store(t), s.store(t)
	key := s.key("release-keep-longer")

	l := s.acquire(t, ctx, a, key, "job-a", ttl, 0)
	released := time.Now()
	release(t, ctx, a, key, "job-a", keep)
	s.checkHolder(t, ctx, b, fmt.Sprintf("after Release(keepFor %v) of a %v lease", keep, ttl), l, keep, released)

	release(t, ctx, a, key, "job-a", 0)
	checkFree(t, ctx, b, key, "after a second Release(keepFor 0) of a kept lease")
	next := s.acquire(t, ctx, b, key, "job-b", longTTL, 0)
	if next.Token <= l.Token {
		t.Errorf("the token %d granted after the release is not above the released lease's %d", next.Token, l.Token)
	}
	for _, keep := range []time.Duration{0, time.Second} {
		what := fmt.Sprintf("the old owner's Release(keepFor %v) after another owner took the key", keep)
		err := a.Release(ctx, key, "job-a", keep)
		checkNotHeld(t, what, err, key, "job-a", next)
	}
	release(t, ctx, b, key, "job-b", 0)
}

// testReleaseAtOnce checks that Release with keepFor <= 0 frees the key at
// once for another owner, and that later Renew and Release calls by the
// old owner fail, whether the key is held by someone else or free.
func (s *suite) testReleaseAtOnce(t *testing.T) {
	ctx := testCtx(t)
	a, b := s.store(t), s.store(t)
	for i, keep := range []time.Duration{0, -time.Second} {
		key := s.key("release-at-once", fmt.Sprint(i))
		l := s.acquire(t, ctx, a, key, "first", longTTL, 0)
		release(t, ctx, a, key, "first", keep)
		checkFree(t, ctx, b, key, fmt.Sprintf("after Release(keepFor %v)", keep))
		next := s.acquire(t, ctx, b, key, "second", longTTL, 0)
		if next.Token <= l.Token {
			t.Errorf("the token %d granted after Release(keepFor %v) is not above the released lease's %d", next.Token, keep, l.Token)
		}

		_, err := a.Renew(ctx, key, "first", longTTL)
		checkNotHeld(t, "the old owner's Renew after another owner took the key", err, key, "first", next)
		err = a.Release(ctx, key, "first", 0)
		checkNotHeld(t, "the old owner's second Release after another owner took the key", err, key, "first", next)

		release(t, ctx, b, key, "second", 0)
		err = a.Release(ctx, key, "first", 0)
		checkNotHeld(t, "Release of a key that is free", err, key, "first", backend.Lease{})
		err = b.Release(ctx, key, "second", 0)
		checkNotHeld(t, "a second Release(keepFor 0) of a lease already deleted", err, key, "second", backend.Lease{})
		_, err = a.Renew(ctx, key, "first", longTTL)
		checkNotHeld(t, "Renew of a key that is free", err, key, "first", backend.Lease{})
		checkFree(t, ctx, b, key, "after Renew and Release of a free key")
	}
}
