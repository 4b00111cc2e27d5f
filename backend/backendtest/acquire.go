package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// testOneWinner starts many acquirers of one free key at once, each on a
// client of its own, over several rounds: exactly one is granted the key
// per round, with a token above the previous round's, and every other is
// refused with a *HeldError naming the winner's lease.
func (s *suite) testOneWinner(t *testing.T) {
	const (
		acquirers = 50
		rounds    = 5
	)
	ctx := testCtx(t)
	key := s.key("one-winner")
	stores := make([]backend.Store, acquirers)
	for i := range stores {
		stores[i] = s.store(t)
	}

	var last uint64
	for round := range rounds {
		results := raceAcquire(ctx, stores, key)
		winner := soleWinner(t, round, results)
		w := results[winner].lease
		s.checkGrant(t, fmt.Sprintf("round %d: winner's Acquire", round), w, key, acquirer(winner), longTTL, results[winner].sent)
		if w.Token <= last {
			t.Errorf("round %d: winner's token %d is not above the previous round's %d", round, w.Token, last)
		}
		checkLosers(t, round, results, winner, key)
		if t.Failed() {
			return
		}
		release(t, ctx, stores[winner], key, w.Owner, 0)
		last = w.Token
	}
}

// acquirer names testOneWinner's i-th acquirer.
func acquirer(i int) string { return fmt.Sprintf("acquirer-%02d", i) }

// acquireResult is what one of testOneWinner's acquirers got, and when it
// sent its Acquire.
type acquireResult struct {
	lease backend.Lease
	err   error
	sent  time.Time
}

// raceAcquire has each of stores' acquirers ask for key at once and
// returns what each got.
func raceAcquire(ctx context.Context, stores []backend.Store, key string) []acquireResult {
	results := make([]acquireResult, len(stores))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() {
			<-start
			sent := time.Now()
			l, err := stores[i].Acquire(ctx, key, acquirer(i), longTTL, 0)
			results[i] = acquireResult{lease: l, err: err, sent: sent}
		})
	}
	close(start)
	wg.Wait()
	return results
}

// soleWinner returns the one acquirer that was granted the key in round,
// and fails t if none or several were.
func soleWinner(t *testing.T, round int, results []acquireResult) int {
	t.Helper()
	winner := -1
	for i, r := range results {
		if r.err != nil {
			continue
		}
		if winner >= 0 {
			t.Fatalf("round %d: the free key was granted twice: to %q (token %d) and to %q (token %d)",
				round, acquirer(winner), results[winner].lease.Token, acquirer(i), r.lease.Token)
		}
		winner = i
	}
	if winner < 0 {
		t.Fatalf("round %d: none of %d acquirers was granted the free key; the first was refused with: %v",
			round, len(results), results[0].err)
	}
	return winner
}

// checkLosers checks that every acquirer but the winner was refused with a
// *HeldError naming the winner's lease of key.
func checkLosers(t *testing.T, round int, results []acquireResult, winner int, key string) {
	t.Helper()
	w := results[winner].lease
	for i, r := range results {
		if i == winner {
			continue
		}
		var he *backend.HeldError
		if !errors.As(r.err, &he) || !errors.Is(r.err, backend.ErrHeld) {
			t.Errorf("round %d: %s's Acquire: err = %v; want a *backend.HeldError", round, acquirer(i), r.err)
			continue
		}
		h := he.Holder
		if h.Key != key || h.Owner != w.Owner || h.Token != w.Token {
			t.Errorf("round %d: %s was told %q holds %q with token %d; the winner is %q with token %d",
				round, acquirer(i), h.Owner, h.Key, h.Token, w.Owner, w.Token)
		}
		if h.TTL <= 0 || h.TTL > longTTL {
			t.Errorf("round %d: %s was told the holder has %v left; want a TTL in (0, %v]", round, acquirer(i), h.TTL, longTTL)
		}
	}
}

// testAcquireHeldBySelf checks that a holder's own Acquire is refused
// like anyone else's and does not extend its lease.
func (s *suite) testAcquireHeldBySelf(t *testing.T) {
	const ttl = 10 * time.Second
	ctx := testCtx(t)
	st, other := s.store(t), s.store(t)
	key := s.key("held-by-self")

	sent := time.Now()
	l := s.acquire(t, ctx, st, key, "self", ttl, 0)

	_, err := st.Acquire(ctx, key, "self", time.Minute, 0)
	checkHeldBy(t, "the holder's own second Acquire", err, l, ttl)
	_, err = st.Acquire(ctx, key, "self", time.Minute, l.Token+100)
	checkHeldBy(t, "the holder's own Acquire with a higher floor", err, l, ttl)
	_, err = other.Acquire(ctx, key, "other", time.Minute, 0)
	checkHeldBy(t, "another owner's Acquire", err, l, ttl)
	s.checkHolder(t, ctx, other, "after the refused Acquires", l, ttl, sent)

	release(t, ctx, st, key, "self", 0)
	checkFree(t, ctx, other, key, "after the holder released it")
}

// testGetAbsent checks the answers about a key nobody ever held.
func (s *suite) testGetAbsent(t *testing.T) {
	ctx := testCtx(t)
	st := s.store(t)
	key := s.key("absent")

	_, err := st.Get(ctx, key)
	if !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Get of a key never held: err = %v; want an error wrapping backend.ErrNotFound", err)
	}
	_, err = st.Renew(ctx, key, "nobody", time.Second)
	checkNotHeld(t, "Renew of a key never held", err, key, "nobody", backend.Lease{})
	err = st.Release(ctx, key, "nobody", 0)
	checkNotHeld(t, "Release of a key never held", err, key, "nobody", backend.Lease{})
	err = st.Release(ctx, key, "nobody", time.Second)
	checkNotHeld(t, "Release with keepFor of a key never held", err, key, "nobody", backend.Lease{})
	checkFree(t, ctx, st, key, "after Renew and Release of a key never held")
}
