package redisbackend_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

// refusedThenGranted asks s for key until it is granted, and fails t
// unless the first answer was the restart guard's refusal, whose message
// says how to declare a new store and names the test option.
func refusedThenGranted(t *testing.T, s *redisbackend.Store, key string, ttl time.Duration) {
	t.Helper()
	ctx := ctxT(t)
	_, err := s.Acquire(ctx, key, "a", ttl, 0)
	var he *backend.HeldError
	if !errors.As(err, &he) || !he.Recovering {
		t.Fatalf("Acquire(%q): %v; want the restart guard's refusal", key, err)
	}
	for _, want := range []string{"batonctl init", "WithoutRestartGuard"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %s", err, want)
		}
	}
	for {
		_, err := s.Acquire(ctx, key, "a", ttl, 0)
		if err == nil {
			break
		}
		if !errors.As(err, &he) || !he.Recovering {
			t.Fatalf("Acquire(%q) while recovering: %v", key, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Acquire(%q) still refused when the test's patience ran out: %v", key, err)
		case <-time.After(min(he.Holder.TTL, 50*time.Millisecond)):
		}
	}
	if err := s.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}
}

// grantedAtOnce fails t unless key is granted at the first ask.
func grantedAtOnce(t *testing.T, s *redisbackend.Store, key string, ttl time.Duration, why string) {
	t.Helper()
	ctx := ctxT(t)
	if _, err := s.Acquire(ctx, key, "a", ttl, 0); err != nil {
		t.Fatalf("%s: Acquire(%q) = %v; want it granted at once", why, key, err)
	}
	if err := s.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}
}

// A new service on a Redis its tenant already uses is new, not lost: the
// tenant's marker, which a FLUSHALL or a restart without data would have
// taken, says the tenant's data is whole, and the service's first grant
// is at once. A fresh server, a FLUSHALL and a restart still make a new
// service wait; another tenant waits once on a server new to it.
func TestGuardNewServiceOnUsedServer(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	ctx := ctxT(t)
	const ttl = time.Second
	s := newStore(t, rdb, redisbackend.WithRestartGuard(0))
	refusedThenGranted(t, s, backend.AppKey("acme", "billing", "role"), ttl)
	grantedAtOnce(t, s, backend.AppKey("acme", "shipping", "role"), ttl, "a second service of the tenant")
	if v, err := rdb.Get(ctx, s.TenantIntactKey(backend.AppKey("acme", "x"))).Result(); err != nil || !strings.Contains(v, " ") {
		t.Fatalf("the tenant's marker %s holds %q, %v; want a time and the server's run ID", s.TenantIntactKey(backend.AppKey("acme", "x")), v, err)
	}
	grantedAtOnce(t, s, backend.AppKey("acme", "shipping", "lock", "nightly"), ttl, "a second key of that service")
	refusedThenGranted(t, s, backend.AppKey("globex", "billing", "role"), ttl)

	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	refusedThenGranted(t, s, backend.AppKey("acme", "invoices", "role"), ttl)

	if err := r.Restart(); err != nil { // without its data
		t.Fatal(err)
	}
	refusedThenGranted(t, s, backend.AppKey("acme", "reports", "role"), ttl)
	grantedAtOnce(t, s, backend.AppKey("acme", "audit", "role"), ttl, "a service new to the server after the tenant waited")
}

// batonctl init's call, DeclareIntact, declares a server whole: on a
// server started a moment ago, a service's grants are at once, also for
// a lease longer than the server has been up; the declaration holds for
// the tenant's every service and ends with the server's run.
func TestGuardDeclareIntact(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	ctx := ctxT(t)
	s := newStore(t, rdb, redisbackend.WithRestartGuard(0))
	if err := s.DeclareIntact(ctx); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("DeclareIntact without a key: %v; want ErrInvalidArgument", err)
	}
	if err := s.DeclareIntact(ctx, backend.AppKey("acme", "billing")); err != nil {
		t.Fatal(err)
	}
	grantedAtOnce(t, s, backend.AppKey("acme", "billing", "role"), time.Hour, "a declared server")
	grantedAtOnce(t, s, backend.AppKey("acme", "shipping", "lock", "x"), time.Hour, "another service of the declared tenant")
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	refusedThenGranted(t, s, backend.AppKey("acme", "billing", "role"), time.Second)
}

