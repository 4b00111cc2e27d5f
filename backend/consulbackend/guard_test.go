package consulbackend_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/backendtest"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

// managementToken turns ACLs on in the agents of the ACL tests.
const managementToken = "6c0f1a7e-3b52-4d8e-9a61-2f4b8c7d9e10"

// policyToken creates a policy of consulbackend.ACLPolicy("", tenant,
// app) on a and returns the secret of a new token of it.
func policyToken(t testing.TB, a *testenv.Consul, tenant, app string) string {
	t.Helper()
	rules, err := consulbackend.ACLPolicy("", tenant, app)
	if err != nil {
		t.Fatal(err)
	}
	acl := client(t, a).ACL()
	p, _, err := acl.PolicyCreate(&api.ACLPolicy{Name: "baton-" + tenant + "-" + app, Rules: rules}, nil)
	if err != nil {
		t.Fatalf("create the policy of %s:%s:\n%s\n%v", tenant, app, rules, err)
	}
	tok, _, err := acl.TokenCreate(&api.ACLToken{Policies: []*api.ACLTokenPolicyLink{{ID: p.ID}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tok.SecretID
}

// tokenStore returns a store on a that uses token, closed with the test.
func tokenStore(t testing.TB, a *testenv.Consul, token string, opts ...consulbackend.Option) *consulbackend.Store {
	t.Helper()
	cfg := config(a)
	cfg.Token = token
	s, err := consulbackend.New(cfg, append([]consulbackend.Option{consulbackend.WithSessionTTLMin(a.SessionTTLMin())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// awaitGrant acquires key for owner, waiting out the restart guard's
// Recovering refusals, and fails t on any other error.
func awaitGrant(t testing.TB, s *consulbackend.Store, key, owner string, ttl time.Duration) backend.Lease {
	t.Helper()
	ctx := ctxT(t)
	for {
		l, err := s.Acquire(ctx, key, owner, ttl, 0)
		var held *backend.HeldError
		switch {
		case err == nil:
			return l
		case !errors.As(err, &held) || !held.Recovering:
			t.Fatalf("Acquire(%q): %v", key, err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Acquire(%q): still recovering when the test's patience ran out: %v", key, err)
		case <-time.After(held.Holder.TTL / 4):
		}
	}
}

// recovering reports whether err is the restart guard's refusal.
func recovering(err error) bool {
	var held *backend.HeldError
	return errors.As(err, &held) && held.Recovering
}

// The restart guard is per service: a client that locks another
// service's guard entry (as that service's first grant, or its grant
// after a data loss, does), or the entry shared by keys without a hash
// tag, holds up no other service's grants; each service waits once on a
// Consul it never used; the guard still covers the service whose data
// went.
func TestGuardPerService(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	// Long enough that the grants outlive the test on a loaded machine (none
	// is meant to expire), short enough for the first grant's guard wait.
	ttl := 5 * time.Second
	acme, globex := newStore(t, a, consulbackend.WithRestartGuard(0)), newStore(t, a, consulbackend.WithRestartGuard(0))
	kg := func(name string) string { return backend.AppKey("globex", "billing", "lock", name) }
	if _, err := globex.Acquire(ctx, kg("first"), "g", ttl, 0); !recovering(err) {
		t.Fatalf("globex's first grant on a Consul it never used: %v; want a Recovering refusal", err)
	}
	awaitGrant(t, globex, kg("first"), "g", ttl)

	// A client locks acme's guard entry and the shared one.
	ka := backend.AppKey("acme", "billing", "lock", "first")
	cli := client(t, a)
	sess, _, err := cli.Session().Create(&api.SessionEntry{TTL: "60s", Behavior: api.SessionBehaviorDelete}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{acme.RecoveringKey(ka), acme.RecoveringKey("untagged")} {
		if ok, _, err := cli.KV().Acquire(&api.KVPair{Key: k, Session: sess}, nil); err != nil || !ok {
			t.Fatalf("lock %s: %v, %v", k, ok, err)
		}
	}
	if _, err := globex.Acquire(ctx, kg("second"), "g", ttl, 0); err != nil {
		t.Fatalf("globex's new key while acme's guard entry is held: %v; want it granted", err)
	}
	if _, err := acme.Acquire(ctx, ka, "a", ttl, 0); !recovering(err) {
		t.Errorf("acme's new key while its guard entry is held: %v; want a Recovering refusal", err)
	}
	if _, err := acme.Acquire(ctx, "untagged", "a", ttl, 0); !recovering(err) {
		t.Errorf("a key without a tag while the shared guard entry is held: %v; want a Recovering refusal", err)
	}
	if _, err := cli.Session().Destroy(sess, nil); err != nil {
		t.Fatal(err)
	}
	// Free again, acme's entry: acme's first grant still finds no marker
	// of its own and waits once.
	if _, err := acme.Acquire(ctx, ka, "a", ttl, 0); !recovering(err) {
		t.Errorf("acme's first grant on a Consul it never used: %v; want a Recovering refusal", err)
	}
	if _, err := globex.Acquire(ctx, kg("third"), "g", ttl, 0); err != nil {
		t.Errorf("globex's new key while acme recovers: %v; want it granted", err)
	}

	// globex's data goes (its markers with it: a Consul that loses data
	// loses its tenant's marker too, else the service is taken for new):
	// globex's keys without a counter wait, those with one do not.
	for _, k := range []string{globex.BootedKey(kg("any")), globex.TenantBootedKey(kg("any"))} {
		if _, err := cli.KV().Delete(k, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := globex.Acquire(ctx, kg("fourth"), "g", ttl, 0); !recovering(err) {
		t.Errorf("globex's new key after its marker went: %v; want a Recovering refusal", err)
	}
	if err := globex.Release(ctx, kg("first"), "g", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := globex.Acquire(ctx, kg("first"), "g2", ttl, 0); err != nil {
		t.Errorf("globex's key whose counter survived: %v; want it granted", err)
	}
}

// A process with a token of ACLPolicy runs everything a store does for
// its tenant (the conformance suite, whose keys are tenant "conf"'s),
// and docs/consul.md gives the policy.
func TestACLPolicyConformance(t *testing.T) {
	a := testenv.NewConsul(t, testenv.ConsulOptions{ACLMasterToken: managementToken})
	token := policyToken(t, a, "conf", "")
	backendtest.Run(t, backendtest.Harness{
		NewStore: func(t testing.TB) backend.Store { return tokenStore(t, a, token, consulbackend.WithoutRestartGuard()) },
		Wipe: func(t testing.TB) {
			if err := a.DeleteAll(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		},
		GivenTTL: true,
		MinTTL:   a.SessionTTLMin(),
		MaxTTL:   consulbackend.MaxSessionTTL,
	})
	policy, err := consulbackend.ACLPolicy("", "acme", "billing")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../docs/consul.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), policy) {
		t.Errorf("docs/consul.md does not give the ACL policy of service acme:billing:\n%s", policy)
	}
	for _, bad := range [][2]string{{"", "billing"}, {"ac:me", "billing"}, {"acme", "bil}ling"}, {"ac me", ""}} {
		if _, err := consulbackend.ACLPolicy("", bad[0], bad[1]); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("ACLPolicy(%q, %q): %v; want ErrInvalidArgument", bad[0], bad[1], err)
		}
	}
}

// With the tokens of ACLPolicy, service acme's token can neither read
// nor write service globex's keys nor the shared guard entries, so it
// cannot hold up globex's grants; what it can do, as docs/consul.md says, is end
// globex's lease by destroying its session (session:write).
func TestACLPolicyConfines(t *testing.T) {
	a := testenv.NewConsul(t, testenv.ConsulOptions{ACLMasterToken: managementToken})
	ctx := ctxT(t)
	ttl := a.SessionTTLMin()
	acmeToken := policyToken(t, a, "acme", "billing")
	acme := tokenStore(t, a, acmeToken, consulbackend.WithRestartGuard(0))
	globex := tokenStore(t, a, policyToken(t, a, "globex", "billing"), consulbackend.WithRestartGuard(0))
	kg := backend.AppKey("globex", "billing", "lock", "first")
	awaitGrant(t, globex, kg, "g", ttl)
	awaitGrant(t, acme, backend.AppKey("acme", "billing", "lock", "first"), "a", ttl)

	cfg := config(a)
	cfg.Token = acmeToken
	cli, err := api.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{
		globex.LeaseKey(kg), globex.FenceKey(kg), globex.LineKey(kg) + "x", globex.MemberKey(backend.AppKey("globex", "billing", "members"), "x"),
		globex.BootedKey(kg), globex.RecoveringKey(kg), globex.BootedKey("untagged"), globex.RecoveringKey("untagged"),
	} {
		if _, err := cli.KV().Put(&api.KVPair{Key: k, Value: []byte("x")}, nil); err == nil {
			t.Errorf("acme's token wrote %s", k)
		}
		if _, err := cli.KV().Delete(k, nil); err == nil {
			t.Errorf("acme's token deleted %s", k)
		}
		if p, _, err := cli.KV().Get(k, nil); err == nil && p != nil {
			t.Errorf("acme's token read %s", k)
		}
	}
	if _, err := acme.Acquire(ctx, backend.AppKey("globex", "billing", "lock", "x"), "a", ttl, 0); err == nil || !strings.Contains(err.Error(), "consul.token") {
		t.Errorf("acme's store on globex's key: %v; want a refusal that says to check consul.token", err)
	}
	if _, err := globex.Acquire(ctx, backend.AppKey("globex", "billing", "lock", "second"), "g", ttl, 0); err != nil {
		t.Errorf("globex's new key: %v; want it granted", err)
	}

	// What acme's token can do: destroy the session of globex's lease.
	held := backend.AppKey("globex", "billing", "lock", "held")
	if _, err := globex.Acquire(ctx, held, "g", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	p, _, err := client(t, a).KV().Get(globex.LeaseKey(held), nil)
	if err != nil || p == nil || p.Session == "" {
		t.Fatalf("globex's lease: %+v, %v", p, err)
	}
	if _, err := cli.Session().Destroy(p.Session, nil); err != nil {
		t.Fatalf("acme's token destroying globex's lease session: %v; docs/consul.md says it can", err)
	}
	if _, err := globex.Get(ctx, held); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("globex's lease after acme destroyed its session: %v; want it gone", err)
	}
}

// A service new to a Consul its tenant already uses is new, not lost: the
// tenant's marker, which a loss of Consul's data would have taken, says
// so, and the service's first grant is at once. A fresh agent, another
// tenant and an agent that lost its data still make a new service wait,
// with a refusal that names batonctl init and WithoutRestartGuard.
func TestGuardNewServiceOnUsedConsul(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	ttl := a.SessionTTLMin()
	s := newStore(t, a, consulbackend.WithRestartGuard(0))
	first := backend.AppKey("acme", "billing", "role")
	_, err := s.Acquire(ctx, first, "a", ttl, 0)
	if !recovering(err) {
		t.Fatalf("the first grant on a fresh agent: %v; want a Recovering refusal", err)
	}
	for _, want := range []string{"batonctl init", "WithoutRestartGuard"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not name %s", err, want)
		}
	}
	awaitGrant(t, s, first, "a", ttl)
	if _, err := s.Acquire(ctx, backend.AppKey("acme", "shipping", "role"), "a", ttl, 0); err != nil {
		t.Fatalf("a second service of the tenant: %v; want it granted at once", err)
	}
	if _, err := s.Acquire(ctx, backend.AppKey("globex", "billing", "role"), "a", ttl, 0); !recovering(err) {
		t.Errorf("another tenant's first grant: %v; want a Recovering refusal", err)
	}

	if err := a.Restart(); err != nil { // a dev agent: without its data
		t.Fatal(err)
	}
	fresh := newStore(t, a, consulbackend.WithRestartGuard(0))
	if _, err := fresh.Acquire(ctx, backend.AppKey("acme", "invoices", "role"), "a", ttl, 0); !recovering(err) {
		t.Errorf("a new service after the agent lost its data: %v; want a Recovering refusal", err)
	}
}

// batonctl init's call, DeclareIntact, declares a Consul whole: the
// service's and its tenant's grants are at once, also when a first grant
// had already started the guard.
func TestGuardDeclareIntactConsul(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	ttl := a.SessionTTLMin()
	s := newStore(t, a, consulbackend.WithRestartGuard(time.Hour))
	key := backend.AppKey("acme", "billing", "role")
	if _, err := s.Acquire(ctx, key, "a", ttl, 0); !recovering(err) {
		t.Fatalf("the first grant on a fresh agent: %v; want a Recovering refusal", err)
	}
	if err := s.DeclareIntact(ctx); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("DeclareIntact without a key: %v; want ErrInvalidArgument", err)
	}
	if err := s.DeclareIntact(ctx, backend.AppKey("acme", "billing")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{key, backend.AppKey("acme", "shipping", "lock", "x")} {
		if _, err := s.Acquire(ctx, k, "a", ttl, 0); err != nil {
			t.Errorf("Acquire(%q) on a declared agent: %v; want it granted at once", k, err)
		}
	}
}
