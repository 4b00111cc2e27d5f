package backendtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// testNonOwner checks that nobody but the holder can renew or release a
// lease, whatever TTL or keep time they ask for, and that their attempts
// leave the lease as it was. The intruders' names are chosen to catch
// prefix and case-insensitive comparisons.
func (s *suite) testNonOwner(t *testing.T) {
	const ttl = 20 * time.Second
	ctx := testCtx(t)
	a, b := s.store(t), s.store(t)
	key := s.key("non-owner")

	sent := time.Now()
	l := s.acquire(t, ctx, a, key, "owner-a", ttl, 0)
	for _, intruder := range []string{"owner-b", "owner-", "owner-aa", "OWNER-A"} {
		for _, d := range []time.Duration{time.Minute, s.minTTL()} {
			what := fmt.Sprintf("Renew by %q with ttl %v", intruder, d)
			_, err := b.Renew(ctx, key, intruder, d)
			checkNotHeld(t, what, err, key, intruder, l)
			s.checkHolder(t, ctx, b, "after "+what, l, ttl, sent)
		}
		for _, keep := range []time.Duration{0, -time.Second, s.minTTL(), time.Minute} {
			what := fmt.Sprintf("Release by %q with keepFor %v", intruder, keep)
			err := b.Release(ctx, key, intruder, keep)
			checkNotHeld(t, what, err, key, intruder, l)
			s.checkHolder(t, ctx, b, "after "+what, l, ttl, sent)
		}
	}

	// The owner still can.
	sent = time.Now()
	r, err := a.Renew(ctx, key, "owner-a", ttl)
	if err != nil {
		t.Fatalf("the owner's Renew after the intruders': %v", err)
	}
	s.checkGrant(t, "the owner's Renew", r, key, "owner-a", ttl, sent)
	if r.Token != l.Token {
		t.Errorf("Renew changed the token from %d to %d", l.Token, r.Token)
	}
	release(t, ctx, a, key, "owner-a", 0)
	checkFree(t, ctx, b, key, "after the owner released it")
}

// testStaleOwner lets a lease expire and another owner take the key, then
// checks that the old owner can neither renew, release, shorten nor
// re-acquire the new owner's lease.
func (s *suite) testStaleOwner(t *testing.T) {
	const short = 200 * time.Millisecond
	ctx := testCtx(t)
	a, b := s.store(t), s.store(t)
	key := s.key("stale-owner")

	old := s.acquire(t, ctx, a, key, "stale", short, 0)
	pollUntilFree(t, ctx, b, key)
	sent := time.Now()
	cur := s.acquire(t, ctx, b, key, "fresh", longTTL, 0)
	if cur.Token <= old.Token {
		t.Errorf("the new owner's token %d is not above the expired lease's %d", cur.Token, old.Token)
	}

	for _, d := range []time.Duration{time.Minute, s.minTTL()} {
		what := fmt.Sprintf("the stale owner's Renew with ttl %v", d)
		_, err := a.Renew(ctx, key, "stale", d)
		checkNotHeld(t, what, err, key, "stale", cur)
		s.checkHolder(t, ctx, b, "after "+what, cur, longTTL, sent)
	}
	for _, keep := range []time.Duration{0, s.minTTL(), time.Minute} {
		what := fmt.Sprintf("the stale owner's Release with keepFor %v", keep)
		err := a.Release(ctx, key, "stale", keep)
		checkNotHeld(t, what, err, key, "stale", cur)
		s.checkHolder(t, ctx, b, "after "+what, cur, longTTL, sent)
	}
	_, err := a.Acquire(ctx, key, "stale", short, old.Token)
	checkHeldBy(t, "the stale owner's Acquire", err, cur, longTTL)
	s.checkHolder(t, ctx, b, "after the stale owner's Acquire", cur, longTTL, sent)

	release(t, ctx, b, key, "fresh", 0)
}

// testRenewExtends renews a short lease several times before it runs out
// and checks that it outlives its first TTL with the same token, that each
// Renew sets the TTL afresh from now (not added to what is left), also
// when the new TTL is shorter, and that the lease then ends by the last
// TTL given.
func (s *suite) testRenewExtends(t *testing.T) {
	const (
		first    = 300 * time.Millisecond
		renewed  = 600 * time.Millisecond
		every    = 150 * time.Millisecond
		renewals = 4 // renewals*every is well past first
		shorter  = 100 * time.Millisecond
		owner    = "renewer"
	)
	ctx := testCtx(t)
	st := s.store(t)
	s.retrySlow(t, "renew-extends", func(key string) bool {
		sent := time.Now()
		l := s.acquire(t, ctx, st, key, owner, first, 0)
		lastSent, lastTTL := sent, first
		for i := range renewals {
			time.Sleep(every)
			sent := time.Now()
			r, err := st.Renew(ctx, key, owner, renewed)
			recv := time.Now()
			if err != nil {
				if s.surelyLive(lastSent, lastTTL, recv) {
					t.Fatalf("renewal %d: %v; the lease given %v by a request sent %v earlier was still live",
						i+1, err, lastTTL, recv.Sub(lastSent))
				}
				return false
			}
			s.checkGrant(t, fmt.Sprintf("renewal %d", i+1), r, key, owner, renewed, sent)
			if r.Token != l.Token {
				t.Errorf("renewal %d changed the token from %d to %d", i+1, l.Token, r.Token)
			}
			lastSent, lastTTL = sent, renewed
		}

		// More than first has passed since the grant; the renewals kept
		// the lease alive.
		g, err := st.Get(ctx, key)
		recv := time.Now()
		if !s.surelyLive(lastSent, lastTTL, recv) {
			return false
		}
		if err != nil {
			t.Fatalf("Get %v after the grant, %v after the last renewal for %v: %v; the lease must be live",
				recv.Sub(sent), recv.Sub(lastSent), renewed, err)
		}
		if g.Owner != owner || g.Token != l.Token {
			t.Fatalf("after the renewals the key is held by %q (token %d); want %q (token %d)", g.Owner, g.Token, owner, l.Token)
		}
		s.checkTTL(t, "Get after the renewals", g.TTL, renewed, lastSent)

		// A shorter TTL shortens the lease.
		sent = time.Now()
		r, err := st.Renew(ctx, key, owner, shorter)
		recv = time.Now()
		if err != nil {
			if s.surelyLive(lastSent, lastTTL, recv) {
				t.Fatalf("Renew with a shorter TTL: %v; the lease was still live", err)
			}
			return false
		}
		s.checkGrant(t, "Renew with a shorter TTL", r, key, owner, shorter, sent)
		free := pollUntilFree(t, ctx, st, key)
		s.checkNotEarly(t, "after Renew with a shorter TTL", free, sent, shorter)

		_, err = st.Renew(ctx, key, owner, renewed)
		checkNotHeld(t, "Renew after the lease ran out", err, key, owner, backend.Lease{})
		checkFree(t, ctx, st, key, "after Renew of a lease that ran out")
		return true
	})
}
