package redisbackend_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
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

// aclUser makes user with password pw and rules on r, and returns a
// client that logs in as it.
func aclUser(t testing.TB, r *testenv.Redis, user, pw, rules string) *redis.Client {
	t.Helper()
	admin := r.Client(t)
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + pw}
	for _, f := range strings.Fields(rules) {
		args = append(args, f)
	}
	if err := admin.Do(ctxT(t), args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s %s: %v", user, rules, err)
	}
	return aclClient(t, r, user, pw)
}

// aclClient returns a client of r that logs in as user with password pw.
func aclClient(t testing.TB, r *testenv.Redis, user, pw string) *redis.Client {
	t.Helper()
	o := r.Options()
	o.Username, o.Password = user, pw
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	return c
}

// The least-privilege user of ACLRules can do everything a store does —
// the whole conformance suite: leases, fencing, watches, the waiting line
// and handover, the member registry, a restart empty — and docs/redis.md gives
// its exact rules.
func TestACLLeastPrivilege(t *testing.T) {
	r := testenv.NewRedis(t)
	rules := redisbackend.ACLRules("")
	aclUser(t, r, "baton", "s3cret", rules)
	// The restart guard's path (INFO, the intact marker) as that user:
	// the server forgets the user with its data.
	h := restartable(func(t testing.TB) redis.UniversalClient { return aclClient(t, r, "baton", "s3cret") }, func(t testing.TB) {
		if err := r.Restart(); err != nil {
			t.Fatal(err)
		}
		aclUser(t, r, "baton", "s3cret", rules)
	})
	h.Wipe = func(t testing.TB) {
		if err := r.FlushAll(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	backendtest.Run(t, h)
	readme, err := os.ReadFile("../../docs/redis.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), rules) {
		t.Errorf("docs/redis.md does not give the ACL rules of the least-privilege user:\n%s", rules)
	}
}

// A wrong password and each missing permission fail with an error that
// names the user and what was refused.
func TestACLRefusals(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := ctxT(t)
	key := backend.AppKey("acme", "billing", "lock", "acl")

	wrong := aclUser(t, r, "baton", "right", redisbackend.ACLRules(""))
	o := wrong.Options()
	o.Password = "wrong"
	s := newStore(t, redis.NewClient(o))
	_, err := s.Acquire(ctx, key, "a", time.Minute, 0)
	if err == nil || !strings.Contains(err.Error(), `user "baton"`) || !strings.Contains(err.Error(), "wrong password") {
		t.Errorf("Acquire with a wrong password: %v; want an error naming user baton and the password", err)
	}
	if !errors.Is(err, backend.ErrAuth) {
		t.Errorf("Acquire with a wrong password: %v; want an error wrapping backend.ErrAuth", err)
	}

	other := newStore(t, aclUser(t, r, "elsewhere", "pw", strings.Replace(redisbackend.ACLRules(""), "~baton:*", "~other:*", 1)))
	_, err = other.Acquire(ctx, key, "a", time.Minute, 0)
	if err == nil || !strings.Contains(err.Error(), `user "elsewhere"`) || !strings.Contains(err.Error(), "ACLRules") {
		t.Errorf("Acquire of a key outside the user's pattern: %v; want an error naming user elsewhere and ACLRules", err)
	}

	// The restart guard reads INFO for a grant that finds no counter: a
	// user refused it is told so, rather than granted unguarded.
	blind := newStore(t, aclUser(t, r, "blind", "pw", redisbackend.ACLRules("")+" -info"), redisbackend.WithRestartGuard(0))
	_, err = blind.Acquire(ctx, backend.AppKey("acme", "billing", "lock", "acl-info"), "a", time.Minute, 0)
	if err == nil || !strings.Contains(err.Error(), `user "blind"`) || !strings.Contains(err.Error(), "ACLRules") {
		t.Errorf("a guarded grant whose user may not run INFO: %v; want an error naming user blind and ACLRules", err)
	}

	mute := newStore(t, aclUser(t, r, "mute", "pw", redisbackend.ACLRules("")+" -publish"))
	w, err := mute.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := mute.Acquire(ctx, key, "a", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	err = mute.Release(ctx, key, "a", 0)
	if err == nil || !strings.Contains(err.Error(), `user "mute"`) || !strings.Contains(err.Error(), "ACLRules") {
		t.Errorf("a release whose script its user may not run: %v; want an error naming user mute and ACLRules", err)
	}
}

// A tenant's user of TenantACLRules, confined to its own {tenant:... keys
// and channels, runs its own leases and watches, and is refused another tenant's, with an
// error that names it.
func TestACLTenant(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := ctxT(t)
	rules, err := redisbackend.TenantACLRules("", "acme")
	if err != nil {
		t.Fatal(err)
	}
	loadFunctions(t, r.Client(t))
	acme := functionStore(t, aclUser(t, r, "acme", "pw", rules))
	own := backend.AppKey("acme", "billing", "lock", "nightly")
	w, err := acme.Watch(ctx, own)
	if err != nil {
		t.Fatalf("watch of its own key: %v", err)
	}
	defer w.Close()
	if _, err := acme.Acquire(ctx, own, "a", time.Minute, 0); err != nil {
		t.Fatalf("its own lock: %v", err)
	}
	if err := acme.Release(ctx, own, "a", 0); err != nil {
		t.Fatalf("releasing its own lock: %v", err)
	}
	_, err = acme.Acquire(ctx, backend.AppKey("globex", "billing", "lock", "nightly"), "a", time.Minute, 0)
	if err == nil || !strings.Contains(err.Error(), `user "acme"`) {
		t.Fatalf("another tenant's lock: %v; want a refusal naming user acme", err)
	}
}

// ACLRules escapes glob characters, so that even a prefix the store
// refuses grants no other prefix.
func TestACLRulesEscapeGlobs(t *testing.T) {
	rules := redisbackend.ACLRules(`b?t[on]*\x`)
	if !strings.Contains(rules, `~b\?t\[on\]\*\\x:* `) || !strings.Contains(rules, `&b\?t\[on\]\*\\x:* `) {
		t.Errorf("ACLRules of a prefix with glob characters: %s", rules)
	}
}

// functionStore returns a store WithFunctions on rdb, without the restart
// guard unless opts turn it on, closed with the test.
func functionStore(t testing.TB, rdb redis.UniversalClient, opts ...redisbackend.Option) *redisbackend.Store {
	t.Helper()
	s, err := redisbackend.New(rdb, append([]redisbackend.Option{redisbackend.WithoutRestartGuard(), redisbackend.WithFunctions()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// loadFunctions loads baton's functions with the administrator's client
// admin.
func loadFunctions(t testing.TB, admin redis.UniversalClient) {
	t.Helper()
	if err := redisbackend.LoadFunctions(ctxT(t), admin); err != nil {
		t.Fatal(err)
	}
}

// tenantStore is what a store shows the conformance suite as a tenant's
// user: everything but Leases (backend.Inspector), which needs SCAN.
type tenantStore interface {
	backend.Store
	backend.Handover
	backend.Breaker
	backend.Registry
}

// withoutLeases hides the Leases of a store whose user may not list keys.
type withoutLeases struct{ tenantStore }

// A tenant's user of TenantACLRules, through a store WithFunctions, runs
// everything a store does but listing — the conformance suite's leases,
// fencing, watches, waiting line and handover, member registry, Break and
// a restart empty (after which the administrator loads the functions
// again) — on the keys of its own tenant (the suite's keys are under
// tenant "conf"), and docs/redis.md gives its rules.
func TestACLTenantConformance(t *testing.T) {
	r := testenv.NewRedis(t)
	rules, err := redisbackend.TenantACLRules("", "conf")
	if err != nil {
		t.Fatal(err)
	}
	aclUser(t, r, "conf", "pw", rules)
	loadFunctions(t, r.Client(t))
	var restarted atomic.Bool
	h := backendtest.Harness{
		NewStore: func(t testing.TB) backend.Store {
			guard := redisbackend.WithoutRestartGuard()
			if restarted.Load() {
				guard = redisbackend.WithRestartGuard(0)
			}
			return withoutLeases{functionStore(t, aclClient(t, r, "conf", "pw"), guard)}
		},
		// The server forgets the user and the functions with its data.
		Restart: func(t testing.TB) {
			if err := r.Restart(); err != nil {
				t.Fatal(err)
			}
			aclUser(t, r, "conf", "pw", rules)
			loadFunctions(t, r.Client(t))
			restarted.Store(true)
		},
	}
	h.Wipe = func(t testing.TB) {
		if err := r.FlushAll(ctxT(t)); err != nil {
			t.Fatal(err)
		}
	}
	backendtest.Run(t, h)
	acme, err := redisbackend.TenantACLRules("", "acme")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../docs/redis.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), acme) {
		t.Errorf("docs/redis.md does not give the ACL rules of tenant acme's user:\n%s", acme)
	}
}

// A tenant's user of TenantACLRules, on a server another tenant shares,
// cannot list the server's keys (Redis does not confine SCAN to key
// patterns: it would show the other tenant's lock names, entity IDs and
// all), nor read, write, watch or publish on the other tenant's keys and
// channels, by a command, a script or the store; Leases says to list as
// an operator's user.
func TestACLTenantConfined(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := ctxT(t)
	admin := newStore(t, r.Client(t))
	theirs := backend.AppKey("globex", "billing", "lock", "invoice:42")
	lg, err := admin.Acquire(ctx, theirs, "g", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := redisbackend.TenantACLRules("", "acme")
	if err != nil {
		t.Fatal(err)
	}
	c := aclUser(t, r, "acme", "pw", rules)
	if keys, _, err := c.Scan(ctx, 0, "*", 1000).Result(); err == nil {
		t.Errorf("SCAN as tenant acme's user lists %q; want it refused", keys)
	}
	loadFunctions(t, r.Client(t))
	acme := functionStore(t, c)
	if _, err := acme.Leases(ctx, ""); err == nil || !strings.Contains(err.Error(), `user "acme"`) || !strings.Contains(err.Error(), "ACLRules") {
		t.Errorf("Leases as tenant acme's user: %v; want a refusal that names the user and says to list with ACLRules", err)
	}

	name := admin.LeaseKey(theirs)
	channel, _, _ := admin.Notices(theirs)
	for _, args := range [][]any{
		{"GET", name}, {"SET", name, "1 acme"}, {"DEL", name}, {"TYPE", name}, {"EXISTS", name}, {"PTTL", name},
		{"HGET", name, "f"}, {"ZRANGE", name, 0, -1}, {"PUBLISH", channel, "released"},
		{"FCALL", redisbackend.FunctionName("get"), 7, name, name, name, name, name, name, name, "-1", "PUBLISH", "1"},
	} {
		if err := c.Do(ctx, args...).Err(); err == nil || !(strings.Contains(err.Error(), "NOPERM") || strings.Contains(err.Error(), "can't access")) {
			t.Errorf("%v as tenant acme's user: %v; want an ACL refusal", args, err)
		}
	}
	sub := c.Subscribe(ctx, channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err == nil {
		t.Errorf("SUBSCRIBE %s as tenant acme's user: no error; want an ACL refusal", channel)
	}
	if _, err := acme.Acquire(ctx, theirs, "a", time.Minute, 0); err == nil || !strings.Contains(err.Error(), `user "acme"`) {
		t.Errorf("Acquire of globex's lock as tenant acme's user: %v; want a refusal naming the user", err)
	}
	if _, err := acme.Break(ctx, theirs, "g", lg.Token); err == nil {
		t.Error("Break of globex's lock as tenant acme's user: no error; want a refusal")
	}
	if l, err := admin.Get(ctx, theirs); err != nil || l.Owner != "g" {
		t.Errorf("globex's lock after acme's tries: %+v, %v; want it still held by g", l, err)
	}

	// Glob characters in a tenant's name match themselves only.
	glob, err := redisbackend.TenantACLRules("", "a*")
	if err != nil {
		t.Fatal(err)
	}
	g := aclUser(t, r, "glob", "pw", glob)
	if err := g.Set(ctx, "baton:{a*:billing}:x", "1", 0).Err(); err != nil {
		t.Errorf("tenant a*'s user on its own key: %v", err)
	}
	if err := g.Get(ctx, "baton:{acme:billing}:lock:x").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("tenant a*'s user on tenant acme's key: %v; want an ACL refusal", err)
	}

	for _, bad := range []string{"", "ac:me", "{acme}", "ac me", "ac\x1bme"} {
		if _, err := redisbackend.TenantACLRules("", bad); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("TenantACLRules(%q): %v; want ErrInvalidArgument", bad, err)
		}
	}
}

// Why a tenant's user sends no scripts: a Lua script of a user with EVAL
// (ACLRules, even with the tenant's key patterns) is confined to its keys
// and commands but not in time; while it loops the server answers
// everyone else BUSY, until an administrator's SCRIPT KILL ends it, or,
// once it has written, until it ends by itself (SCRIPT KILL is refused:
// only SHUTDOWN NOSAVE would end it). A tenant's user of TenantACLRules
// may not send a script, nor load or delete functions.
func TestACLTenantBusyScript(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := ctxT(t)
	admin := r.Client(t)
	if err := admin.ConfigSet(ctx, "busy-reply-threshold", "50").Err(); err != nil {
		t.Fatal(err)
	}
	rules, err := redisbackend.TenantACLRules("", "acme")
	if err != nil {
		t.Fatal(err)
	}
	loadFunctions(t, admin)
	tenant := aclUser(t, r, "acme", "pw", rules)
	for _, args := range [][]any{
		{"EVAL", "return 1", 0}, {"EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", 0}, {"SCRIPT", "LOAD", "return 1"}, {"SCRIPT", "KILL"},
		{"FUNCTION", "LOAD", "#!lua name=mine\nredis.register_function('mine', function() while true do end end)"},
		{"FUNCTION", "DELETE", strings.TrimSuffix(redisbackend.FunctionName(""), "_")}, {"FUNCTION", "FLUSH"},
	} {
		if err := tenant.Do(ctx, args...).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%q as tenant acme's user: %v; want an ACL refusal", args, err)
		}
	}

	// A user with EVAL, confined to acme's keys as the tenant is.
	c := aclUser(t, r, "evaluator", "pw", strings.NewReplacer("~baton:*", "~baton:{acme:*", "&baton:*", "&baton:{acme:*").Replace(redisbackend.ACLRules("")))
	if err := c.Do(ctx, "SCRIPT", "KILL").Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("SCRIPT KILL as a user of ACLRules: %v; want an ACL refusal", err)
	}
	// A loop that ends by itself after a minute of server time, should
	// the kill never come.
	done := busy(t, admin, c, `local t0 = redis.call('TIME')
while redis.call('TIME')[1] - t0[1] < 60 do end
return 'done'`)
	if err := admin.Do(ctx, "SCRIPT", "KILL").Err(); err != nil {
		t.Fatalf("SCRIPT KILL as the administrator: %v", err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("the script after SCRIPT KILL: %v; want it killed", err)
	}

	// One that wrote first cannot be killed: it runs to its end, one to
	// two seconds on.
	done = busy(t, admin, c, `redis.call('SET', 'baton:{acme:billing}:x', '1')
local t0 = redis.call('TIME')
while redis.call('TIME')[1] - t0[1] < 2 do end
return 'done'`)
	if err := admin.Do(ctx, "SCRIPT", "KILL").Err(); err == nil || !strings.Contains(err.Error(), "UNKILLABLE") {
		t.Errorf("SCRIPT KILL of a script that wrote: %v; want UNKILLABLE", err)
	}
	if err := <-done; err != nil {
		t.Errorf("the script that wrote: %v; want it to run to its end", err)
	}
	if err := admin.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after the scripts: %v", err)
	}
}

// busy runs script as c's user and returns once another client, admin,
// is answered BUSY; the channel receives the script's error when it ends.
func busy(t *testing.T, admin, c *redis.Client, script string) <-chan error {
	t.Helper()
	ctx := ctxT(t)
	done := make(chan error, 1)
	go func() { done <- c.Eval(ctx, script, nil).Err() }()
	for {
		err := admin.Ping(ctx).Err()
		if err != nil && strings.Contains(err.Error(), "BUSY") {
			return done
		}
		select {
		case err := <-done:
			t.Fatalf("the script ended (%v) before another client was told BUSY", err)
		default:
		}
		if ctx.Err() != nil {
			t.Fatalf("no BUSY reply while the script runs: %v", err)
		}
	}
}

// The user of ACLRules runs the grants of a store WithReplicaAck on a
// server that has not cached baton's scripts yet (a fresh or restarted
// server): the grant is sent again with EVAL, never with SCRIPT LOAD,
// which the rules do not allow. With no replica to acknowledge it, the
// grant fails with ErrNotReplicated, not with a refusal of the ACL.
func TestACLReplicaAck(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := ctxT(t)
	s := newStore(t, aclUser(t, r, "baton", "pw", redisbackend.ACLRules("")), redisbackend.WithReplicaAck(1, 50*time.Millisecond))
	if err := r.Client(t).Do(ctx, "SCRIPT", "FLUSH").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Acquire(ctx, backend.AppKey("acme", "billing", "lock", "acked"), "a", time.Minute, 0)
	if !errors.Is(err, redisbackend.ErrNotReplicated) {
		t.Fatalf("Acquire WithReplicaAck as the user of ACLRules, scripts not cached: %v; want ErrNotReplicated (no replica), not a refusal", err)
	}
}

// Every command of ACLRules is one the store uses: called by a script of
// redisbackend or springredis, or sent by the Go side (the list below
// says where). A command no code uses any more is a privilege the user
// need not have.
func TestACLRulesOnlyUsedCommands(t *testing.T) {
	sent := map[string]string{
		"evalsha": "scripts", "eval": "scripts", "fcall": "WithFunctions",
		"publish": "scripts, by the name scriptSettings passes", "spublish": "scripts on a Cluster",
		"multi": "the lease read (look)", "exec": "the lease read (look)", "get": "the lease read (look)", "pttl": "the lease read (look)",
		"wait": "WithReplicaAck", "scan": "Leases",
		"subscribe": "watches", "ssubscribe": "watches on a Cluster", "unsubscribe": "watches", "sunsubscribe": "watches on a Cluster",
		"hello": "go-redis's handshake", "ping": "the pub/sub connection's health check",
	}
	called := regexp.MustCompile(`redis\.p?call\(\s*'([A-Za-z]+)'`)
	for _, glob := range []string{"lua/*.lua", "lua/group/*.lua", "../springredis/lua/*.lua"} {
		files, err := filepath.Glob(glob)
		if err != nil || len(files) == 0 {
			t.Fatalf("no scripts at %s: %v", glob, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range called.FindAllStringSubmatch(string(b), -1) {
				sent[strings.ToLower(m[1])] = f
			}
		}
	}
	for _, rule := range strings.Fields(redisbackend.ACLRules("")) {
		if c, ok := strings.CutPrefix(rule, "+"); ok && sent[c] == "" {
			t.Errorf("ACLRules allows %s, which no script calls and the store does not send", c)
		}
	}
}

// A user made from the rules of a baton before ZPOPMIN or HMGET were
// among them still has its keys handed over: the release that would pop
// the line's head reads it instead, and a place's request and its
// store's wake-up id are read by two HGETs, so a fleet may upgrade
// before its ACL does. The waiter waits before the release, so it hears
// of the handover on its wake-up channel, not by a look.
func TestACLWithoutZPopMinHandsOver(t *testing.T) {
	r := testenv.NewRedis(t)
	for _, missing := range [][]string{{"zpopmin"}, {"hmget"}, {"zpopmin", "hmget"}} {
		t.Run(strings.Join(missing, "+"), func(t *testing.T) {
			rules := redisbackend.ACLRules("")
			for _, c := range missing {
				rules = strings.Replace(rules, " +"+c, "", 1)
			}
			user := "old" + strings.Join(missing, "")
			aclUser(t, r, user, "s3cret", rules)
			s := newStore(t, aclClient(t, r, user, "s3cret"))
			ctx := ctxT(t)
			key := "{old:acl}:" + user
			la, err := s.AcquireQueued(ctx, key, "a", time.Minute, 0, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.AcquireQueued(ctx, key, "b", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
				t.Fatalf("b joining the line: %v, want ErrHeld", err)
			}
			got := make(chan awaitResult, 1)
			go func() {
				l, ok, err := s.AwaitHandover(ctx, key, "b", time.Minute)
				got <- awaitResult{l, ok, err}
			}()
			waitUntil(t, "b's store subscribed", func() bool {
				n, err := r.Client(t).PubSubNumSub(ctx, s.WakeChannel(key)).Result()
				return err == nil && n[s.WakeChannel(key)] > 0
			})
			if err := s.Release(ctx, key, "a", 0); err != nil {
				t.Fatalf("a's release as a user without %v: %v", missing, err)
			}
			b := <-got
			if b.err != nil || !b.ok || b.l.Token <= la.Token {
				t.Fatalf("b's AwaitHandover: %+v, ok %v, err %v; want the key handed to it with a token above %d", b.l, b.ok, b.err, la.Token)
			}
		})
	}
}
