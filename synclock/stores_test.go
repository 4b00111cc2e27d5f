package synclock_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/storetest"
)

// These tests run on every store of storetest's table: the in-memory
// store, Redis and Consul, each on a private server.

// 20 goroutines on each of 4 instances (a store client each) increment a
// counter with a read-modify-write inside the lock that yields between
// its read and its write: not one increment may be lost, and no two
// holders may overlap.
func TestNoLostIncrements(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		const instances, goroutines, rounds = 4, 20, 5
		newStore := b.Open(t)
		key := uniqueKey(t)
		var counter, inside, overlaps atomic.Int64
		var wg sync.WaitGroup
		for i := range instances {
			lk := lockerOn(t, i, newStore(t), synclock.Config{})
			for range goroutines {
				wg.Go(func() {
					for range rounds {
						err := lk.DoKey(ctxT(t), key, func(ctx context.Context) error {
							if inside.Add(1) != 1 {
								overlaps.Add(1)
							}
							defer inside.Add(-1)
							v := counter.Load()
							runtime.Gosched()
							counter.Store(v + 1)
							return nil
						})
						if err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
		}
		wg.Wait()
		if want := int64(instances * goroutines * rounds); counter.Load() != want || overlaps.Load() != 0 {
			t.Fatalf("counter = %d, want %d; %d overlapping holders", counter.Load(), want, overlaps.Load())
		}
	})
}

// A holder whose lease ran out cannot delete the next holder's key with a
// late Unlock. The next holder's lease is long, so that it outlasts the
// test on a busy machine.
func TestStaleUnlockKeepsNewHolder(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		newStore := b.Open(t)
		store := newStore(t)
		a := lockerOn(t, 1, store, synclock.Config{HoldDuration: 200 * time.Millisecond})
		bl := lockerOn(t, 2, newStore(t), synclock.Config{HoldDuration: time.Minute, RetryInterval: 10 * time.Millisecond})
		key := uniqueKey(t)
		ma, mb := a.Mutex(key), bl.Mutex(key)
		if err := ma.Lock(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		<-ma.Context().Done() // a's lease is (about to be) over
		if err := mb.Lock(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		tokB, _ := synclock.Token(mb.Context())
		if err := ma.Unlock(ctxT(t)); !errors.Is(err, synclock.ErrLeaseExpired) {
			t.Fatalf("stale Unlock: %v, want ErrLeaseExpired", err)
		}
		l, err := store.Get(ctxT(t), backend.AppKey("acme", "billing", "lock", key))
		if err != nil || l.Token != tokB || !strings.HasPrefix(l.Owner, idN(t, 2).String()+"#") {
			t.Fatalf("after the stale Unlock the key is %+v, %v; want b's lease (token %d)", l, err, tokB)
		}
		if err := mb.Unlock(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	})
}

// counting counts Acquire calls.
type counting struct {
	backend.Store
	acquires atomic.Int64
}

// Acquire counts a claim once the store has answered it: a count the test
// waits for is a decided claim (refused, the holder still holding), not
// one still on its way, which a release could overtake.
func (c *counting) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	l, err := c.Store.Acquire(ctx, key, owner, ttl, floor)
	c.acquires.Add(1)
	return l, err
}

// A waiter is woken by the release, not by its poll: with a one-hour retry
// interval it still gets the lock, after exactly three claims (the first,
// one right after subscribing, and one after the release). The waiter's
// store is wrapped, so it has no waiting line: it claims with Acquire.
func TestWaiterWakesOnRelease(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		newStore := b.Open(t)
		cfg := synclock.Config{RetryInterval: time.Hour}
		holder := lockerOn(t, 1, newStore(t), cfg)
		cs := &counting{Store: newStore(t)}
		waiter := lockerOn(t, 2, cs, cfg)
		key := uniqueKey(t)
		m := holder.Mutex(key)
		if err := m.Lock(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- waiter.DoKey(ctxT(t), key, func(context.Context) error { return nil }) }()
		deadline := time.Now().Add(patience)
		for cs.acquires.Load() < 2 {
			if time.Now().After(deadline) {
				t.Fatal("the waiter never tried")
			}
			time.Sleep(time.Millisecond)
		}
		if err := m.Unlock(ctxT(t)); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(patience):
			t.Fatal("the waiter was not woken by the release")
		}
		if n := cs.acquires.Load(); n != 3 {
			t.Fatalf("the waiter made %d claims, want 3", n)
		}
	})
}

func TestTokensIncrease(t *testing.T) {
	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
		lk := lockerOn(t, 1, b.Open(t)(t), synclock.Config{})
		key := uniqueKey(t)
		var last uint64
		for range 5 {
			err := lk.DoKey(ctxT(t), key, func(ctx context.Context) error {
				tok, ok := synclock.Token(ctx)
				if !ok || tok <= last {
					return fmt.Errorf("token %d (ok %v) after %d", tok, ok, last)
				}
				last = tok
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	})
}