// On a Cluster a script reads only its own slot, so each service's tag
// marker stands alone: every new service waits once, and DeclareIntact
// names the services it declares.
func TestGuardClusterPerTag(t *testing.T) {
	c := testenv.NewCluster(t)
	rdb := c.ClusterClient(t)
	ctx := ctxT(t)
	const ttl = time.Second
	s := newStore(t, rdb, redisbackend.WithRestartGuard(0))
	refusedThenGranted(t, s, backend.AppKey("acme", "billing", "role"), ttl)
	refusedThenGranted(t, s, backend.AppKey("acme", "shipping", "role"), ttl)
	if err := s.DeclareIntact(ctx, "untagged"); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("DeclareIntact of a key without a tag on a Cluster: %v; want ErrInvalidArgument", err)
	}
	if err := s.DeclareIntact(ctx, backend.AppKey("acme", "audit")); err != nil {
		t.Fatal(err)
	}
	grantedAtOnce(t, s, backend.AppKey("acme", "audit", "role"), time.Hour, "a declared service")
}

// A server restarted with its data (AOF) keeps the markers, but they were
// written in its earlier run: a snapshot may be older than the last
// writes, so a new service also waits until the server has been up for
// the guard, as the uptime says; the operator's declaration, too, ends
// with the run that it was made in.
func TestGuardMarkersOfAnEarlierRun(t *testing.T) {
	r := testenv.NewRedis(t, testenv.RedisOptions{AppendOnly: true})
	rdb := r.Client(t)
	ctx := ctxT(t)
	s := newStore(t, rdb, redisbackend.WithRestartGuard(0))
	if err := s.DeclareIntact(ctx, backend.AppKey("acme", "billing")); err != nil {
		t.Fatal(err)
	}
	grantedAtOnce(t, s, backend.AppKey("acme", "billing", "role"), time.Hour, "a declared server")
	if err := r.Restart(); err != nil { // with its data
		t.Fatal(err)
	}
	if n, err := rdb.Exists(ctx, s.TenantIntactKey(backend.AppKey("acme", "x"))).Result(); err != nil || n != 1 {
		t.Fatalf("the tenant's marker after a restart with AOF: exists %d, %v; want it kept", n, err)
	}
	refusedThenGranted(t, s, backend.AppKey("acme", "shipping", "role"), time.Second)
}

// A foreign value in the tenant's marker is ErrCorrupt naming it, and
// grants nothing; one ahead of the server's clock is reset to the
// server's time, and the tenant's new services then wait out the guard
// once, as after a flush.
func TestGuardTenantMarkerForged(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	ctx := ctxT(t)
	s := newStore(t, rdb, redisbackend.WithRestartGuard(0))
	key := backend.AppKey("acme", "billing", "role")
	marker := s.TenantIntactKey(key)
	for _, v := range []string{"garbage", "12 not-hex!", "-5"} {
		if err := rdb.Set(ctx, marker, v, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Acquire(ctx, key, "a", time.Second, 0); !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), marker) {
			t.Errorf("Acquire with %q in the tenant's marker: %v; want ErrCorrupt naming %s", v, err, marker)
		}
	}
	ahead := time.Now().Add(time.Hour).UnixMilli()
	if err := rdb.Set(ctx, marker, strconv.FormatInt(ahead, 10)+" abc", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, key, "a", time.Second, 0); !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), "ahead of the server's clock") {
		t.Fatalf("Acquire with the tenant's marker an hour ahead: %v; want ErrCorrupt saying so", err)
	}
	refusedThenGranted(t, s, key, time.Second)
}

// A release hands the key over also when its counter is gone while the
// lease lives (dropped under a lease renewed past the counter's life, or
// deleted by hand) and the restart guard's markers say nothing: the lease
// is there, so the data was not lost, and the handover's token comes
// from the lease's, above it; the counter then holds it again.
func TestHandoverWithoutCounter(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	ctx := ctxT(t)
	s := newStore(t, rdb, redisbackend.WithRestartGuard(0))
	key := backend.AppKey("acme", "billing", "lock", "x")
	if err := s.DeclareIntact(ctx, key); err != nil {
		t.Fatal(err)
	}
	la, err := s.AcquireQueued(ctx, key, "a", time.Hour, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireQueued(ctx, key, "b", time.Hour, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("b joining the line: %v, want ErrHeld", err)
	}
	if err := rdb.Del(ctx, s.FenceKey(key), s.IntactKey(key), s.TenantIntactKey(key)).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}
	lb, ok, err := s.AwaitHandover(ctx, key, "b", time.Second)
	if err != nil || !ok {
		t.Fatalf("b's AwaitHandover after a's release: ok %v, err %v; want the key handed to it", ok, err)
	}
	if lb.Token <= la.Token {
		t.Errorf("b's token %d is not above a's %d", lb.Token, la.Token)
	}
	if c, err := rdb.Get(ctx, s.FenceKey(key)).Uint64(); err != nil || c != lb.Token {
		t.Errorf("the counter after the handover: %d, %v; want b's token %d", c, err, lb.Token)
	}
}
