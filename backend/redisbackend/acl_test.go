package redisbackend_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/backendtest"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/internal/testenv"
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
// and handover, the member registry, a restart empty — and README gives
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
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), rules) {
		t.Errorf("README does not give the ACL rules of the least-privilege user:\n%s", rules)
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

// A tenant's user confined to its own {tenant:... keys and channels runs
// its own leases and watches, and is refused another tenant's, with an
// error that names it.
func TestACLTenant(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := ctxT(t)
	rules := strings.NewReplacer("~baton:*", "~baton:{acme:*", "&baton:*", "&baton:{acme:*").Replace(redisbackend.ACLRules(""))
	acme := newStore(t, aclUser(t, r, "acme", "pw", rules))
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
