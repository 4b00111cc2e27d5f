package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// testExpiry grants a short lease that nobody renews or releases and
// reads it from another client until it is gone. While it lasts, every
// read shows the same lease with a TTL that never exceeds what was
// granted and falls as fast as time passes (unless Harness.GivenTTL); it
// ends on its own, not before its TTL, and a watcher is not told it was released; afterwards
// the owner cannot renew it and another owner acquires the key with a
// higher token.
func (s *suite) testExpiry(t *testing.T) {
	const ttl = 400 * time.Millisecond
	ctx := testCtx(t)
	st, reader := s.store(t), s.store(t)
	s.retrySlow(t, "expiry", func(key string) bool {
		w := watch(t, ctx, reader, key)
		granted := time.Now()
		l := s.acquire(t, ctx, st, key, "expiring", ttl, 0)

		type read struct {
			sent, recv time.Time
			ttl        time.Duration
		}
		var reads []read
		var free time.Time
		for {
			sent := time.Now()
			g, err := reader.Get(ctx, key)
			recv := time.Now()
			if errors.Is(err, backend.ErrNotFound) {
				free = recv
				break
			}
			if err != nil {
				t.Fatalf("Get while the lease runs out: %v", err)
			}
			if g.Owner != l.Owner || g.Token != l.Token {
				t.Fatalf("the key is held by %q (token %d) while the lease of %q (token %d) runs out", g.Owner, g.Token, l.Owner, l.Token)
			}
			s.checkTTL(t, "Get while the lease runs out", g.TTL, ttl, granted)
			if n := len(reads); n > 0 && !s.h.GivenTTL {
				// The store answered the previous read before it received
				// this one, and this one before this answer arrived.
				prev := reads[n-1]
				fell := prev.ttl - g.TTL
				if lo := sent.Sub(prev.recv) - s.slack; fell < lo {
					t.Errorf("the TTL fell from %v to %v between two reads at least %v apart", prev.ttl, g.TTL, sent.Sub(prev.recv))
				} else if hi := recv.Sub(prev.sent) + s.slack; fell > hi {
					t.Errorf("the TTL fell from %v to %v between two reads at most %v apart", prev.ttl, g.TTL, recv.Sub(prev.sent))
				}
			}
			reads = append(reads, read{sent: sent, recv: recv, ttl: g.TTL})
			if recv.Sub(granted) > waitTimeout {
				t.Fatalf("the lease granted for %v is still there after %v: %+v", ttl, waitTimeout, g)
			}
			time.Sleep(pollEvery)
		}
		s.checkNotEarly(t, "a lease left to expire", free, granted, ttl)
		checkNotReleaseEvent(t, w, "a lease left to expire")
		// Two reads far enough apart are needed to see the TTL fall.
		if len(reads) < 2 || reads[len(reads)-1].sent.Sub(reads[0].recv) < ttl/4 {
			return false
		}

		_, err := st.Renew(ctx, key, "expiring", ttl)
		checkNotHeld(t, "the owner's Renew after its lease expired", err, key, "expiring", backend.Lease{})
		err = st.Release(ctx, key, "expiring", 0)
		checkNotHeld(t, "the owner's Release after its lease expired", err, key, "expiring", backend.Lease{})
		next := s.acquire(t, ctx, reader, key, "next", longTTL, 0)
		if next.Token <= l.Token {
			t.Errorf("the token %d granted after expiry is not above the expired lease's %d", next.Token, l.Token)
		}
		release(t, ctx, reader, key, "next", 0)
		return true
	})
}
