package synclock_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/testenv"
)

// A process that waits for more contended locks than its Redis client has
// pool connections keeps its mastership: the waits hold no connection of
// the pool, so the elector's renewals on the same client go through.
func TestLockWaitsLeaveThePoolToTheElector(t *testing.T) {
	// fewer pool connections than the keys waited for; PoolTimeout stays the default
	opts := &redis.Options{Addr: server.Client(t).Options().Addr, PoolSize: 2}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	shared, err := redisbackend.New(rdb, redisbackend.WithoutRestartGuard()) // a server started for the tests
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shared.Close() })
	ctx := ctxT(t)

	// Another process holds four locks for the whole test.
	long := synclock.Config{HoldDuration: time.Minute, ClaimWindow: time.Minute}
	holder := lockerOn(t, 1, newRedisStore(t), long)
	const keys = 4
	names := make([]string, keys)
	for i := range names {
		names[i] = uniqueKey(t) + "-" + string(rune('a'+i))
		m := holder.Mutex(names[i])
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		defer m.Unlock(context.Background())
	}

	// This process is master, on the shared client.
	counter := &renewCounter{Store: shared}
	var demoted atomic.Int32
	el, err := role.NewElector(counter, idN(t, 2),
		role.Config{HeartbeatInterval: 500 * time.Millisecond, HeartbeatExpiration: 3 * time.Second, SafetyMargin: 300 * time.Millisecond},
		role.WithLogger(slog.New(slog.DiscardHandler)), role.OnDemoted(func() { demoted.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Start(el, el.Run)
	defer testenv.Stop(context.Background(), el)
	for !el.IsMaster() {
		select {
		case <-ctx.Done():
			t.Fatal("the elector was never elected")
		case <-time.After(10 * time.Millisecond):
		}
	}

	// It also waits for the four locks, on the same client: a wait may
	// last a whole RetryInterval.
	waiter := lockerOn(t, 2, shared, synclock.Config{RetryInterval: 5 * time.Second, HoldDuration: time.Minute, ClaimWindow: time.Minute})
	wctx, stopWaiting := context.WithCancel(ctx)
	var waits sync.WaitGroup
	defer func() { stopWaiting(); waits.Wait() }()
	for _, name := range names {
		waits.Add(1)
		go func() {
			defer waits.Done()
			_ = waiter.Mutex(name).Lock(wctx) // ends with wctx: the holder never lets go
		}()
	}
	// Waiters are in line for as many keys as the pool has connections:
	// waits that held connections would now hold them all. (On such a
	// pool the other waiters could not even get in line.)
	for inLine := 0; inLine < opts.PoolSize; {
		inLine = 0
		for _, name := range names {
			line, _ := shared.LineKeys(backend.AppKey("acme", "billing", "lock", name))
			if rdb.ZCard(ctx, line).Val() == 1 {
				inLine++
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiters in line for %d keys, want at least %d", inLine, opts.PoolSize)
		case <-time.After(10 * time.Millisecond):
		}
	}

	// Six renewals are made while they wait (three seconds: a full TTL),
	// and the elector never steps down: every one went through in time.
	from := counter.renews.Load()
	for counter.renews.Load() < from+6 && demoted.Load() == 0 {
		select {
		case <-ctx.Done():
			t.Fatalf("%d renewals in %v while the locks were waited for, want 6", counter.renews.Load()-from, patience)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if n := demoted.Load(); n != 0 || !el.IsMaster() {
		t.Fatalf("the elector stepped down (%d times) while its process waited for %d locks on a pool of %d: renewals starved", n, keys, opts.PoolSize)
	}
}
