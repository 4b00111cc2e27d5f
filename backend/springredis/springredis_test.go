package springredis_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/backendtest"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/backend/springredis"
	"github.com/baton-go/baton/testkit/testenv"
)

// server is this package's private redis-server.
var server *testenv.Redis

func TestMain(m *testing.M) { testenv.MainWithRedis(m, &server) }

const patience = 10 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// newStore returns a store on rdb, closed with the test. rdb's scripts
// fail on a key they did not declare (checkDeclared), so every test of the
// package checks that the store's scripts declare all they touch.
func newStore(t testing.TB, rdb redis.UniversalClient, layout springredis.Layout) *springredis.Store {
	t.Helper()
	checkDeclared(t, rdb)
	s, err := springredis.New(rdb, layout, redisbackend.WithoutRestartGuard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The store keeps every promise of a baton store among baton's own
// instances (the suite's keys are synchronized-lock keys here), but the
// restart guard, which the Java side does not have either.
func TestConformance(t *testing.T) {
	r := testenv.NewRedis(t)
	backendtest.Run(t, backendtest.Harness{
		NewStore: func(t testing.TB) backend.Store { return newStore(t, r.Client(t), springredis.Layout{}) },
		Wipe: func(t testing.TB) {
			if err := r.FlushAll(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// The keys are the Java side's: the role key is the app's name, a
// synchronized lock's key its name (the method signature), a job lock's
// ShedLock's "job-lock:<environment>:<name>"; each can be laid out
// otherwise.
func TestSharedKeys(t *testing.T) {
	s := newStore(t, server.Client(t), springredis.Layout{})
	for key, want := range map[string]string{
		backend.AppKey("acme", "billing", "role"):                                  "billing",
		backend.AppKey("acme", "billing", "lock", "com.acme.Invoices.close(long)"): "com.acme.Invoices.close(long)",
		backend.AppKey("acme", "billing", "job", "nightly-export"):                 "job-lock:default:nightly-export",
		"plain-key": "plain-key",
	} {
		if got := s.Shared(key); got != want {
			t.Errorf("Shared(%q) = %q, want %q", key, got, want)
		}
	}
	o := newStore(t, server.Client(t), springredis.Layout{
		RoleKey:      func(tenant, app string) string { return tenant + ":" + app + ":master" },
		Environment:  "prod",
		JobKeyPrefix: "shedlock",
	})
	if got := o.Shared(backend.AppKey("acme", "billing", "role")); got != "acme:billing:master" {
		t.Errorf("a RoleKey layout: %q", got)
	}
	if got := o.Shared(backend.AppKey("acme", "billing", "job", "n")); got != "shedlock:prod:n" {
		t.Errorf("an environment and job key prefix: %q", got)
	}
	if _, err := springredis.New(server.Client(t), springredis.Layout{Environment: "a b"}); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("an environment with a space: %v; want ErrInvalidArgument", err)
	}
}

const (
	javaID = "10.0.0.9:acme:billing:8080"
	goID   = "10.0.0.7:acme:billing:8080"
)

// A key the Java side holds is held: baton's instances are refused and
// see the Java instance as the holder, by its value; when the Java side
// deletes it (its release) or it expires (its crash), a baton instance
// is granted it.
func TestJavaHolderIsSeen(t *testing.T) {
	ctx := ctxT(t)
	rdb := server.Client(t)
	s := newStore(t, rdb, springredis.Layout{})
	key := backend.AppKey("acme", "billing", "lock", "com.acme.Invoices.close()")
	java := s.Shared(key)
	// The Java side's acquire: SET NX with the hold time.
	if ok, err := rdb.SetNX(ctx, java, javaID, 45*time.Second).Result(); err != nil || !ok {
		t.Fatalf("the Java side's SET NX: %v, %v", ok, err)
	}
	_, err := s.Acquire(ctx, key, goID+"#n1", time.Minute, 0)
	var he *backend.HeldError
	if !errors.As(err, &he) || he.Holder.Owner != javaID || he.Holder.Token != 0 || he.Holder.TTL <= 40*time.Second {
		t.Fatalf("Acquire of a key the Java side holds: %v; want held by %s, no token, about 45s left", err, javaID)
	}
	if l, err := s.Get(ctx, key); err != nil || l.Owner != javaID {
		t.Fatalf("Get: %+v, %v; want the Java holder", l, err)
	}
	if err := s.Release(ctx, key, javaID, 0); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("a baton Release in the Java holder's name: %v; want ErrNotHeld (baton releases only its own)", err)
	}
	// The Java side's release: DEL.
	if err := rdb.Del(ctx, java).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := s.Acquire(ctx, key, goID+"#n1", time.Minute, 0)
	if err != nil || l.Token == 0 {
		t.Fatalf("Acquire after the Java side released: %+v, %v", l, err)
	}
	if v, err := rdb.Get(ctx, java).Result(); err != nil || v != goID {
		t.Fatalf("the shared key holds %q, %v; want the Go instance's ID, as the Java side writes its own", v, err)
	}
	if err := s.Release(ctx, key, goID+"#n1", 0); err != nil {
		t.Fatal(err)
	}
	// The Java side crashes while holding: the key expires.
	if err := rdb.Set(ctx, java, javaID, 200*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(patience)
	for {
		l, err := s.Acquire(ctx, key, goID+"#n2", time.Minute, 0)
		if err == nil {
			if l.Owner != goID+"#n2" {
				t.Fatalf("the grant after the Java holder's key expired: %+v", l)
			}
			break
		}
		if !errors.Is(err, backend.ErrHeld) || time.Now().After(deadline) {
			t.Fatalf("Acquire while the crashed Java holder's key expires: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A key a baton instance holds is held for the Java side too: its SET NX
// fails and its GET reads the Go instance's ID; when the Go instance
// crashes, the key expires and the Java side's SET NX succeeds. A baton
// release deletes the key only if that instance still holds it.
func TestGoHolderIsSeenByJava(t *testing.T) {
	ctx := ctxT(t)
	rdb := server.Client(t)
	s := newStore(t, rdb, springredis.Layout{})
	key := backend.AppKey("acme", "billing", "role")
	java := s.Shared(key)
	l, err := s.Acquire(ctx, key, goID+"#n1", 300*time.Millisecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := rdb.SetNX(ctx, java, javaID, 45*time.Second).Result(); err != nil || ok {
		t.Fatalf("the Java side's SET NX of a key a Go instance holds: %v, %v; want refused", ok, err)
	}
	if v, err := rdb.Get(ctx, java).Result(); err != nil || v != goID {
		t.Fatalf("the Java side reads %q, %v; want %s", v, err, goID)
	}
	if pttl, err := rdb.PTTL(ctx, java).Result(); err != nil || pttl <= 0 || pttl > 300*time.Millisecond {
		t.Fatalf("the shared key's TTL: %v, %v; want the lease's", pttl, err)
	}
	// The Go instance crashes: nobody renews, the key expires, and the
	// Java side's next try succeeds.
	deadline := time.Now().Add(patience)
	for {
		ok, err := rdb.SetNX(ctx, java, javaID, 45*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the crashed Go holder's key never expired for the Java side")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The Go instance comes back late: it cannot renew or release the
	// key the Java side holds now.
	if _, err := s.Renew(ctx, key, goID+"#n1", time.Second); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("a late Renew: %v; want ErrNotHeld", err)
	}
	if err := s.Release(ctx, key, goID+"#n1", 0); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("a late Release: %v; want ErrNotHeld", err)
	}
	if v, _ := rdb.Get(ctx, java).Result(); v != javaID {
		t.Fatalf("after the late calls the key holds %q; want the Java holder %s", v, javaID)
	}
	_ = l
}

// A job lock is ShedLock's: its value is "ADDED:<UTC time>@<host>", a
// release within lockAtLeastFor keeps it until then (as ShedLock's
// unlock does), and a job lock ShedLock holds is skipped.
func TestJobLockIsShedLocks(t *testing.T) {
	ctx := ctxT(t)
	rdb := server.Client(t)
	s := newStore(t, rdb, springredis.Layout{Hostname: "go-host"})
	key := backend.AppKey("acme", "billing", "job", "report")
	java := s.Shared(key)
	if _, err := s.Acquire(ctx, key, goID+"#j1", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	v, err := rdb.Get(ctx, java).Result()
	if err != nil || !strings.HasPrefix(v, "ADDED:") || !strings.HasSuffix(v, "@go-host") {
		t.Fatalf("the job lock's value %q, %v; want ShedLock's ADDED:<time>@<host>", v, err)
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000Z", strings.TrimSuffix(strings.TrimPrefix(v, "ADDED:"), "@go-host")); err != nil {
		t.Fatalf("the time in %q: %v", v, err)
	}
	if err := s.Release(ctx, key, goID+"#j1", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if pttl, err := rdb.PTTL(ctx, java).Result(); err != nil || pttl <= 25*time.Second || pttl > 30*time.Second {
		t.Fatalf("a job lock released with 30s of lockAtLeastFor left has %v, %v to live", pttl, err)
	}
	if ok, _ := rdb.SetNX(ctx, java, "ADDED:x@java-host", time.Minute).Result(); ok {
		t.Fatal("ShedLock's SET NX succeeded within the kept lockAtLeastFor")
	}
	if _, err := s.Renew(ctx, key, goID+"#j1", time.Minute); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("Renew of a kept job lock: %v; want ErrNotHeld", err)
	}
	if err := rdb.Set(ctx, java, "ADDED:2026-11-25T03:00:00.000Z@java-host", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = s.Acquire(ctx, key, goID+"#j2", time.Minute, 0)
	var he *backend.HeldError
	if !errors.As(err, &he) || he.Holder.Owner != "ADDED:2026-11-25T03:00:00.000Z@java-host" {
		t.Fatalf("Acquire of the job lock ShedLock holds: %v; want held by ShedLock's value", err)
	}
}

// Watches of baton's instances see releases by baton's instances at once.
func TestWatchSeesGoReleases(t *testing.T) {
	ctx := ctxT(t)
	s := newStore(t, server.Client(t), springredis.Layout{})
	key := backend.AppKey("acme", "billing", "lock", "watched")
	w, err := s.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := s.Acquire(ctx, key, goID+"#w", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, key, goID+"#w", 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(patience)
	for {
		select {
		case ev := <-w.C():
			if ev.Kind == backend.EventReleased {
				return
			}
		case <-deadline:
			t.Fatal("no EventReleased after a baton instance released the key")
		}
	}
}

// A Cluster client is refused with a clear error.
func TestClusterRefused(t *testing.T) {
	_, err := springredis.New(redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}), springredis.Layout{})
	if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(err.Error(), "Cluster") {
		t.Fatalf("New on a Cluster client: %v; want ErrInvalidArgument naming the Cluster", err)
	}
}

// A record or fencing counter written with a token no grant can have
// made (far beyond the server's clock) is reported by every call that
// reads it as ErrCorrupt naming the Redis key, never as a token a caller
// would keep as its floor; the counter is not raised; once the bad key is
// deleted, the key is granted again with a token from the clock.
func TestForgedTokens(t *testing.T) {
	ctx := ctxT(t)
	rdb := server.Client(t)
	s := newStore(t, rdb, springredis.Layout{})
	forged := map[string]uint64{
		"MaxToken":       backend.MaxToken,
		"2^52":           1 << 52,
		"two years away": uint64(time.Now().Add(2 * backend.MaxTokenLead).UnixMicro()),
	}
	i := 0
	for name, tok := range forged {
		for _, where := range []string{"record", "counter"} {
			i++
			key := backend.AppKey("acme", "billing", "lock", fmt.Sprintf("forged-%d", i))
			java := s.Shared(key)
			record, counter := redisbackend.DefaultPrefix+":{spring:"+java+"}:owner", redisbackend.DefaultPrefix+":{spring:"+java+"}:fence"
			t.Run(where+"/"+name, func(t *testing.T) {
				target := counter
				if where == "record" {
					target = record
					rdb.Set(ctx, java, "forger", time.Minute)
					rdb.Set(ctx, record, fmt.Sprintf("%d forger#n forger", tok), time.Minute)
				} else {
					rdb.Set(ctx, counter, fmt.Sprint(tok), time.Minute)
				}
				before, _ := rdb.Get(ctx, target).Result()
				check := func(op string, l backend.Lease, err error) {
					t.Helper()
					if !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), target) {
						t.Errorf("%s with token %d in the %s: %+v, %v; want ErrCorrupt naming %s", op, tok, where, l, err, target)
					}
				}
				l, err := s.Acquire(ctx, key, goID+"#me", time.Minute, 0)
				check("Acquire", l, err)
				if where == "record" {
					l, err = s.Get(ctx, key)
					check("Get", l, err)
					l, err = s.Renew(ctx, key, "forger#n", time.Minute)
					check("Renew by the forged owner", l, err)
					check("Release by another", backend.Lease{}, s.Release(ctx, key, goID+"#me", 0))
					l, err = s.Break(ctx, key, "forger#n", tok)
					check("Break", l, err)
				}
				if v, _ := rdb.Get(ctx, target).Result(); v != before {
					t.Errorf("the %s holds %q after the calls; want %q left alone", where, v, before)
				}
				if err := rdb.Del(ctx, target, java).Err(); err != nil {
					t.Fatal(err)
				}
				sent := time.Now()
				l, err = s.Acquire(ctx, key, goID+"#me", time.Minute, 0)
				if err != nil || l.Token > uint64(sent.Add(time.Hour).UnixMicro()) {
					t.Fatalf("Acquire once the forged %s was deleted: %+v, %v; want a grant with a token from the clock", where, l, err)
				}
				if err := s.Release(ctx, key, goID+"#me", 0); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// The fencing counter lives by the rule both Redis stores share: an
// hour (or the lease's ttl, if longer) after a grant, and for good when
// a floor put it further ahead of the clock than that, since the clock
// could no longer keep tokens above it once it expired.
func TestFenceCounterLife(t *testing.T) {
	ctx := ctxT(t)
	rdb := server.Client(t)
	s := newStore(t, rdb, springredis.Layout{})
	counter := func(key string) string {
		return redisbackend.DefaultPrefix + ":{spring:" + s.Shared(key) + "}:fence"
	}
	cycle := func(key string, floor uint64) uint64 {
		t.Helper()
		l, err := s.Acquire(ctx, key, goID+"#me", time.Second, floor)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, key, goID+"#me", 0); err != nil {
			t.Fatal(err)
		}
		return l.Token
	}
	near := backend.AppKey("acme", "billing", "lock", "fence-near")
	cycle(near, 0)
	if pttl := rdb.PTTL(ctx, counter(near)).Val(); pttl <= 0 || pttl > time.Hour {
		t.Errorf("the fencing counter %s has PTTL %v after a grant; want an expiry within an hour", counter(near), pttl)
	}
	ahead := uint64(time.Now().Add(backend.MaxTokenLead / 2).UnixMicro())
	far := backend.AppKey("acme", "billing", "lock", "fence-far")
	cycle(far, ahead)
	if pttl := rdb.PTTL(ctx, counter(far)).Val(); pttl != -1 {
		t.Errorf("a counter a floor put far ahead of the clock has PTTL %v; want none", pttl)
	}
	if tok := cycle(far, 0); tok != ahead+2 {
		t.Errorf("after a floor of %d, a grant without one got token %d; want %d", ahead, tok, ahead+2)
	}
}
