package backend_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counting counts Get calls and can hide the store's events, as a store
// that cannot see expiry or renewals would.
type counting struct {
	*membackend.Store
	gets   atomic.Int32
	silent bool
	getErr error
}

func (c *counting) Get(ctx context.Context, key string) (backend.Lease, error) {
	c.gets.Add(1)
	if c.getErr != nil {
		return backend.Lease{}, c.getErr
	}
	return c.Store.Get(ctx, key)
}

func (c *counting) Watch(ctx context.Context, key string) (backend.Watch, error) {
	w, err := c.Store.Watch(ctx, key)
	if err != nil || !c.silent {
		return w, err
	}
	return silent{w}, nil
}

// silent is a Watch that never delivers.
type silent struct{ backend.Watch }

func (silent) C() <-chan backend.Event { return nil }

func newStore(t *testing.T) *counting {
	s := membackend.New()
	t.Cleanup(func() { s.Close() })
	return &counting{Store: s}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// waitFree runs WaitFree in a goroutine and returns a function that
// waits for it and returns its error and when it returned.
func waitFree(ctx context.Context, s backend.Store, key string) func() (error, time.Time) {
	var (
		err  error
		done time.Time
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		err = backend.WaitFree(ctx, s, key)
		done = time.Now()
	})
	return func() (error, time.Time) {
		wg.Wait()
		return err, done
	}
}

func TestWaitFreeOnFreeKey(t *testing.T) {
	s := newStore(t)
	if err := backend.WaitFree(ctxT(t), s, "k"); err != nil {
		t.Fatalf("WaitFree on a key never held: %v", err)
	}
	if n := s.gets.Load(); n != 1 {
		t.Errorf("WaitFree on a free key asked %d times; want 1", n)
	}
}

func TestWaitFreeWakesOnRelease(t *testing.T) {
	ctx := ctxT(t)
	s := newStore(t)
	if _, err := s.Acquire(ctx, "k", "a", time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	wait := waitFree(ctx, s, "k")
	time.Sleep(20 * time.Millisecond) // usually lets WaitFree subscribe first; either order must work
	if err := s.Release(ctx, "k", "a", 0); err != nil {
		t.Fatal(err)
	}
	if err, _ := wait(); err != nil {
		t.Fatalf("WaitFree on a key held for an hour and released: %v", err)
	}
}

// A store that reports nothing is asked again when the lease it last saw
// would have ended.
func TestWaitFreeRechecksAtExpiry(t *testing.T) {
	const ttl = 200 * time.Millisecond
	ctx := ctxT(t)
	s := newStore(t)
	s.silent = true
	granted := time.Now()
	if _, err := s.Acquire(ctx, "k", "a", ttl, 0); err != nil {
		t.Fatal(err)
	}
	if err := backend.WaitFree(ctx, s, "k"); err != nil {
		t.Fatalf("WaitFree on a lease left to expire: %v", err)
	}
	if since := time.Since(granted); since < ttl {
		t.Errorf("WaitFree returned %v after a %v lease was granted", since, ttl)
	}
	if n := s.gets.Load(); n > 3 {
		t.Errorf("WaitFree asked %d times for one lease of %v; it should sleep until the lease ends", n, ttl)
	}
}

// Renewals reported by the store let WaitFree sleep without asking.
func TestWaitFreeSleepsThroughRenewals(t *testing.T) {
	ctx := ctxT(t)
	s := newStore(t)
	if _, err := s.Acquire(ctx, "k", "a", time.Second, 0); err != nil {
		t.Fatal(err)
	}
	wait := waitFree(ctx, s, "k")
	for range 10 {
		time.Sleep(20 * time.Millisecond)
		if _, err := s.Renew(ctx, "k", "a", time.Second); err != nil {
			t.Error(err)
		}
	}
	if err := s.Release(ctx, "k", "a", 0); err != nil {
		t.Error(err)
	}
	if err, _ := wait(); err != nil {
		t.Fatalf("WaitFree: %v", err)
	}
	// One look before the wait and one after the release; a renewal gap
	// longer than the 1 s TTL (a very loaded machine) would add one.
	if n := s.gets.Load(); n > 3 {
		t.Errorf("WaitFree asked %d times while the holder renewed 10 times and released; want 2", n)
	}
}

func TestWaitFreeEndsWithContext(t *testing.T) {
	ctx := ctxT(t)
	s := newStore(t)
	if _, err := s.Acquire(ctx, "k", "a", time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := backend.WaitFree(short, s, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitFree with a 50ms context on a key held for an hour: %v; want DeadlineExceeded", err)
	}
	cancelled, cancel2 := context.WithCancel(ctx)
	cancel2()
	if err := backend.WaitFree(cancelled, s, "k"); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitFree with a cancelled context: %v; want Canceled", err)
	}
	cause := errors.New("shutting down")
	withCause, cancel3 := context.WithCancelCause(ctx)
	wait := waitFree(withCause, s, "k")
	cancel3(cause)
	if err, _ := wait(); !errors.Is(err, cause) {
		t.Errorf("WaitFree ended by a cancel with a cause: %v; want the cause", err)
	}
}

func TestWaitFreeReturnsStoreErrors(t *testing.T) {
	ctx := ctxT(t)
	s := newStore(t)
	if err := backend.WaitFree(ctx, s, "bad key"); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("WaitFree on an invalid key: %v; want ErrInvalidArgument", err)
	}
	boom := errors.New("connection refused")
	s.getErr = boom
	if err := backend.WaitFree(ctx, s, "k"); !errors.Is(err, boom) {
		t.Errorf("WaitFree when Get fails: %v; want the Get error", err)
	}
}
