package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// testStress has several workers, each with a client of its own, take one
// key in turn many times, waiting with backend.WaitFree when it is held,
// and increment a counter inside the critical section with a separate
// load and store, so that two holders at once would lose increments. It
// checks that no two workers ever held the lease at once, that tokens rose
// in the order the critical sections ran, and that no increment was lost.
func (s *suite) testStress(t *testing.T) {
	const (
		workers = 8
		rounds  = 25
		ttl     = 10 * time.Second // far longer than any critical section
	)
	ctx := testCtx(t)
	key := s.key("stress")

	var (
		holders   atomic.Int32
		maxSeen   atomic.Int32
		counter   atomic.Int64  // incremented non-atomically: Load, then Store
		lastToken atomic.Uint64 // token of the latest critical section
	)
	stores := make([]backend.Store, workers)
	for i := range stores {
		stores[i] = s.store(t)
	}
	var wg sync.WaitGroup
	for i, st := range stores {
		owner := fmt.Sprintf("worker-%d", i)
		wg.Go(func() {
			var floor uint64
			for round := range rounds {
				l, err := lockWithRetry(ctx, st, key, owner, ttl, floor)
				if err != nil {
					t.Errorf("%s, round %d: %v", owner, round, err)
					return
				}
				floor = l.Token

				n := holders.Add(1)
				for m := maxSeen.Load(); n > m && !maxSeen.CompareAndSwap(m, n); m = maxSeen.Load() {
				}
				if prev := lastToken.Load(); l.Token <= prev {
					t.Errorf("%s, round %d: granted token %d after a critical section with token %d", owner, round, l.Token, prev)
				}
				lastToken.Store(l.Token)
				v := counter.Load()
				time.Sleep(200 * time.Microsecond) // widen the window in which a second holder would overlap
				counter.Store(v + 1)
				holders.Add(-1)

				if err := st.Release(ctx, key, owner, 0); err != nil {
					t.Errorf("%s, round %d: Release: %v", owner, round, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if m := maxSeen.Load(); m > 1 {
		t.Errorf("%d workers held the lease at once", m)
	}
	if got, want := counter.Load(), int64(workers*rounds); got != want {
		t.Errorf("counter = %d after %d critical sections; %d increments were lost to overlapping holders", got, want, want-got)
	}
}

// lockWithRetry acquires key for owner, waiting with backend.WaitFree
// whenever it is held.
func lockWithRetry(ctx context.Context, st backend.Store, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	for {
		l, err := st.Acquire(ctx, key, owner, ttl, floor)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, backend.ErrHeld) {
			return backend.Lease{}, fmt.Errorf("acquire: %w", err)
		}
		if err := backend.WaitFree(ctx, st, key); err != nil {
			return backend.Lease{}, fmt.Errorf("wait: %w", err)
		}
	}
}
