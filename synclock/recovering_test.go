package synclock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/testenv"
)

// recoveringCounter is a store that counts the claims it refused because
// it restarted without its data (HeldError.Recovering).
type recoveringCounter struct {
	*membackend.Store
	refused atomic.Int32
}

func (s *recoveringCounter) count(err error) {
	var he *backend.HeldError
	if errors.As(err, &he) && he.Recovering {
		s.refused.Add(1)
	}
}

func (s *recoveringCounter) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	l, err := s.Store.Acquire(ctx, key, owner, ttl, floor)
	s.count(err)
	return l, err
}

func (s *recoveringCounter) AcquireQueued(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
	l, err := s.Store.AcquireQueued(ctx, key, owner, ttl, floor, patience)
	s.count(err)
	return l, err
}

var _ backend.Handover = (*recoveringCounter)(nil)

// A store that restarted empty refuses every key for a while (Recovering,
// with the time left): a waiter sleeps that long instead of polling at
// RetryInterval, and the refusals are not retries, so MaxRetries does not
// make it give up on a lock nobody holds.
func TestRecoveringRefusalIsWaitedOut(t *testing.T) {
	st := &recoveringCounter{Store: membackend.New()}
	defer st.Close()
	cfg := synclock.Config{RetryInterval: 10 * time.Millisecond, MaxRetries: 2, ClaimWindow: 500 * time.Millisecond, HoldDuration: time.Second}
	lk := lockerOn(t, 1, st, cfg)
	st.Restart() // refuses each key for its ttl, ClaimWindow here
	ctx := ctxT(t)
	start := time.Now()
	err := lk.DoKey(ctx, "recovering:wait", func(ctx context.Context) error { return nil })
	if err != nil {
		t.Fatalf("DoKey %v after a restart the store recovers from in %v: %v", time.Since(start), cfg.ClaimWindow, err)
	}
	// The first claim is refused with the time left; the waiter sleeps
	// that long. One more refusal is allowed for a clock read a moment
	// early; a waiter that polls at RetryInterval makes dozens.
	if n := st.refused.Load(); n < 1 || n > 2 {
		t.Errorf("the store refused %d claims as recovering over %v; want 1 or 2 (one, then a sleep for the time it named)", n, cfg.ClaimWindow)
	}
}

// The wait for a recovering store ends with the caller's context, and the
// refusal says why nobody has the key.
func TestRecoveringWaitEndsWithContext(t *testing.T) {
	st := &recoveringCounter{Store: membackend.New(membackend.WithRestartGuard(time.Hour))}
	defer st.Close()
	cfg := synclock.Config{RetryInterval: 10 * time.Millisecond}
	lk := lockerOn(t, 1, st, cfg)
	st.Restart()

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- lk.Mutex("recovering:ctx").Lock(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(patience):
		t.Fatalf("Lock did not return %v after its context ended", patience)
	}
	if !errors.Is(err, synclock.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lock while the store recovers for an hour, ctx of 300ms: %v; want ErrLocked and DeadlineExceeded", err)
	}
	if n := st.refused.Load(); n != 1 {
		t.Errorf("the store refused %d claims as recovering; want 1: the waiter sleeps for the time the refusal names (an hour), bounded by its context", n)
	}

	err = lk.Mutex("recovering:try").TryLock(context.Background())
	if !errors.Is(err, synclock.ErrLocked) || !strings.Contains(err.Error(), "restarted") {
		t.Errorf("TryLock while the store recovers: %v; want ErrLocked saying the store restarted", err)
	}
}

// On a redis-server baton has never used, with the restart guard on, a
// lock nobody holds is refused for a while: TryLock's *LockedError says
// Recovering (not only ErrLocked), for how long, and how to declare a new
// store.
func TestRecoveringOnFreshRedis(t *testing.T) {
	r := testenv.NewRedis(t)
	lk := guardedLocker(t, r, 1, synclock.Config{})
	err := lk.Mutex("fresh:try").TryLock(ctxT(t))
	var locked *synclock.LockedError
	if !errors.As(err, &locked) || !locked.Recovering || !errors.Is(err, synclock.ErrLocked) {
		t.Fatalf("TryLock on a fresh Redis: %v; want a Recovering *LockedError matching ErrLocked", err)
	}
	for _, want := range []string{"new to baton", "batonctl init", "WithoutRestartGuard", "for another"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("TryLock on a fresh Redis: %q does not say %q", err, want)
		}
	}
}

// guardedLocker returns a locker of instance n as a separate process
// would have it: its own client of r and a store with the default restart
// guard.
func guardedLocker(t *testing.T, r *testenv.Redis, n int, cfg synclock.Config) *synclock.Locker {
	t.Helper()
	st, err := redisbackend.New(r.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return lockerOn(t, n, st, cfg)
}

// The store (the memory store, then Redis) restarts without its data, and
// a new process (its own Locker, and on Redis its own client and store,
// no token seen) takes the lock: its token is larger than every
// token granted before the restart, and its wait for the restart guard,
// which refuses the key for a ClaimWindow, does not use up its one retry.
// The old process's first lock, on the fresh server, waits the same way.
func TestTokensAfterEmptyRestartNewProcess(t *testing.T) {
	t.Run("mem", func(t *testing.T) {
		st := membackend.New()
		t.Cleanup(func() { st.Close() })
		testTokensAfterEmptyRestart(t, func(n int, cfg synclock.Config) *synclock.Locker { return lockerOn(t, n, st, cfg) },
			func() error { st.Restart(); return nil })
	})
	t.Run("redis", func(t *testing.T) {
		r := testenv.NewRedis(t)
		testTokensAfterEmptyRestart(t, func(n int, cfg synclock.Config) *synclock.Locker { return guardedLocker(t, r, n, cfg) }, r.Restart)
	})
}

// testTokensAfterEmptyRestart runs the test on the lockers of newLocker,
// one per process, on a store that restart empties.
func testTokensAfterEmptyRestart(t *testing.T, newLocker func(n int, cfg synclock.Config) *synclock.Locker, restart func() error) {
	cfg := synclock.Config{RetryInterval: 20 * time.Millisecond, MaxRetries: 1, ClaimWindow: time.Second, HoldDuration: 2 * time.Second}
	ctx := ctxT(t)
	const key = "invoice:42"
	token := func(lk *synclock.Locker) uint64 {
		t.Helper()
		var tok uint64
		err := lk.DoKey(ctx, key, func(ctx context.Context) error {
			tok, _ = synclock.Token(ctx)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	old := newLocker(1, cfg)
	var last uint64
	for range 5 {
		tok := token(old)
		if tok <= last {
			t.Fatalf("token %d after %d", tok, last)
		}
		last = tok
	}
	if err := restart(); err != nil {
		t.Fatal(err)
	}
	if tok := token(newLocker(2, cfg)); tok <= last {
		t.Fatalf("after an empty restart a new process got token %d; want one above %d, the last before the restart", tok, last)
	}
}
