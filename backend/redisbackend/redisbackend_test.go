package redisbackend_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/backendtest"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

// server is this package's private redis-server, shared by the tests that
// do not stop or pause it; those start their own.
var server *testenv.Redis

func TestMain(m *testing.M) { testenv.MainWithRedis(m, &server) }

const patience = 10 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// newStore returns a store on rdb, closed with the test. Its restart guard
// is off, since the tests' servers are started for them and would
// otherwise refuse every key for its ttl; pass WithRestartGuard to turn it
// on. Its scripts fail on a key they did not declare (declaredShim), so
// every test of the package checks that they declare all they touch.
func newStore(t testing.TB, rdb redis.UniversalClient, opts ...redisbackend.Option) *redisbackend.Store {
	t.Helper()
	s, err := redisbackend.New(rdb, append([]redisbackend.Option{redisbackend.WithoutRestartGuard()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	redisbackend.UseScriptShim(s, declaredShim(t))
	t.Cleanup(func() { s.Close() })
	return s
}

// declaredShim returns testdata/declared.lua, which makes a script that
// touches a key missing from its KEYS fail.
func declaredShim(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("testdata/declared.lua")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The shim that newStore puts in front of the scripts does catch a key a
// script touches without declaring it, with redis.call and redis.pcall,
// and lets declared keys and key-less commands through.
func TestDeclaredKeyShim(t *testing.T) {
	rdb := server.Client(t)
	ctx := ctxT(t)
	shim := declaredShim(t)
	for _, body := range []string{
		"return redis.call('GET', KEYS[1] .. ':fence')",
		"return redis.pcall('SET', 'elsewhere', '1')",
		"return redis.call('DEL', KEYS[1], KEYS[1] .. ':line')",
	} {
		err := rdb.Eval(ctx, shim+body, []string{"{shim}:k"}).Err()
		if err == nil || !strings.Contains(err.Error(), "undeclared key") {
			t.Errorf("%s: %v; want the shim to refuse an undeclared key", body, err)
		}
	}
	ok := "redis.call('TIME'); redis.call('PUBLISH', 'any', 'x'); redis.call('DEL', KEYS[1], KEYS[2]); return redis.call('SET', KEYS[2], '1')"
	if err := rdb.Eval(ctx, shim+ok, []string{"{shim}:k", "{shim}:k:fence"}).Err(); err != nil {
		t.Errorf("declared keys and key-less commands: %v", err)
	}
}

// The shim that newStore puts in front of the scripts is in front of
// every script the store runs: the lease scripts and the Registry's group
// scripts alike.
func TestScriptShimCoversEveryScript(t *testing.T) {
	ctx := ctxT(t)
	s := newStore(t, server.Client(t))
	redisbackend.UseScriptShim(s, "error('shim ran')\n")
	key, group := backend.AppKey("acme", "billing", "lock", "shim"), backend.AppKey("acme", "billing", "members")
	_, acquire := s.Acquire(ctx, key, "me", time.Minute, 0)
	_, heartbeat := s.Heartbeat(ctx, group, backend.Member{Name: "me", Identity: "me"}, time.Minute)
	_, members := s.Members(ctx, group)
	_, upTo := s.MembersUpTo(ctx, group, 10)
	leave := s.Leave(ctx, group, "me")
	for name, err := range map[string]error{"Acquire": acquire, "Heartbeat": heartbeat, "Members": members, "MembersUpTo": upTo, "Leave": leave} {
		if err == nil || !strings.Contains(err.Error(), "shim ran") {
			t.Errorf("%s: %v; want its script to run behind the shim", name, err)
		}
	}
}

// The standalone suite has a server of its own, which it restarts.
func TestConformanceStandalone(t *testing.T) {
	r := testenv.NewRedis(t)
	h := restartable(func(t testing.TB) redis.UniversalClient { return r.Client(t) }, func(t testing.TB) {
		if err := r.Restart(); err != nil {
			t.Fatal(err)
		}
	})
	h.Wipe = func(t testing.TB) {
		if err := r.FlushAll(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	backendtest.Run(t, h)
}

// restartable returns a Harness whose stores use client, and whose
// Restart calls restart, which restarts the server(s) empty. Stores opened
// after a restart guard their grants, as stores do by default (newStore
// turns the guard off for a server the test just started).
func restartable(client func(testing.TB) redis.UniversalClient, restart func(testing.TB)) backendtest.Harness {
	var restarted atomic.Bool
	return backendtest.Harness{
		NewStore: func(t testing.TB) backend.Store {
			if restarted.Load() {
				return newStore(t, client(t), redisbackend.WithRestartGuard(0))
			}
			return newStore(t, client(t))
		},
		Restart: func(t testing.TB) {
			restart(t)
			restarted.Store(true)
		},
	}
}

func TestConformanceCluster(t *testing.T) {
	c := testenv.NewCluster(t)
	if _, err := redisbackend.New(c.ClusterClient(t), redisbackend.WithReplicaAck(1, time.Second)); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("WithReplicaAck on a cluster client: %v, want ErrInvalidArgument", err)
	}
	// Every node restarts empty; each keeps its place in the cluster (its
	// nodes.conf), which serves again once all slots are covered.
	h := restartable(func(t testing.TB) redis.UniversalClient { return c.ClusterClient(t) }, func(t testing.TB) {
		for _, n := range c.Nodes() {
			if err := n.Restart(); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.WaitReady(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	})
	h.Wipe = func(t testing.TB) {
		for _, n := range c.Nodes() {
			if err := n.FlushAll(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.GuardPerService = true // a script reads one slot: no tenant marker
	backendtest.Run(t, h)
}

func TestKeyLayoutSharesOneSlot(t *testing.T) {
	s := newStore(t, server.Client(t))
	tests := []struct{ key, lease, fence string }{
		{"{acme:billing}:role", "baton:{acme:billing}:role", "baton:{acme:billing}:role:fence"},
		{"{acme:billing}:lock:nightly", "baton:{acme:billing}:lock:nightly", "baton:{acme:billing}:lock:nightly:fence"},
		{"invoice:42", "baton:{invoice:42}", "baton:{invoice:42}:fence"},
	}
	for _, tt := range tests {
		if got := s.LeaseKey(tt.key); got != tt.lease {
			t.Errorf("LeaseKey(%q) = %q, want %q", tt.key, got, tt.lease)
		}
		if got := s.FenceKey(tt.key); got != tt.fence {
			t.Errorf("FenceKey(%q) = %q, want %q", tt.key, got, tt.fence)
		}
	}
	rdb := server.Client(t)
	for _, tt := range tests {
		a, err1 := rdb.ClusterKeySlot(ctxT(t), tt.lease).Result()
		b, err2 := rdb.ClusterKeySlot(ctxT(t), tt.fence).Result()
		if err1 == nil && err2 == nil && a != b {
			t.Errorf("%q and %q are in slots %d and %d", tt.lease, tt.fence, a, b)
		}
		line, req := s.LineKeys(tt.key)
		for _, k := range []string{line, req, s.MarkerKey(tt.key), s.MailboxKey(tt.key)} {
			c, err := rdb.ClusterKeySlot(ctxT(t), k).Result()
			if err1 == nil && err == nil && a != c {
				t.Errorf("%q and %q are in slots %d and %d", tt.lease, k, a, c)
			}
		}
	}
}

func TestReservedSuffixesAreRejected(t *testing.T) {
	s := newStore(t, server.Client(t))
	for _, key := range []string{"{a:b}:x:fence", "{a:b}:x:line", "{a:b}:x:line-req", "{a:b}:x:watch-mark", "{a:b}:members:member-data", "{a:b}:members:member-ids"} {
		_, err := s.Acquire(ctxT(t), key, "me", time.Second, 0)
		if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("Acquire(%q) err = %v, want a reserved-suffix error", key, err)
		}
	}
}

// Foreign data under baton's keys gives ErrCorrupt, never a panic or a
// silent overwrite.
func TestForeignDataIsReported(t *testing.T) {
	rdb := server.Client(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	tests := []struct {
		name  string
		setup func(key string)
		says  string // part of the error, if not ""
	}{
		{"string lease of another shape", func(k string) { rdb.Set(ctx, s.LeaseKey(k), "10.0.0.1:acme:billing:8080", 0) }, ""},
		{"hash lease", func(k string) { rdb.HSet(ctx, s.LeaseKey(k), "owner", "x", "token", "3") }, "is a hash, not a baton lease"},
		{"list lease", func(k string) { rdb.RPush(ctx, s.LeaseKey(k), "x") }, "is a list, not a baton lease"},
		{"lease without owner", func(k string) { rdb.Set(ctx, s.LeaseKey(k), "3", time.Minute) }, ""},
		{"lease with bad token", func(k string) { rdb.Set(ctx, s.LeaseKey(k), "abc x", time.Minute) }, ""},
		{"lease with a token of zero", func(k string) { rdb.Set(ctx, s.LeaseKey(k), "0 x", time.Minute) }, ""},
		{"lease with an unknown flag", func(k string) { rdb.Set(ctx, s.LeaseKey(k), "3 x kept", time.Minute) }, ""},
		{"lease without expiry", func(k string) { rdb.Set(ctx, s.LeaseKey(k), "3 x", 0) }, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := fmt.Sprintf("{corrupt:%d}:lock", i)
			tt.setup(key)
			if _, err := s.Acquire(ctx, key, "me", time.Second, 0); !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("Acquire: %v, want ErrCorrupt saying %q", err, tt.says)
			}
			if _, err := s.AcquireQueued(ctx, key, "me", time.Second, 0, time.Second); !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("AcquireQueued: %v, want ErrCorrupt saying %q", err, tt.says)
			}
			if _, err := s.Get(ctx, key); !errors.Is(err, backend.ErrCorrupt) {
				t.Errorf("Get: %v, want ErrCorrupt", err)
			}
			if _, err := s.Renew(ctx, key, "me", time.Second); err == nil {
				t.Error("Renew of a foreign key succeeded")
			}
			if err := s.Release(ctx, key, "me", 0); err == nil {
				t.Error("Release of a foreign key succeeded")
			}
			if n, _ := rdb.Exists(ctx, s.LeaseKey(key)).Result(); n != 1 {
				t.Error("the foreign key was deleted")
			}
		})
	}
	t.Run("fence of another type", func(t *testing.T) {
		key := "{corrupt:fence-type}:lock"
		rdb.HSet(ctx, s.FenceKey(key), "n", "7")
		if _, err := s.Acquire(ctx, key, "me", time.Second, 0); !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), "is a hash, not an integer") {
			t.Fatalf("Acquire: %v, want ErrCorrupt naming the counter's type", err)
		}
	})
	t.Run("fence above the largest token", func(t *testing.T) {
		key := "{corrupt:fence-big}:lock"
		rdb.Set(ctx, s.FenceKey(key), "9007199254740992", 0)
		if _, err := s.Acquire(ctx, key, "me", time.Second, 0); !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), "not a token") {
			t.Fatalf("Acquire: %v, want ErrCorrupt: a counter above MaxToken", err)
		}
	})
	t.Run("fence not an integer", func(t *testing.T) {
		key := "{corrupt:fence}:lock"
		rdb.Set(ctx, s.FenceKey(key), "seven", 0)
		_, err := s.Acquire(ctx, key, "me", time.Second, 0)
		if !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), "fencing counter") {
			t.Fatalf("Acquire: %v, want ErrCorrupt naming the fencing counter", err)
		}
		if n, _ := rdb.Exists(ctx, s.LeaseKey(key)).Result(); n != 0 {
			t.Fatal("a lease was granted despite the broken counter")
		}
	})
	t.Run("member list of the wrong type", func(t *testing.T) {
		group := "{corrupt:members}:members"
		rdb.Set(ctx, s.LeaseKey(group), "x", 0)
		if _, err := s.Heartbeat(ctx, group, backend.Member{Name: "a#1", Identity: "a"}, time.Second); !errors.Is(err, backend.ErrCorrupt) {
			t.Errorf("Heartbeat: %v, want ErrCorrupt", err)
		}
		if _, err := s.Members(ctx, group); !errors.Is(err, backend.ErrCorrupt) {
			t.Errorf("Members: %v, want ErrCorrupt", err)
		}
	})
}

func TestPrefixesIsolateStores(t *testing.T) {
	rdb := server.Client(t)
	a := newStore(t, rdb, redisbackend.WithPrefix("team-a"))
	b := newStore(t, rdb, redisbackend.WithPrefix("team-b"))
	key := "{prefix:test}:role"
	if _, err := a.Acquire(ctxT(t), key, "x", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(ctxT(t), key, "y", time.Minute, 0); err != nil {
		t.Fatalf("a lease under another prefix blocked this one: %v", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	if _, err := redisbackend.New(nil); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("New(nil): %v", err)
	}
	rdb := server.Client(t)
	for _, p := range []string{"", "a b", "{x}"} {
		if _, err := redisbackend.New(rdb, redisbackend.WithPrefix(p)); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("WithPrefix(%q): %v", p, err)
		}
	}
	// Glob characters would make the key walk (SCAN MATCH) miss the
	// store's keys and ACLRules grant other prefixes.
	for _, p := range []string{"bat[on", "b?ton", "svc*", `a`} {
		_, err := redisbackend.New(rdb, redisbackend.WithPrefix(p))
		if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(err.Error(), "WithPrefix") || !strings.Contains(err.Error(), backend.KeyPrefixChars) {
			t.Errorf("WithPrefix(%q): %v; want ErrInvalidArgument naming WithPrefix and the characters allowed", p, err)
		}
	}
	if _, err := redisbackend.New(rdb, redisbackend.WithHealthCheck(0)); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("WithHealthCheck(0): %v", err)
	}
	for _, d := range []time.Duration{0, time.Second, backend.MaxTTL + time.Millisecond} {
		if _, err := redisbackend.New(rdb, redisbackend.WithMarkerTTL(d)); !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(err.Error(), "marker ttl") {
			t.Errorf("WithMarkerTTL(%v): %v", d, err)
		}
	}
}

// A Redis restarted empty: the watcher is told to look again (a release
// may have been missed), the subscription comes back, and a later release
// is seen; the fencing floor keeps tokens increasing. The restart also
// lost the watch marker, which the watcher's store sets again once it is
// subscribed again (TestWatchMarkRestoredAfterEmptyRestart); the first
// grant after the restart is flagged contended (its key has no counter),
// so its release is published even before that.
func TestRestartEmpty(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	key := "{restart:test}:role"
	l, err := s.Acquire(ctx, key, "a", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.C():
	case <-ctx.Done():
		t.Fatal("no signal after the connection broke")
	}
	// The store is empty now; the holder's renewal says so.
	var nh *backend.NotHeldError
	if _, err := s.Renew(ctx, key, "a", time.Minute); !errors.As(err, &nh) || nh.Holder.Owner != "" {
		t.Fatalf("renew after restart: %v, want NotHeld with a free key", err)
	}
	l2, err := s.Acquire(ctx, key, "b", time.Minute, l.Token)
	if err != nil || l2.Token <= l.Token {
		t.Fatalf("acquire with floor %d after restart: %+v, %v", l.Token, l2, err)
	}
	// The subscription comes back by itself; a release before that is
	// missed. Wait until the server has it, then expect the release
	// itself, not just any signal: the reconnection's signals say "may be
	// free", a release says "released".
	for {
		n, err := rdb.PubSubNumSub(ctx, s.LeaseKey(key)).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n[s.LeaseKey(key)] > 0 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the watch did not subscribe again after the restart")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := s.Release(ctx, key, "b", 0); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case ev := <-w.C():
			if ev.Kind == backend.EventReleased {
				return
			}
		case <-ctx.Done():
			t.Fatal("the release after the restart was not seen (the restart lost the watch marker: was the lease granted contended?)")
		}
	}
}

