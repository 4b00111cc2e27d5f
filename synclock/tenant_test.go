package synclock_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/synclock"
)

// tenantRedisStore returns a store on the package's server that logs in
// as tenant acme's ACL user of redisbackend.TenantACLRules, calling
// baton's Redis functions, which it loads first.
func tenantRedisStore(t testing.TB) *redisbackend.Store {
	t.Helper()
	rules, err := redisbackend.TenantACLRules("", "acme")
	if err != nil {
		t.Fatal(err)
	}
	args := []any{"ACL", "SETUSER", "acme", "reset", "on", ">pw"}
	for _, f := range strings.Fields(rules) {
		args = append(args, f)
	}
	if err := server.Client(t).Do(ctxT(t), args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER acme: %v", err)
	}
	if err := redisbackend.LoadFunctions(ctxT(t), server.Client(t)); err != nil {
		t.Fatal(err)
	}
	o := server.Options()
	o.Username, o.Password = "acme", "pw"
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	s, err := redisbackend.New(c, redisbackend.WithoutRestartGuard(), redisbackend.WithFunctions()) // a server started for the tests
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Three instances of tenant acme, each as the tenant's ACL user, take one
// lock in turn: the two that wait in the store's line get it by handover
// and wake-up, not by polling (their retry interval is a minute).
func TestTenantUserHandover(t *testing.T) {
	ctx := ctxT(t)
	key := uniqueKey(t)
	var handed atomic.Int64
	count := synclock.WithObserver(func(e synclock.Event) {
		if e.Kind == synclock.EventAcquired && e.Handed {
			handed.Add(1)
		}
	})
	cfg := synclock.Config{RetryInterval: time.Minute}
	var lks []*synclock.Locker
	for i := range 3 {
		lks = append(lks, lockerOn(t, i, tenantRedisStore(t), cfg, count))
	}
	release, held := make(chan struct{}), make(chan struct{})
	first := make(chan error, 1)
	go func() {
		first <- lks[0].DoKey(ctx, key, func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	select {
	case <-held:
	case err := <-first:
		t.Fatalf("the first DoKey as tenant acme's user: %v", err)
	}
	done := make(chan error, 2)
	for _, lk := range lks[1:] {
		go func() { done <- lk.DoKey(ctx, key, func(context.Context) error { return nil }) }()
	}
	line, _ := newRedisStore(t).LineKeys(backend.AppKey("acme", "billing", "lock", key))
	admin := server.Client(t)
	for n := int64(0); n < 2; {
		var err error
		if n, err = admin.ZCard(ctx, line).Result(); err != nil {
			t.Fatalf("waiting for two waiters in %s: %d, %v", line, n, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for two waiters in %s: %d after the test's patience", line, n)
		case <-time.After(time.Millisecond):
		}
	}
	close(release)
	for range 3 {
		var err error
		select {
		case err = <-first:
		case err = <-done:
		}
		if err != nil {
			t.Fatalf("DoKey as tenant acme's user: %v", err)
		}
	}
	if handed.Load() == 0 {
		t.Error("no holding was handed over to a waiter in line")
	}
}
