package redisbackend_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/testkit/testenv"
)

// Many waiters of one process take turns on a few keys through
// AcquireQueued and AwaitHandover with short waits, while watches open and
// close on the same keys: no two hold a key at once by their own count,
// tokens of a key only increase, every waiter gets its turns, and Close
// then returns with no goroutine left (TestMain checks for leaks).
func TestHandoverChurn(t *testing.T) {
	r := testenv.NewRedis(t)
	s := newStore(t, r.Client(t))
	ctx := ctxT(t)
	const keys, perKey, turns = 3, 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, keys*perKey*turns+keys)
	for k := range keys {
		key := fmt.Sprintf("{churn}:%d", k)
		var holders atomic.Int32
		var mu sync.Mutex
		var last uint64
		for w := range perKey {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for turn := range turns {
					owner := fmt.Sprintf("w%d-%d", w, turn)
					var l backend.Lease
					for {
						var err error
						l, err = s.AcquireQueued(ctx, key, owner, 5*time.Second, 0, 5*time.Second)
						if err == nil {
							break
						}
						if !errors.Is(err, backend.ErrHeld) {
							errs <- fmt.Errorf("%s AcquireQueued: %w", owner, err)
							return
						}
						got, ok, err := s.AwaitHandover(ctx, key, owner, 5*time.Millisecond)
						if err != nil {
							errs <- fmt.Errorf("%s AwaitHandover: %w", owner, err)
							return
						}
						if ok {
							l = got
							break
						}
					}
					if n := holders.Add(1); n != 1 {
						errs <- fmt.Errorf("%s holds %q with %d others", owner, key, n-1)
					}
					mu.Lock()
					if l.Token <= last {
						errs <- fmt.Errorf("%s got token %d of %q after %d", owner, l.Token, key, last)
					}
					last = l.Token
					mu.Unlock()
					holders.Add(-1)
					if err := s.Release(ctx, key, owner, 0); err != nil {
						errs <- fmt.Errorf("%s Release: %w", owner, err)
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				w, err := s.Watch(ctx, key)
				if err != nil {
					errs <- fmt.Errorf("Watch(%q): %w", key, err)
					return
				}
				w.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(patience):
		t.Errorf("Close did not return within %v", patience)
	}
}