// Tokens come from the server's clock: a store opened after the server
// restarted empty, which has seen no token and passes no floor, is still
// granted one above every token granted before.
func TestTokensAfterEmptyRestart(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := ctxT(t)
	key := "{restart:tokens}:role"
	before := newStore(t, r.Client(t))
	var last uint64
	for range 5 {
		l, err := before.Acquire(ctx, key, "old", time.Minute, last)
		if err != nil {
			t.Fatal(err)
		}
		last = l.Token
		if err := before.Release(ctx, key, "old", 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	fresh := newStore(t, r.Client(t))
	l, err := fresh.Acquire(ctx, key, "new", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if l.Token <= last {
		t.Fatalf("after an empty restart, a new store without a floor was granted token %d; want one above %d, the last token before", l.Token, last)
	}
}

// The fencing counter expires, so that per-entity keys do not stay in
// Redis forever, and a key whose counter expired still gets a larger
// token. A counter that a floor put far ahead of the clock does not
// expire: the clock could not keep tokens above it.
func TestFenceCounterExpires(t *testing.T) {
	rdb := server.Client(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	cycle := func(key string, ttl time.Duration, floor uint64) uint64 {
		t.Helper()
		l, err := s.Acquire(ctx, key, "me", ttl, floor)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, key, "me", 0); err != nil {
			t.Fatal(err)
		}
		return l.Token
	}
	key := "invoice:42"
	first := cycle(key, time.Second, 0)
	pttl, err := rdb.PTTL(ctx, s.FenceKey(key)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if pttl <= 0 || pttl > time.Hour {
		t.Fatalf("the fencing counter %s has PTTL %v after a grant; want an expiry within an hour", s.FenceKey(key), pttl)
	}
	if cycle("{fence:long}:lock", 2*time.Hour, 0); rdb.PTTL(ctx, s.FenceKey("{fence:long}:lock")).Val() <= time.Hour {
		t.Errorf("the counter of a key granted for 2h expires within an hour; want it to outlive the lease")
	}
	// As if the key had been idle past the counter's life.
	if err := rdb.Del(ctx, s.FenceKey(key)).Err(); err != nil {
		t.Fatal(err)
	}
	if tok := cycle(key, time.Second, 0); tok <= first {
		t.Fatalf("after its counter expired, %q was granted token %d; want one above %d", key, tok, first)
	}
	ahead := uint64(time.Now().Add(backend.MaxTokenLead / 2).UnixMicro()) // half a year of microseconds ahead of the clock
	far := "{fence:ahead}:lock"
	cycle(far, time.Second, ahead)
	if pttl := rdb.PTTL(ctx, s.FenceKey(far)).Val(); pttl != -1 {
		t.Errorf("a counter a floor put far ahead of the clock has PTTL %v; want none", pttl)
	}
	if tok := cycle(far, time.Second, 0); tok != ahead+2 {
		t.Errorf("after a floor of %d, a grant without one got token %d; want %d", ahead, tok, ahead+2)
	}
}

// After an empty restart a guarded store refuses a key not granted since,
// as recovering, until max(ttl, WithRestartGuard) has passed on the
// server's uptime; a waiter first in line keeps its place meanwhile.
func TestRestartGuard(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := ctxT(t)
	const guard = 2 * time.Second
	key := "{restart:guard}:lock"
	// The server starts again after this moment, so it grants nothing
	// before guard has passed since: every answer that arrives earlier
	// must be a refusal.
	before := time.Now()
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, r.Client(t), redisbackend.WithRestartGuard(guard))
	early := func(recv time.Time) bool { return recv.Before(before.Add(guard)) }
	var he *backend.HeldError
	_, err := s.Acquire(ctx, key, "a", 500*time.Millisecond, 0)
	if early(time.Now()) {
		// Redis's uptime is in whole seconds, hence the second more.
		if !errors.As(err, &he) || !he.Recovering || he.Holder.TTL <= 0 || he.Holder.TTL > guard+time.Second {
			t.Fatalf("Acquire right after a restart: %v; want a recovering HeldError with at most %v left", err, guard+time.Second)
		}
		if !strings.Contains(err.Error(), "restarted") {
			t.Errorf("the refusal %q does not say the store restarted", err)
		}
	}
	_, err = s.AcquireQueued(ctx, key, "a", 500*time.Millisecond, 0, time.Minute)
	if early(time.Now()) && (!errors.As(err, &he) || !he.Recovering || he.Next != "") {
		t.Fatalf("AcquireQueued right after a restart: %v; want a recovering HeldError naming nobody in line", err)
	}
	for {
		_, err := s.Acquire(ctx, key, "a", 500*time.Millisecond, 0)
		recv := time.Now()
		if err == nil {
			if early(recv) {
				t.Fatalf("granted %v after the restart began; the guard is %v", recv.Sub(before), guard)
			}
			break
		}
		if !errors.As(err, &he) || !he.Recovering {
			t.Fatalf("Acquire while recovering: %v", err)
		}
		time.Sleep(min(he.Holder.TTL, 50*time.Millisecond))
	}
	if err := s.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, key, "b", 500*time.Millisecond, 0); err != nil {
		t.Fatalf("a key granted since the restart: %v", err)
	}
	for _, bad := range []time.Duration{-time.Second, backend.MaxTTL + time.Second} {
		if _, err := redisbackend.New(r.Client(t), redisbackend.WithRestartGuard(bad)); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("WithRestartGuard(%v): %v, want ErrInvalidArgument", bad, err)
		}
	}
}

// The uncontended lock cycle is the one every user pays for: it must stay
// two scripts whose fast paths make exactly these calls, counted by the
// server (INFO commandstats), so that a change that adds work to it fails
// here rather than only in the benchmark.
func TestUncontendedCycleCommands(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	const n = 10
	cycle := map[string]func(key string) error{
		"Acquire": func(key string) error {
			_, err := s.Acquire(ctx, key, "me", time.Minute, 0)
			return err
		},
		"AcquireQueued": func(key string) error {
			_, err := s.AcquireQueued(ctx, key, "me", time.Minute, 0, time.Second)
			return err
		},
	}
	for name, acquire := range cycle {
		t.Run(name, func(t *testing.T) {
			key := "uncontended:" + name
			run := func() {
				if err := acquire(key); err != nil {
					t.Fatal(err)
				}
				if err := s.Release(ctx, key, "me", 0); err != nil {
					t.Fatal(err)
				}
			}
			run() // loads the scripts
			got := serverCalls(t, rdb, func() {
				for range n {
					run()
				}
			})
			wantCalls(t, fmt.Sprintf("%d uncontended %s+Release cycles", n, name), got, map[string]int64{
				"evalsha": 2 * n,
				// acquire: EXISTS lease, line, watch marker and
				// counter, GET counter, TIME, SET counter … PX,
				// SET lease … PX
				"exists": n, "time": n, "set": 2 * n,
				// release: GET, DEL; nobody waits or watches, so
				// nothing is published
				"get": 2 * n, "del": n,
			})
		})
	}
}

// A release with a waiter in line hands the key over in one script; the
// calls it makes are pinned like the uncontended cycle's, because this
// script is on the critical path of every contended handoff. So are a
// waiter's calls to join the line, made once per contended acquisition.
func TestHandoverReleaseCommands(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	const key = "handover:calls"
	// A cycle of its own loads the scripts.
	if _, err := s.AcquireQueued(ctx, key, "a", time.Minute, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireQueued(ctx, key, "a", time.Minute, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireQueued(ctx, key, "b", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("b joining the line: %v, want ErrHeld", err)
	}

	// A second waiter joins a line that exists, behind a held lease.
	join := serverCalls(t, rdb, func() {
		if _, err := s.AcquireQueued(ctx, key, "c", time.Minute, 0, 3*time.Minute); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("c joining the line: %v, want ErrHeld", err)
		}
	})
	wantCalls(t, "a waiter joining an existing line", join, map[string]int64{
		"evalsha": 1,
		// one EXISTS finds lease, line and marker; the holder: GET,
		// TIME (its token's check and the arrival), PTTL (TYPE only when
		// GET finds another type); no look for the first live waiter
		// (ZRANGE, HMGET its request): a join of a held key names nobody
		"exists": 1, "time": 1, "get": 1,
		// joining: ZADD arrival (new in line: no request of its own to
		// look at), HSET request, PTTL line and (a longer patience than
		// the twice b's that b's join left it: not the same patience,
		// which a join in the same ms would find left whole) PEXPIRE of
		// both, to twice that patience
		"zadd": 1, "hset": 1, "pttl": 2, "pexpire": 2,
	})

	// A waiter of a store that waits on the key (here: watches it)
	// expects it held and skips the free key's EXISTS; joining a line
	// with more than its patience left leaves both expiries.
	w, err := s.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	join = serverCalls(t, rdb, func() {
		if _, err := s.AcquireQueued(ctx, key, "d", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("d joining the line: %v, want ErrHeld", err)
		}
	})
	wantCalls(t, "a waiter of a store that waits on the key joining its line", join, map[string]int64{
		"evalsha": 1, "time": 1, "get": 1, "pttl": 2, "zadd": 1, "hset": 1,
	})

	// A try (patience 0) joins nothing and names the waiter first in
	// line, which it reads: ZRANGE and HMGET its request.
	try := serverCalls(t, rdb, func() {
		var he *backend.HeldError
		if _, err := s.AcquireQueued(ctx, key, "e", time.Minute, 0, 0); !errors.As(err, &he) || he.Next != "b" {
			t.Fatalf("e's try: %v, want ErrHeld naming b first in line", err)
		}
	})
	wantCalls(t, "a try of the held key", try, map[string]int64{
		"evalsha": 1, "time": 1, "get": 1, "pttl": 1, "zrange": 1, "hmget": 1,
	})

	// Nobody watches the key any more (its marker gone): the handover is
	// published on the wake-up channel of b's store alone.
	w.Close()
	if err := rdb.Del(ctx, s.MarkerKey(key)).Err(); err != nil {
		t.Fatal(err)
	}
	release := serverCalls(t, rdb, func() {
		if err := s.Release(ctx, key, "a", 0); err != nil {
			t.Fatal(err)
		}
	})
	wantCalls(t, "a release that hands the key over", release, map[string]int64{
		"evalsha": 1,
		// GET the lease, flagged contended by b's joining (no DEL: the
		// grant to b overwrites it, and the mailbox)
		// the first live waiter, taken out of the line (ZPOPMIN, put
		// back should the grant be refused) and checked: TIME, HMGET
		// its request and its store's wake-up id; once granted, HDEL
		// both
		"zpopmin": 1, "hmget": 1, "hdel": 1,
		// the grant (SET counter and lease … PX, on the clock the line
		// read; the counter is the lease's token, not read) and the
		// news, on b's store's wake-up channel, and on the key's own
		// channel only if a store watches the key (EXISTS its marker)
		"get": 1, "time": 1, "set": 2, "publish": 1, "exists": 1,
	})
	l, ok, err := s.AwaitHandover(ctx, key, "b", time.Second)
	if err != nil || !ok || l.Owner != "b" {
		t.Fatalf("b's handover: %+v, %v, %v", l, ok, err)
	}
}

// A release publishes only while someone watches the key: a Watch marks
// it, its subscriber keeps the mark alive past the mark's TTL, and once
// the watch is closed the mark lapses and releases go unpublished again.
func TestWatchMarkerLivesWithTheWatch(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	const ttl = 200 * time.Millisecond
	watcher := newStore(t, r.Client(t))
	redisbackend.SetMarkerTTL(watcher, ttl)
	owner := newStore(t, rdb)
	ctx := ctxT(t)
	const key = "marker:lives"
	cycle := func() {
		if _, err := owner.Acquire(ctx, key, "me", time.Minute, 0); err != nil {
			t.Fatal(err)
		}
		if err := owner.Release(ctx, key, "me", 0); err != nil {
			t.Fatal(err)
		}
	}
	cycle() // loads the scripts

	w, err := watcher.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	// Let the mark outlive its own TTL several times over: only the
	// refreshes keep it.
	time.Sleep(5 * ttl)
	cycle()
	select {
	case ev := <-w.C():
		if ev.Kind != backend.EventReleased {
			t.Errorf("watch event %v, want %v", ev.Kind, backend.EventReleased)
		}
	case <-ctx.Done():
		t.Fatalf("no event for a release %v after the watch began (mark TTL %v)", 5*ttl, ttl)
	}

	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	mark := watcher.MarkerKey(key)
	deadline := time.Now().Add(patience)
	for rdb.Exists(ctx, mark).Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the watch mark %s outlived its closed watch by %v", mark, patience)
		}
		time.Sleep(ttl / 4)
	}
	calls := serverCalls(t, rdb, cycle)
	wantCalls(t, "a cycle after the watch closed and its mark lapsed", calls, map[string]int64{
		"evalsha": 2, "exists": 1, "time": 1, "set": 2, "get": 2, "del": 1,
	})
}

