package synclock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/storetest"
)

// countingQueue counts the claims a locker makes on a store with lines
// that does not hand over. A claim is counted when the store's reply has
// come back, so a count the test waits for means the claim has been
// decided — a refused waiter is then in line — not merely started.
type countingQueue struct {
	queueStore
	claims atomic.Int64
}

type queueStore interface {
	backend.Store
	backend.Queue
}

func (c *countingQueue) AcquireQueued(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
	l, err := c.queueStore.AcquireQueued(ctx, key, owner, ttl, floor, patience)
	c.claims.Add(1)
	return l, err
}

// countingHandover is countingQueue on a store that hands over.
type countingHandover struct {
	*countingQueue
	h backend.Handover
}

func (c countingHandover) AwaitHandover(ctx context.Context, key, owner string, max time.Duration) (backend.Lease, bool, error) {
	return c.h.AwaitHandover(ctx, key, owner, max)
}

var (
	_ queueStore       = (*countingQueue)(nil)
	_ backend.Handover = countingHandover{}
)

// countingLocker returns a locker of instance n on s whose claims are
// counted; it hands over if s does.
func countingLocker(t testing.TB, n int, cfg synclock.Config, s queueStore) (*synclock.Locker, *countingQueue) {
	t.Helper()
	cq := &countingQueue{queueStore: s}
	var st backend.Store = cq
	if h, ok := s.(backend.Handover); ok {
		st = countingHandover{cq, h}
	}
	lk, err := synclock.NewLocker(st, idN(t, n), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return lk, cq
}

// lineLen returns how many waiters the store keeps in key's line.
func lineLen(t testing.TB, s *redisbackend.Store, key string) int64 {
	t.Helper()
	line, _ := s.LineKeys(backend.AppKey("acme", "billing", "lock", key))
	n, err := server.Client(t).ZCard(context.Background(), line).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waiters returns how many waiters st keeps in key's line: on Redis the
// line's size (lineLen), elsewhere the places a listing shows.
func waiters(t testing.TB, st backend.Store, key string) int64 {
	t.Helper()
	sk := backend.AppKey("acme", "billing", "lock", key)
	if rs, ok := st.(*redisbackend.Store); ok {
		return lineLen(t, rs, key)
	}
	in, ok := st.(backend.Inspector)
	if !ok {
		t.Fatalf("%T lists no waiting lines", st)
	}
	infos, err := in.Leases(context.Background(), sk)
	if err != nil {
		t.Fatal(err)
	}
	for _, info := range infos {
		if info.Key == sk {
			return int64(len(info.Waiters))
		}
	}
	return 0
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Instances that wait for one key get it in the order they came, not in
// the order their claims happen to reach the store after a release. On a
// store that hands over, a waiter asks once and is then handed the key
// without asking again; elsewhere it asks again only when the release is
// kept for it, never for a release kept for another waiter. The retry
// interval is an hour, so only releases move anyone.
func TestLineOrderAcrossInstances(t *testing.T) {
	cfg := synclock.Config{RetryInterval: time.Hour}
	t.Run("Redis", func(t *testing.T) {
		testLineOrder(t, cfg, 1, func(t testing.TB) queueStore { return newRedisStore(t) })
	})
	t.Run("Consul", func(t *testing.T) {
		open := storetest.ByName(t, "consul").Open(t)
		testLineOrder(t, cfg, 1, func(t testing.TB) queueStore { return open(t).(queueStore) })
	})
	t.Run("WithoutHandover", func(t *testing.T) {
		mem := membackend.New(membackend.WithoutHandover())
		t.Cleanup(func() { mem.Close() })
		// The first claim, the one after subscribing, and the one when
		// the release is kept for it.
		testLineOrder(t, cfg, 3, func(testing.TB) queueStore { return mem })
	})
}

func testLineOrder(t *testing.T, cfg synclock.Config, wantClaims int64, open func(testing.TB) queueStore) {
	holder, err := synclock.NewLocker(open(t), idN(t, 1), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	key := uniqueKey(t)
	m := holder.Mutex(key)
	if err := m.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
		errs  = make(chan error, 3)
	)
	var counters []*countingQueue
	for _, n := range []int{2, 3, 4} {
		lk, cq := countingLocker(t, n, cfg, open(t))
		counters = append(counters, cq)
		wg.Go(func() {
			errs <- lk.DoKey(ctxT(t), key, func(context.Context) error {
				mu.Lock()
				order = append(order, n)
				mu.Unlock()
				return nil
			})
		})
		// Waiting claims: once, or (subscribing) twice.
		waitFor(t, "the waiter is in line", func() bool { return cq.claims.Load() == min(wantClaims, 2) })
	}
	if err := m.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if want := []int{2, 3, 4}; !slices.Equal(order, want) {
		t.Fatalf("instances ran in the order %v, want their arrival order %v", order, want)
	}
	for i, cq := range counters {
		if n := cq.claims.Load(); n != wantClaims {
			t.Errorf("waiter %d made %d claims, want %d", i+2, n, wantClaims)
		}
	}
}

// A waiter that gives up leaves the line at once, so the lock is not kept
// for it until its place lapses; a TryLock never joins, and names the
// waiter first in line.
func TestGiveUpLeavesLine(t *testing.T) { eachStore(t, testGiveUpLeavesLine) }

func testGiveUpLeavesLine(t *testing.T, newStore func(testing.TB) backend.Store) {
	cfg := synclock.Config{RetryInterval: time.Hour}
	hs := newStore(t)
	holder := lockerOn(t, 1, hs, cfg)
	key := uniqueKey(t)
	m := holder.Mutex(key)
	if err := m.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	defer m.Unlock(ctxT(t))
	section := func(context.Context) error { return nil }

	waiter := lockerOn(t, 2, newStore(t), cfg)
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan error, 1)
	go func() { done <- waiter.DoKey(ctx, key, section) }()
	waitFor(t, "the waiter is in line", func() bool { return waiters(t, hs, key) == 1 })
	// A TryLock meanwhile, which does not join, names the waiter first in
	// line (a store may leave it out of a refusal that joins).
	var locked *synclock.LockedError
	if err := tryDo(lockerOn(t, 4, newStore(t), cfg), ctxT(t), key, section); !errors.As(err, &locked) || !strings.HasPrefix(locked.Next, idN(t, 2).String()+"#") {
		t.Fatalf("TryLock while instance 2 waits: %v; want ErrLocked naming it first in line", err)
	}
	cancel()
	if err := <-done; !errors.Is(err, synclock.ErrLocked) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled waiter: %v, want ErrLocked joined with Canceled", err)
	}
	if n := waiters(t, hs, key); n != 0 {
		t.Fatalf("%d waiters in line after the only one gave up, want 0", n)
	}

	bounded := lockerOn(t, 3, newStore(t), synclock.Config{RetryInterval: time.Millisecond, MaxRetries: 2})
	if err := bounded.DoKey(ctxT(t), key, section); !errors.Is(err, synclock.ErrLocked) {
		t.Fatalf("after max retries: %v, want ErrLocked", err)
	}
	if err := tryDo(waiter, ctxT(t), key, section); !errors.Is(err, synclock.ErrLocked) {
		t.Fatalf("TryLock on a held lock: %v, want ErrLocked", err)
	}
	if n := waiters(t, hs, key); n != 0 {
		t.Fatalf("%d waiters in line after max retries and a TryLock, want 0", n)
	}
}

// countingRejoin is countingHandover on a store whose release can put
// another waiter in line (backend.Rejoin); it counts those releases.
type countingRejoin struct {
	countingHandover
	r      backend.Rejoin
	joined atomic.Int64
}

func (c *countingRejoin) ReleaseAndJoin(ctx context.Context, key, owner, next string, ttl time.Duration, floor uint64, patience time.Duration) (bool, error) {
	ok, err := c.r.ReleaseAndJoin(ctx, key, owner, next, ttl, floor, patience)
	if ok {
		c.joined.Add(1)
	}
	return ok, err
}

var _ backend.Rejoin = (*countingRejoin)(nil)

// A holder that releases a key while another goroutine of its instance
// waits for it, on a store that hands over to an instance waiting in
// line, puts that goroutine in line in the same step: the goroutine is
// handed the key in its turn without asking the store (no AcquireQueued
// of its own), after the other instance's turn.
func TestReleaseTakesThePlaceOfTheNextLocalTurn(t *testing.T) {
	mem := membackend.New() // one store, as two processes share one server
	t.Cleanup(func() { mem.Close() })
	for name, open := range map[string]func(testing.TB) queueStore{
		"Memory": func(testing.TB) queueStore { return mem },
		"Redis":  func(t testing.TB) queueStore { return newRedisStore(t) },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := synclock.Config{RetryInterval: time.Hour} // only releases move anyone
			s := open(t)
			cq := &countingQueue{queueStore: s}
			st := &countingRejoin{countingHandover: countingHandover{cq, s.(backend.Handover)}, r: s.(backend.Rejoin)}
			a, err := synclock.NewLocker(st, idN(t, 1), cfg, quiet)
			if err != nil {
				t.Fatal(err)
			}
			b, bq := countingLocker(t, 2, cfg, open(t))
			key := uniqueKey(t)
			first := a.Mutex(key)
			if err := first.Lock(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			var (
				mu    sync.Mutex
				order []string
				wg    sync.WaitGroup
			)
			run := func(name string, lk *synclock.Locker) {
				wg.Go(func() {
					if err := lk.DoKey(ctxT(t), key, func(context.Context) error {
						mu.Lock()
						order = append(order, name)
						mu.Unlock()
						return nil
					}); err != nil {
						t.Error(err)
					}
				})
			}
			run("b", b)
			waitFor(t, "b is in line", func() bool { return bq.claims.Load() == 1 })
			claims := cq.claims.Load()
			run("a2", a)
			waitFor(t, "a2 waits behind a's holder", func() bool { return synclock.Waiting(a, key) == 1 })
			if err := first.Unlock(ctxT(t)); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if want := []string{"b", "a2"}; !slices.Equal(order, want) {
				t.Fatalf("ran in the order %v, want %v", order, want)
			}
			if n := st.joined.Load(); n != 1 {
				t.Errorf("%d releases put a waiter in line, want 1 (a's, for a2)", n)
			}
			if n := cq.claims.Load() - claims; n != 0 {
				t.Errorf("a2 asked the store %d times, want 0: a's release took its place", n)
			}
		})
	}
}

