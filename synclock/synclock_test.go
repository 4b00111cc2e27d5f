package synclock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/testenv"
)

var server *testenv.Redis

func TestMain(m *testing.M) { testenv.MainWithRedis(m, &server) }

const patience = 15 * time.Second

var quiet = synclock.WithLogger(slog.New(slog.DiscardHandler))

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

func idN(t testing.TB, n int) instanceid.ID {
	t.Helper()
	id, err := instanceid.New("127.0.0.1", "acme", "billing", 8000+n)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// redisLocker returns a locker of instance n with its own Redis client.
func redisLocker(t testing.TB, n int, cfg synclock.Config, opts ...synclock.Option) (*synclock.Locker, backend.Store) {
	t.Helper()
	s := newRedisStore(t)
	return lockerOn(t, n, s, cfg, opts...), s
}

// newRedisStore returns a store on its own client of the package's server.
func newRedisStore(t testing.TB) *redisbackend.Store {
	t.Helper()
	s, err := redisbackend.New(server.Client(t), redisbackend.WithoutRestartGuard()) // a server started for the tests
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// eachStore runs f as a subtest on the in-memory store and on the
// package's redis-server (the real-store tier, skipped under -short).
// newStore returns a client of the subtest's store each time it is
// called, as each process has its own.
func eachStore(t *testing.T, f func(t *testing.T, newStore func(testing.TB) backend.Store)) {
	t.Run("mem", func(t *testing.T) {
		mem := membackend.New()
		t.Cleanup(func() { mem.Close() })
		f(t, func(testing.TB) backend.Store { return mem })
	})
	t.Run("redis", func(t *testing.T) {
		f(t, func(t testing.TB) backend.Store { return newRedisStore(t) })
	})
}

// lockerOn returns a quiet locker of instance n on st.
func lockerOn(t testing.TB, n int, st backend.Store, cfg synclock.Config, opts ...synclock.Option) *synclock.Locker {
	t.Helper()
	lk, err := synclock.NewLocker(st, idN(t, n), cfg, append([]synclock.Option{quiet}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return lk
}

// tryDo runs fn under key if the lock is free, the one way to skip a held
// lock: Mutex.TryLock, the section on the Mutex's Context, Unlock.
func tryDo(lk *synclock.Locker, ctx context.Context, key string, fn func(context.Context) error) error {
	m := lk.Mutex(key)
	if err := m.TryLock(ctx); err != nil {
		return err
	}
	return errors.Join(fn(m.Context()), m.Unlock(ctx))
}

func uniqueKey(t testing.TB) string {
	return strings.NewReplacer("/", "-", " ", "_").Replace(t.Name()) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// The section's context ends when the hold duration runs out, and DoKey
// reports ErrLeaseExpired alongside fn's own error. That the end comes a
// margin before the store could expire the key is checked on the fake
// clock (TestLeaseDeadlinesShareOneTimer), not here by the wall clock.
func TestHoldExpiryCancelsSection(t *testing.T) { eachStore(t, testHoldExpiryCancelsSection) }

func testHoldExpiryCancelsSection(t *testing.T, newStore func(testing.TB) backend.Store) {
	lk := lockerOn(t, 1, newStore(t), synclock.Config{HoldDuration: 300 * time.Millisecond})
	fnErr := errors.New("section gave up")
	err := lk.DoKey(ctxT(t), uniqueKey(t), func(ctx context.Context) error {
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), synclock.ErrLeaseExpired) {
			t.Errorf("cause = %v, want ErrLeaseExpired", context.Cause(ctx))
		}
		return fnErr
	})
	if !errors.Is(err, synclock.ErrLeaseExpired) || !errors.Is(err, fnErr) {
		t.Fatalf("err = %v, want ErrLeaseExpired joined with fn's error", err)
	}
}

func TestMaxRetriesAndContext(t *testing.T) { eachStore(t, testMaxRetriesAndContext) }

func testMaxRetriesAndContext(t *testing.T, newStore func(testing.TB) backend.Store) {
	holder := lockerOn(t, 1, newStore(t), synclock.Config{})
	key := uniqueKey(t)
	m := holder.Mutex(key)
	if err := m.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(ctxT(t))
	ran := false
	section := func(context.Context) error { ran = true; return nil }

	bounded := lockerOn(t, 2, newStore(t), synclock.Config{MaxRetries: 2, RetryInterval: 5 * time.Millisecond})
	err := bounded.DoKey(ctxT(t), key, section)
	if !errors.Is(err, synclock.ErrLocked) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), idN(t, 1).String()) || !strings.Contains(err.Error(), "3 tries") {
		t.Fatalf("after max retries: %v; want ErrLocked naming the key, the holder and 3 tries", err)
	}
	var locked *synclock.LockedError
	if !errors.As(err, &locked) || locked.Key != key || locked.Tries != 3 || locked.Recovering ||
		!strings.HasPrefix(locked.Holder.Owner, idN(t, 1).String()+"#") || locked.Holder.Token == 0 || locked.Holder.TTL <= 0 {
		t.Fatalf("after max retries: %#v; want a *LockedError with the key, 3 tries and the holder's lease", locked)
	}

	patient := lockerOn(t, 3, newStore(t), synclock.Config{RetryInterval: time.Hour})
	ctx, cancel := context.WithTimeout(ctxT(t), 100*time.Millisecond)
	defer cancel()
	err = patient.DoKey(ctx, key, section)
	if !errors.Is(err, synclock.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), key) {
		t.Fatalf("after the deadline: %v; want ErrLocked joined with DeadlineExceeded, naming the key", err)
	}

	if err := tryDo(patient, ctxT(t), key, section); !errors.Is(err, synclock.ErrLocked) {
		t.Fatalf("TryLock on a held lock: %v, want ErrLocked", err)
	}
	if ran {
		t.Fatal("a section ran without the lock")
	}
}

