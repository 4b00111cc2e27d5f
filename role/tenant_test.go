package role_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/testkit/testenv"
)

// tenantStore returns a store on r that logs in as tenant's ACL user of
// redisbackend.TenantACLRules, made (again) with the password pw,
// calling baton's Redis functions, which it loads first.
func tenantStore(t testing.TB, r *testenv.Redis, tenant string) *redisbackend.Store {
	t.Helper()
	rules, err := redisbackend.TenantACLRules("", tenant)
	if err != nil {
		t.Fatal(err)
	}
	args := []any{"ACL", "SETUSER", tenant, "reset", "on", ">pw"}
	for _, f := range strings.Fields(rules) {
		args = append(args, f)
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := r.Client(t).Do(ctx, args...).Err(); err != nil {
		t.Fatalf("ACL SETUSER %s: %v", tenant, err)
	}
	if err := redisbackend.LoadFunctions(ctx, r.Client(t)); err != nil {
		t.Fatal(err)
	}
	o := r.Options()
	o.Username, o.Password = tenant, "pw"
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	s, err := redisbackend.New(c, redisbackend.WithoutRestartGuard(), redisbackend.WithFunctions()) // a server started for the tests
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Two tenants run an app of the same name on one Redis, each as its own
// ACL user (redisbackend.TenantACLRules): each elects its own master,
// sees only its own members and masters, holds its own locks and counts
// its own fencing tokens, and every key either writes carries its own
// {tenant:app} tag.
func TestTenantIsolation(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	cfg := role.Config{HeartbeatInterval: 100 * time.Millisecond, HeartbeatExpiration: 600 * time.Millisecond}
	tenantID := func(tenant string, port int) instanceid.ID {
		v, err := instanceid.New("127.0.0.1", tenant, "billing", port)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	start := func(tenant string, port int) *role.Elector {
		el, err := role.NewElector(tenantStore(t, r, tenant), tenantID(tenant, port), cfg, quiet)
		if err != nil {
			t.Fatal(err)
		}
		if err := el.Launch(); err != nil {
			t.Fatal(err)
		}
		return el
	}
	// The same host and port in both tenants: the IDs differ only by
	// tenant.
	acme := []*role.Elector{start("acme", 7800), start("acme", 7801)}
	globex := []*role.Elector{start("globex", 7800), start("globex", 7801)}
	defer stopAll(t, append(acme, globex...)...)
	waitFor(t, "a master in each tenant", func() bool { return master(acme) != nil && master(globex) != nil }, append(acme, globex...)...)
	ma, mg := master(acme), master(globex)
	if ma.Status().Epoch == 0 || mg.Status().Epoch == 0 {
		t.Fatal("a master without an epoch")
	}
	for _, c := range []struct {
		el    *role.Elector
		other *role.Elector
	}{{acme[0], mg}, {globex[0], ma}} {
		if ok, err := c.el.IsMasterOf(ctx, "billing", c.other.Status().Instance); err != nil || ok {
			t.Errorf("%s sees the other tenant's master %s as master of its billing: %v, %v", c.el.Status().Instance, c.other.Status().Instance, ok, err)
		}
	}
	waitFor(t, "each tenant's members listed", func() bool {
		for _, els := range [][]*role.Elector{acme, globex} {
			ms, err := els[0].Members(ctx)
			if err != nil || len(ms) != 2 {
				return false
			}
			for _, m := range ms {
				own, _ := instanceid.Parse(els[0].Status().Instance)
				if id, err := instanceid.Parse(m.ID); err != nil || id.Tenant != own.Tenant {
					t.Fatalf("%s lists a member of another tenant: %s", els[0].Status().Instance, m.ID)
				}
			}
		}
		return true
	}, append(acme, globex...)...)

	// One lock name in both tenants: both are held at once, each with its
	// own fencing counter.
	sa, sg := tenantStore(t, r, "acme"), tenantStore(t, r, "globex")
	ka, kg := backend.AppKey("acme", "billing", "lock", "nightly"), backend.AppKey("globex", "billing", "lock", "nightly")
	la, err := sa.Acquire(ctx, ka, "a", time.Minute, uint64(time.Now().Add(30*24*time.Hour).UnixMicro()))
	if err != nil {
		t.Fatal(err)
	}
	lg, err := sg.Acquire(ctx, kg, "g", time.Minute, 0)
	if err != nil {
		t.Fatalf("the same lock name in the other tenant while the first holds it: %v", err)
	}
	if lg.Token >= la.Token {
		t.Errorf("globex's token %d follows acme's floor-raised counter (%d): the tenants share a counter", lg.Token, la.Token)
	}

	// Every key is under its tenant's tag.
	keys, err := r.Client(t).Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.Contains(k, "{acme:billing}") && !strings.Contains(k, "{globex:billing}") {
			t.Errorf("key %q is under neither tenant's tag", k)
		}
	}
}
