package redisbackend_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

// The library has a function for every script of a store.
func TestFunctionLibrary(t *testing.T) {
	fields, visited := redisbackend.ScriptFields()
	if fields != visited {
		t.Fatalf("the script set has %d fields and each visits %d: name the new script in scriptSet.each", fields, visited)
	}
	lib := redisbackend.FunctionLibrary()
	if n := strings.Count(lib, "redis.register_function("); n != fields {
		t.Errorf("the library registers %d functions, want %d", n, fields)
	}
	for _, name := range []string{"acquire", "acquire_queued", "group_heartbeat", "group_leave"} {
		if !strings.Contains(lib, "'"+redisbackend.FunctionName(name)+"'") {
			t.Errorf("the library has no function %s", redisbackend.FunctionName(name))
		}
	}
}

// A store WithFunctions on a server that lacks them fails with an error
// that names the library and says to load it; once an administrator
// loaded it (twice: it replaces itself) the store works. A tenant's user,
// who may not send scripts, is told that its store needs WithFunctions.
func TestFunctionsLoad(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := ctxT(t)
	key := backend.AppKey("acme", "billing", "lock", "fn")
	s := functionStore(t, r.Client(t))
	_, err := s.Acquire(ctx, key, "a", time.Minute, 0)
	if lib := strings.TrimSuffix(redisbackend.FunctionName(""), "_"); err == nil || !strings.Contains(err.Error(), lib) || !strings.Contains(err.Error(), "LoadFunctions") {
		t.Errorf("Acquire before the functions are loaded: %v; want an error naming library %s and LoadFunctions", err, lib)
	}
	loadFunctions(t, r.Client(t))
	loadFunctions(t, r.Client(t))
	if _, err := s.Acquire(ctx, key, "a", time.Minute, 0); err != nil {
		t.Fatalf("Acquire after LoadFunctions: %v", err)
	}
	if err := s.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}

	rules, err := redisbackend.TenantACLRules("", "acme")
	if err != nil {
		t.Fatal(err)
	}
	scripted := newStore(t, aclUser(t, r, "acme", "pw", rules))
	_, err = scripted.Acquire(ctx, key, "a", time.Minute, 0)
	if err == nil || !strings.Contains(err.Error(), `user "acme"`) || !strings.Contains(err.Error(), "WithFunctions") {
		t.Errorf("a tenant's user with a store that sends scripts: %v; want an error naming the user and WithFunctions", err)
	}
}

// On a Cluster, LoadFunctions loads the library into every master, and a
// store WithFunctions grants keys on each of them.
func TestFunctionsCluster(t *testing.T) {
	c := testenv.NewCluster(t)
	ctx := ctxT(t)
	loadFunctions(t, c.ClusterClient(t))
	cc := c.ClusterClient(t)
	s := functionStore(t, cc)
	masters := map[string]bool{}
	for i := range 12 {
		key := backend.AppKey("acme", fmt.Sprintf("app%d", i), "lock", "fn")
		m, err := cc.MasterForKey(ctx, s.LeaseKey(key))
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
		if _, err := s.Acquire(ctx, key, "a", time.Minute, 0); err != nil {
			t.Fatalf("Acquire(%q) on the cluster: %v", key, err)
		}
		if err := s.Release(ctx, key, "a", 0); err != nil {
			t.Fatalf("Release(%q) on the cluster: %v", key, err)
		}
	}
	if n, err := cc.ClusterShards(ctx).Result(); err != nil || len(masters) != len(n) {
		t.Errorf("the keys landed on %d masters of %d (%v): pick names that reach every master", len(masters), len(n), err)
	}
}