func TestPanicReleases(t *testing.T) { eachStore(t, testPanicReleases) }

func testPanicReleases(t *testing.T, newStore func(testing.TB) backend.Store) {
	lk := lockerOn(t, 1, newStore(t), synclock.Config{})
	key := uniqueKey(t)
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v, want the original panic value", p)
			}
		}()
		lk.DoKey(ctxT(t), key, func(context.Context) error { panic("boom") })
	}()
	other := lockerOn(t, 2, newStore(t), synclock.Config{})
	if err := tryDo(other, ctxT(t), key, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("after a panic the lock is still held: %v", err)
	}
}

func TestDisabled(t *testing.T) {
	lk, err := synclock.NewLocker(membackend.New(), idN(t, 1), synclock.Config{Disabled: true}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := lk.DoKey(ctxT(t), "k", func(context.Context) error { ran = true; return nil }); !errors.Is(err, synclock.ErrDisabled) || ran {
		t.Fatalf("disabled: err %v, ran %v; want ErrDisabled and not run", err, ran)
	}
	if err := lk.Mutex("k").Lock(ctxT(t)); !errors.Is(err, synclock.ErrDisabled) {
		t.Fatalf("disabled Mutex.Lock: %v", err)
	}
}

func TestReentrantSameChain(t *testing.T) { eachStore(t, testReentrantSameChain) }

func testReentrantSameChain(t *testing.T, newStore func(testing.TB) backend.Store) {
	lk := lockerOn(t, 1, newStore(t), synclock.Config{RetryInterval: time.Hour})
	key := uniqueKey(t)
	depth := 0
	err := lk.DoKey(ctxT(t), key, func(ctx context.Context) error {
		depth++
		outer, _ := synclock.Token(ctx)
		return lk.DoKey(ctx, key, func(ctx context.Context) error {
			depth++
			if inner, _ := synclock.Token(ctx); inner != outer {
				t.Errorf("nested token %d, outer %d", inner, outer)
			}
			return nil
		})
	})
	if err != nil || depth != 2 {
		t.Fatalf("nested DoKey: err %v, depth %d", err, depth)
	}
}

// A section nested two levels down in another key's section still sees
// that its call chain holds the outer key; another Locker (another
// instance) does not, and finds the key held.
func TestReentrantThroughAnotherKey(t *testing.T) { eachStore(t, testReentrantThroughAnotherKey) }

func testReentrantThroughAnotherKey(t *testing.T, newStore func(testing.TB) backend.Store) {
	lk := lockerOn(t, 1, newStore(t), synclock.Config{RetryInterval: time.Hour})
	other := lockerOn(t, 2, newStore(t), synclock.Config{RetryInterval: time.Hour})
	a, b := uniqueKey(t)+":a", uniqueKey(t)+":b"
	depth := 0
	err := lk.DoKey(ctxT(t), a, func(ctx context.Context) error {
		depth++
		return lk.DoKey(ctx, b, func(ctx context.Context) error {
			depth++
			inB, _ := synclock.Token(ctx)
			if err := tryDo(other, ctx, a, func(context.Context) error { return nil }); !errors.Is(err, synclock.ErrLocked) {
				t.Errorf("another instance's TryLock of %s inside its section: %v, want ErrLocked", a, err)
			}
			return lk.DoKey(ctx, a, func(ctx context.Context) error {
				depth++
				if tok, _ := synclock.Token(ctx); tok != inB {
					t.Errorf("token in the nested section of %s: %d, want %d, the innermost holding's (%s)", a, tok, inB, b)
				}
				return nil
			})
		})
	})
	if err != nil || depth != 3 {
		t.Fatalf("DoKey(a) > DoKey(b) > DoKey(a): err %v, depth %d; want nil and 3", err, depth)
	}
}

// With Config.AutoRenew a section may run past the hold duration, up to the
// ceiling, where it ends by itself: each third of a hold the lease is
// renewed in the store. The Locker runs on the fake clock, so that each
// renewal has all the time it needs to land; the holds are long, so that
// the store, on the real clock, keeps each lease far longer than the test
// needs. Where the ceiling falls is checked exactly by
// TestAutoRenewStopsAtCeiling.
func TestAutoRenew(t *testing.T) { eachStore(t, testAutoRenew) }

func testAutoRenew(t *testing.T, newStore func(testing.TB) backend.Store) {
	const hold, ceiling = time.Minute, 3 * time.Minute
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	extended := make(chan struct{}, 1)
	lk := lockerOn(t, 1, newStore(t), synclock.Config{HoldDuration: hold, ClaimWindow: hold, AutoRenew: ceiling}, synclock.WithClock(clk),
		synclock.WithObserver(func(ev synclock.Event) {
			if ev.Kind == synclock.EventExtended {
				extended <- struct{}{}
			}
		}))
	m := lk.Mutex(uniqueKey(t))
	if err := m.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	// Renewals every third of a hold; the sixth, two holds in, takes the
	// lease to the ceiling.
	for i := range 6 {
		// The deadline's timer, and from the second round on the
		// renewal's own.
		clk.AwaitTimers(t, min(i+1, 2))
		clk.Advance(hold / 3)
		select {
		case <-extended:
		case <-m.Context().Done():
			t.Fatalf("the section ended after %v (renewal %d): %v", time.Duration(i+1)*hold/3, i+1, context.Cause(m.Context()))
		case <-time.After(patience):
			t.Fatalf("renewal %d, %v into the section, never came", i+1, time.Duration(i+1)*hold/3)
		}
	}
	clk.Advance(ceiling) // past the ceiling
	select {
	case <-m.Context().Done():
		if cause := context.Cause(m.Context()); !errors.Is(cause, synclock.ErrLeaseExpired) {
			t.Errorf("past the ceiling the section ended with %v, want ErrLeaseExpired", cause)
		}
	case <-time.After(patience):
		t.Fatal("the section did not end at the ceiling")
	}
	if err := m.Unlock(ctxT(t)); !errors.Is(err, synclock.ErrLeaseExpired) {
		t.Fatalf("Unlock past the ceiling: %v, want ErrLeaseExpired", err)
	}
}

// Goroutines of one process queue locally in arrival order.
func TestLocalQueueIsFIFO(t *testing.T) {
	store := membackend.New()
	defer store.Close()
	lk, err := synclock.NewLocker(store, idN(t, 1), synclock.Config{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	key := "fifo"
	m := lk.Mutex(key)
	if err := m.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 5 {
		entered := make(chan struct{})
		wg.Go(func() {
			close(entered)
			err := lk.DoKey(ctxT(t), key, func(context.Context) error {
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
		<-entered
		waitQueued(t, lk, key, i+1)
	}
	if err := m.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if fmt.Sprint(order) != "[0 1 2 3 4]" {
		t.Fatalf("order %v, want arrival order", order)
	}
}

func TestPackageDefault(t *testing.T) {
	t.Cleanup(func() { synclock.SetDefault(nil) })
	if err := synclock.Do(ctxT(t), func(context.Context) error { return nil }); !errors.Is(err, synclock.ErrNoDefault) {
		t.Fatalf("Do without default: %v", err)
	}
	store := membackend.New()
	defer store.Close()
	lk, _ := synclock.NewLocker(store, idN(t, 1), synclock.Config{}, quiet)
	synclock.SetDefault(lk)
	var key string
	err := synclock.Do(ctxT(t), func(ctx context.Context) error {
		l, err := store.Get(ctx, backend.AppKey("acme", "billing", "lock", "github.com/baton-go/baton/synclock_test.TestPackageDefault"))
		key = l.Key
		return err
	})
	if err != nil {
		t.Fatalf("Do with default: %v (the key should be the caller's function name)", err)
	}
	if !strings.HasSuffix(key, "synclock_test.TestPackageDefault") {
		t.Fatalf("key %q", key)
	}
}

func TestNewLockerRejectsBadInput(t *testing.T) {
	store := membackend.New()
	defer store.Close()
	tests := []struct {
		name  string
		store backend.Store
		id    instanceid.ID
		cfg   synclock.Config
		opts  []synclock.Option
		want  string
	}{
		{"nil store", nil, idN(t, 1), synclock.Config{}, nil, "nil store"},
		{"zero ID", store, instanceid.ID{}, synclock.Config{}, nil, "instanceid"},
		{"negative retries", store, idN(t, 1), synclock.Config{MaxRetries: -1}, nil, "MaxRetries"},
		{"negative hold", store, idN(t, 1), synclock.Config{HoldDuration: -time.Second}, nil, "HoldDuration"},
		{"ceiling below hold", store, idN(t, 1), synclock.Config{AutoRenew: time.Second}, nil, "AutoRenew"},
		{"negative ceiling", store, idN(t, 1), synclock.Config{AutoRenew: -time.Second}, nil, "AutoRenew"},
		{"negative operation timeout", store, idN(t, 1), synclock.Config{OperationTimeout: -time.Second}, nil, "OperationTimeout"},
		{"claim window past hold", store, idN(t, 1), synclock.Config{HoldDuration: time.Second, ClaimWindow: 2 * time.Second}, nil, "must not exceed HoldDuration"},
		{"negative claim window", store, idN(t, 1), synclock.Config{ClaimWindow: -time.Second}, nil, "ClaimWindow"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := synclock.NewLocker(tt.store, tt.id, tt.cfg, tt.opts...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
	lk, _ := synclock.NewLocker(store, idN(t, 1), synclock.Config{}, quiet)
	for _, key := range []string{"", "has space", "a{b}"} {
		if err := lk.DoKey(ctxT(t), key, func(context.Context) error { return nil }); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("DoKey(%q): %v, want ErrInvalidArgument", key, err)
		}
		// A Mutex checks its key once, and reports it on every try.
		m := lk.Mutex(key)
		for range 2 {
			if err := m.Lock(ctxT(t)); !errors.Is(err, backend.ErrInvalidArgument) {
				t.Errorf("Mutex(%q).Lock: %v, want ErrInvalidArgument", key, err)
			}
			if err := m.TryLock(ctxT(t)); !errors.Is(err, backend.ErrInvalidArgument) {
				t.Errorf("Mutex(%q).TryLock: %v, want ErrInvalidArgument", key, err)
			}
		}
		if err := m.Unlock(ctxT(t)); !errors.Is(err, synclock.ErrNotLocked) {
			t.Errorf("Mutex(%q).Unlock after failed locks: %v, want ErrNotLocked", key, err)
		}
	}
	if err := lk.Mutex("m").Unlock(ctxT(t)); !errors.Is(err, synclock.ErrNotLocked) {
		t.Errorf("Unlock of an unlocked mutex: %v", err)
	}
}

func waitQueued(t testing.TB, lk *synclock.Locker, key string, n int) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for synclock.Waiting(lk, key) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines never queued", n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Do called from a closure is keyed by the named function the closure is
// written in, not by the compiler's numbered name (".func1"), which
// changes when another closure is added above it: so the key stays the
// same from one version of the service to the next, and every closure of
// one function shares its lock.
func TestDoFromClosureKeysByEnclosingFunction(t *testing.T) {
	t.Cleanup(func() { synclock.SetDefault(nil) })
	store := membackend.New()
	defer store.Close()
	var keys []string
	lk, _ := synclock.NewLocker(store, idN(t, 1), synclock.Config{}, quiet, synclock.WithObserver(func(ev synclock.Event) {
		if ev.Kind == synclock.EventAcquired {
			keys = append(keys, ev.Key)
		}
	}))
	synclock.SetDefault(lk)
	ran := 0
	section := func(context.Context) error { ran++; return nil }
	if err := func() error { return synclock.Do(ctxT(t), section) }(); err != nil {
		t.Fatalf("Do from a closure: %v", err)
	}
	// From a named function Do is keyed by that function.
	if err := namedSection(ctxT(t), section); err != nil {
		t.Fatalf("Do from a named function: %v", err)
	}
	const pkg = "github.com/baton-go/baton/synclock_test."
	want := []string{pkg + "TestDoFromClosureKeysByEnclosingFunction", pkg + "namedSection"}
	if ran != 2 || !slices.Equal(keys, want) {
		t.Fatalf("ran %d sections with keys %q; want 2 with %q", ran, keys, want)
	}
}

func namedSection(ctx context.Context, fn func(context.Context) error) error {
	return synclock.Do(ctx, fn)
}