// serverCalls returns the calls per command that op made the server do:
// it runs op between CONFIG RESETSTAT and INFO commandstats.
func serverCalls(t *testing.T, rdb *redis.Client, op func()) map[string]int64 {
	t.Helper()
	ctx := ctxT(t)
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	op()
	got, err := commandCalls(ctx, rdb)
	if err != nil {
		t.Fatal(err)
	}
	delete(got, "config|resetstat")
	return got
}

// wantCalls fails t unless what made exactly the server calls want.
func wantCalls(t *testing.T, what string, got, want map[string]int64) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s made the server calls\n%v\nwant\n%v", what, got, want)
	}
}

// commandCalls returns the server's calls per command since the last
// CONFIG RESETSTAT.
func commandCalls(ctx context.Context, rdb *redis.Client) (map[string]int64, error) {
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	calls := map[string]int64{}
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		name, fields, _ := strings.Cut(rest, ":")
		for f := range strings.SplitSeq(fields, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("commandstats line %q: %w", line, err)
				}
				calls[name] = n
			}
		}
	}
	return calls, nil
}

// A paused server (SIGSTOP) makes calls time out with an error that names
// the key; after it resumes the store works again.
func TestPausedServer(t *testing.T) {
	r := testenv.NewRedis(t)
	opts := r.Options()
	opts.ReadTimeout = 200 * time.Millisecond
	opts.WriteTimeout = 200 * time.Millisecond
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	s := newStore(t, rdb)
	key := "{pause:test}:role"
	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Acquire(ctxT(t), key, "a", time.Minute, 0)
	if err == nil || !strings.Contains(err.Error(), key) {
		t.Fatalf("acquire on a paused server: %v, want an error naming the key", err)
	}
	if errors.Is(err, backend.ErrHeld) || errors.Is(err, backend.ErrCorrupt) {
		t.Fatalf("a timeout was reported as %v", err)
	}
	if err := r.Resume(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctxT(t), key, "a", time.Minute, 0); err != nil {
		t.Fatalf("acquire after resume: %v", err)
	}
}