// A place in the store's line that a release took for a goroutine of its
// instance that then gave up before its turn (nobody took the turn) is
// taken out of the line, so the key is not handed to an owner nobody
// waits as.
func TestUntakenPlaceLeavesTheLine(t *testing.T) {
	mem := membackend.New()
	t.Cleanup(func() { mem.Close() })
	lk, err := synclock.NewLocker(mem, idN(t, 1), synclock.Config{}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	key := uniqueKey(t)
	sk := backend.AppKey("acme", "billing", "lock", key)
	ctx := ctxT(t)
	held, err := mem.Acquire(ctx, sk, "holder", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mem.AcquireQueued(ctx, sk, "placed", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("placing the waiter: %v, want ErrHeld", err)
	}
	synclock.LeaveTicket(lk, key, "placed")
	_, err = mem.AcquireQueued(ctx, sk, "try", time.Minute, 0, 0)
	var he *backend.HeldError
	if !errors.As(err, &he) || he.Holder.Token != held.Token {
		t.Fatalf("a try after the place was left: %v, want held by the holder", err)
	}
	if he.Next != "" {
		t.Fatalf("the line still holds %q after nobody took the place", he.Next)
	}
}

// lostRejoinReply runs ReleaseAndJoin on the store but loses its reply,
// as a network that breaks after the request reached the server does.
type lostRejoinReply struct{ *membackend.Store }

func (l lostRejoinReply) ReleaseAndJoin(ctx context.Context, key, owner, next string, ttl time.Duration, floor uint64, patience time.Duration) (bool, error) {
	_, _ = l.Store.ReleaseAndJoin(ctx, key, owner, next, ttl, floor, patience)
	return false, errors.New("connection reset (the reply was lost)")
}

// A release whose reply is lost may still have put a waiter in line for
// the next local goroutine: that place is taken out of the line, so the
// key is not handed to an owner nobody waits as, and the goroutine, which
// then asks as usual, gets the key in its turn.
func TestLostRejoinReplyLeavesNoPlace(t *testing.T) {
	mem := membackend.New()
	t.Cleanup(func() { mem.Close() })
	cfg := synclock.Config{RetryInterval: time.Hour, ClaimWindow: time.Minute, HoldDuration: time.Minute}
	a, err := synclock.NewLocker(lostRejoinReply{mem}, idN(t, 1), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	b, bq := countingLocker(t, 2, cfg, mem)
	key := uniqueKey(t)
	first := a.Mutex(key)
	if err := first.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	bHolds, bGo := make(chan struct{}), make(chan struct{})
	wg.Go(func() {
		if err := b.DoKey(ctxT(t), key, func(context.Context) error {
			close(bHolds)
			<-bGo
			return nil
		}); err != nil {
			t.Error(err)
		}
	})
	waitFor(t, "b is in line", func() bool { return bq.claims.Load() == 1 })
	a2 := make(chan error, 1)
	wg.Go(func() {
		ctx, cancel := context.WithTimeout(ctxT(t), 20*time.Second) // well inside the phantom's claim window
		defer cancel()
		a2 <- a.DoKey(ctx, key, func(context.Context) error { return nil })
	})
	waitFor(t, "a2 waits behind a's holder", func() bool { return synclock.Waiting(a, key) == 1 })
	if err := first.Unlock(ctxT(t)); err == nil {
		t.Error("Unlock whose release reply was lost reported no error")
	}
	<-bHolds
	waitFor(t, "a2 is in line behind b", func() bool {
		_, err := mem.AcquireQueued(ctxT(t), backend.AppKey("acme", "billing", "lock", key), "try", time.Minute, 0, 0)
		var he *backend.HeldError
		return errors.As(err, &he) && he.Next != ""
	})
	close(bGo)
	if err := <-a2; err != nil {
		t.Fatalf("a2 after b's turn: %v; want the lock (a lost place must not be ahead of it)", err)
	}
	wg.Wait()
}