// Leases and watches work through a Sentinel-managed master, and keep
// working after a failover (a release on the new master wakes watchers).
func TestSentinel(t *testing.T) {
	sn := testenv.NewSentinel(t)
	t.Run("ReplicaAck", func(t *testing.T) { testReplicaAck(t, sn) })
	t.Run("Failover", func(t *testing.T) { testSentinelFailover(t, sn) })
}

// With WithReplicaAck a grant counts only once the replicas have it; one
// they do not acknowledge in time is undone.
func testReplicaAck(t *testing.T, sn *testenv.Sentinel) {
	ctx := ctxT(t)
	acked := newStore(t, sn.FailoverClient(t), redisbackend.WithReplicaAck(1, 2*time.Second))
	key := "{replica-ack:test}:role"
	l, err := acked.Acquire(ctx, key, "a", time.Minute, 0)
	if err != nil {
		t.Fatalf("acquire acknowledged by the one replica: %v", err)
	}
	if _, err := acked.Renew(ctx, key, "a", time.Minute); err != nil {
		t.Fatalf("renew acknowledged by the one replica: %v", err)
	}
	if err := acked.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}
	greedy := newStore(t, sn.FailoverClient(t), redisbackend.WithReplicaAck(2, 100*time.Millisecond))
	_, err = greedy.Acquire(ctx, key, "b", time.Minute, l.Token)
	if !errors.Is(err, redisbackend.ErrNotReplicated) || !strings.Contains(err.Error(), "1 of 2 replicas") {
		t.Fatalf("acquire wanting 2 replicas of 1: %v, want ErrNotReplicated", err)
	}
	if _, err := acked.Get(ctx, key); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("an unacknowledged grant was left in place: %v", err)
	}

	// No handover: the release keeps the key for the waiter, which
	// claims it with a grant the replica acknowledges.
	lh, err := acked.AcquireQueued(ctx, key, "h", time.Minute, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acked.AcquireQueued(ctx, key, "w", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("waiter's AcquireQueued of the held key: %v, want ErrHeld", err)
	}
	if _, ok, err := acked.AwaitHandover(ctx, key, "w", time.Second); ok || !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("AwaitHandover on a store WithReplicaAck: ok %v, err %v; want errors.ErrUnsupported", ok, err)
	}
	if err := acked.Release(ctx, key, "h", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := acked.Get(ctx, key); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("the release of a store WithReplicaAck handed the key over: Get = %v, want ErrNotFound", err)
	}
	lw, err := acked.AcquireQueued(ctx, key, "w", time.Minute, 0, time.Minute)
	if err != nil || lw.Token <= lh.Token {
		t.Fatalf("the waiter's claim of the key kept for it: %+v, %v; want a grant above token %d", lw, err, lh.Token)
	}
	if err := acked.Release(ctx, key, "w", 0); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []redisbackend.Option{redisbackend.WithReplicaAck(0, time.Second), redisbackend.WithReplicaAck(1, 0)} {
		if _, err := redisbackend.New(sn.FailoverClient(t), bad); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("bad WithReplicaAck: %v", err)
		}
	}
}

func testSentinelFailover(t *testing.T, sn *testenv.Sentinel) {
	rdb := sn.FailoverClient(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	key := "{sentinel:test}:role"
	l, err := s.Acquire(ctx, key, "a", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sn.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	// The client follows the new master; retry while it switches over.
	var got backend.Lease
	deadline := time.Now().Add(patience)
	for {
		got, err = s.Get(ctx, key)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("get after failover: %v", err)
	}
	if got.Owner != "a" || got.Token != l.Token {
		t.Fatalf("lease after failover = %+v, want owner a token %d (replicated)", got, l.Token)
	}
	w, err := s.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := s.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.C():
	case <-time.After(patience):
		t.Fatal("release on the new master did not wake the watcher")
	}
}

// The first waiter's claim of a key that fell free with a line behind it
// (the holder's lease ran out, or a store that does not hand over) reads
// the server's clock once, for the line and the grant together.
func TestFirstWaiterClaimCommands(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	const key = "claim:calls"
	if _, err := s.Acquire(ctx, key, "a", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireQueued(ctx, key, "b", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("b joining the line: %v, want ErrHeld", err)
	}
	// a's lease runs out.
	if err := rdb.Del(ctx, s.LeaseKey(key)).Err(); err != nil {
		t.Fatal(err)
	}
	var l backend.Lease
	claim := serverCalls(t, rdb, func() {
		var err error
		if l, err = s.AcquireQueued(ctx, key, "b", time.Minute, 0, time.Minute); err != nil {
			t.Fatalf("b's claim: %v", err)
		}
	})
	if l.Owner != "b" {
		t.Fatalf("b's claim gave %+v", l)
	}
	wantCalls(t, "the first waiter's claim of the free key", claim, map[string]int64{
		"evalsha": 1,
		// one EXISTS finds the line; the first live waiter: ZRANGE, TIME
		// and HMGET its request; the lease: GET (none)
		"exists": 1, "zrange": 1, "time": 1, "hmget": 1,
		// the grant: GET counter, SET counter and lease … PX, on the
		// clock the line read; b leaves the line: HDEL, ZREM
		"get": 2, "set": 2, "hdel": 1, "zrem": 1,
	})
}

// A FLUSHALL leaves the server's uptime as it was, so the uptime alone
// does not show the loss: the tag's intact marker does. On a server up
// for longer than the guard, the first grant of a key of a tag whose
// marker is missing (the tag's first use, or its data flushed) is refused
// as recovering for max(ttl, guard), and writes the marker; after that,
// new keys of the tag are granted at once, as are keys without a tag of
// their own. A foreign value in the marker fails with ErrCorrupt naming it.
func TestRestartGuardAfterFlush(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	ctx := ctxT(t)
	const ttl = 300 * time.Millisecond
	s := newStore(t, rdb, redisbackend.WithRestartGuard(0))
	// Wait until the server is older than the guard plus Redis's second.
	awaitUptime(t, ctx, rdb, 2)

	key := "{flush:guard}:lock:a"
	waitGranted := func(what string) {
		t.Helper()
		before := time.Now() // the marker is written after this, by the server's clock
		var he *backend.HeldError
		_, err := s.Acquire(ctx, key, "a", ttl, 0)
		if !errors.As(err, &he) || !he.Recovering || he.Holder.TTL <= 0 || he.Holder.TTL > ttl {
			t.Fatalf("%s: Acquire = %v; want a recovering refusal of at most %v", what, err, ttl)
		}
		if n, err := rdb.Exists(ctx, s.IntactKey(key)).Result(); err != nil || n != 1 {
			t.Fatalf("%s: marker %s exists %d, %v; want it written", what, s.IntactKey(key), n, err)
		}
		for {
			_, err := s.Acquire(ctx, key, "a", ttl, 0)
			if err == nil {
				// The marker holds the server's time in whole ms, so the
				// guard may end up to 1 ms before ttl has passed.
				if recv := time.Now(); recv.Before(before.Add(ttl - time.Millisecond)) {
					t.Fatalf("%s: granted %v after the first refusal; the guard is %v (to the ms)", what, recv.Sub(before), ttl)
				}
				break
			}
			if !errors.As(err, &he) || !he.Recovering {
				t.Fatalf("%s: Acquire while recovering: %v", what, err)
			}
			time.Sleep(min(he.Holder.TTL, 20*time.Millisecond))
		}
		if err := s.Release(ctx, key, "a", 0); err != nil {
			t.Fatal(err)
		}
	}

	waitGranted("the tag's first use")
	for _, other := range []string{"{flush:guard}:lock:b", "untagged-key"} {
		if _, err := s.Acquire(ctx, other, "a", ttl, 0); err != nil {
			t.Errorf("Acquire(%q) once the tag's marker is written: %v; want it granted at once", other, err)
		}
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	waitGranted("after FLUSHALL")

	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, s.IntactKey(key), "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, key, "a", ttl, 0); !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), s.IntactKey(key)) {
		t.Fatalf("Acquire with a foreign value in the marker: %v; want ErrCorrupt naming %s", err, s.IntactKey(key))
	}
}

// awaitUptime waits until the server of rdb has been up for secs seconds.
func awaitUptime(t *testing.T, ctx context.Context, rdb redis.UniversalClient, secs int) {
	t.Helper()
	for {
		info, err := rdb.Info(ctx, "server").Result()
		if err != nil {
			t.Fatal(err)
		}
		_, after, _ := strings.Cut(info, "uptime_in_seconds:")
		if up, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(after, "\n", 2)[0])); up >= secs {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the server's uptime did not reach %d s", secs)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// An intact marker ahead of the server's clock (the clock went back, or
// the value was forged) would refuse every fresh key of its tag until the
// clock reached it. The first grant that reads it fails with ErrCorrupt
// naming the marker and resets it to the server's time; the tag's fresh
// keys then wait out the guard once, as after a flush, and are granted.
func TestRestartGuardMarkerAhead(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	ctx := ctxT(t)
	const ttl = 300 * time.Millisecond
	s := newStore(t, rdb, redisbackend.WithRestartGuard(0))
	awaitUptime(t, ctx, rdb, 2)
	for name, at := range map[string]int64{
		"an hour ahead":    time.Now().Add(time.Hour).UnixMilli(),
		"a century ahead":  time.Now().AddDate(100, 0, 0).UnixMilli(),
		"2^53 ms from now": 1<<53 - 1,
	} {
		t.Run(name, func(t *testing.T) {
			key := "{marker:ahead}:lock:" + strings.ReplaceAll(name, " ", "-")
			marker := s.IntactKey(key)
			if err := rdb.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			if err := rdb.Set(ctx, marker, strconv.FormatInt(at, 10), 0).Err(); err != nil {
				t.Fatal(err)
			}
			_, err := s.Acquire(ctx, key, "a", ttl, 0)
			if !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), marker) || !strings.Contains(err.Error(), "ahead of the server's clock") {
				t.Fatalf("Acquire with the marker %s: %v; want ErrCorrupt naming %s as ahead of the clock", name, err, marker)
			}
			now, err := rdb.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			if v, err := rdb.Get(ctx, marker).Int64(); err != nil || v > now.UnixMilli() {
				t.Fatalf("the marker holds %d, %v after the refusal; want the server's time, at most %d", v, err, now.UnixMilli())
			}
			deadline := time.Now().Add(5 * time.Second) // the guard is ttl; this is slack for a busy machine
			for {
				_, err := s.Acquire(ctx, key, "a", ttl, 0)
				if err == nil {
					break
				}
				var he *backend.HeldError
				if !errors.As(err, &he) || !he.Recovering || he.Holder.TTL > ttl {
					t.Fatalf("Acquire after the marker was reset: %v; want a grant, or a recovering refusal of at most %v", err, ttl)
				}
				if time.Now().After(deadline) {
					t.Fatalf("the key is still refused 5 s after the marker was reset: %v", err)
				}
				time.Sleep(min(he.Holder.TTL, 20*time.Millisecond))
			}
		})
	}
}
