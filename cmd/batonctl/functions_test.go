package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend/redisbackend"
)

// functions prints baton's Redis function library and, as an
// administrator, loads it; then a tenant's ACL user with redis.functions
// reads its service's master, and is told that locks needs an operator's
// user.
func TestFunctions(t *testing.T) {
	wipe(t)
	var out, errOut bytes.Buffer
	if code := run(t.Context(), []string{"functions"}, strings.NewReader(""), &out, &errOut); code != exitOK || out.String() != redisbackend.FunctionLibrary() {
		t.Fatalf("functions: exit %d, stderr %q; want exit 0 and the library on stdout", code, errOut.String())
	}
	admin := fixture{name: "admin", config: writeConfig(t, fmt.Sprintf("redis:\n  addrs: [%q]\n", redisServer.Addr()))}
	r := admin.ctl(t, "", "functions", "load")
	r.want(t, exitOK, "functions load")
	if !strings.Contains(r.stdout, "loaded") {
		t.Errorf("functions load: stdout %q; want it to say what it loaded", r.stdout)
	}
	r = admin.ctl(t, "", "functions", "unload")
	r.want(t, exitUsage, "functions with an unknown argument")

	rules, err := redisbackend.TenantACLRules("", tenant)
	if err != nil {
		t.Fatal(err)
	}
	args := []any{"ACL", "SETUSER", tenant, "reset", "on", ">pw"}
	for _, f := range strings.Fields(rules) {
		args = append(args, f)
	}
	if err := redisServer.Client(t).Do(t.Context(), args...).Err(); err != nil {
		t.Fatal(err)
	}
	o := redisServer.Options()
	o.Username, o.Password = tenant, "pw"
	st, err := redisbackend.New(redis.NewClient(o), redisbackend.WithoutRestartGuard(), redisbackend.WithFunctions())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const app = "tenanted"
	m := startElector(t, st, app, 8081)
	waitFor(t, "master", m.IsMaster)
	own := fixture{name: "tenant", config: writeConfig(t, fmt.Sprintf("instance:\n  tenant: %s\nredis:\n  addrs: [%q]\n  username: %s\n  password: pw\n  functions: true\n",
		tenant, redisServer.Addr(), tenant))}
	r = own.ctl(t, "", "--app", app, "master")
	r.want(t, exitOK, "master as the tenant's user")
	if !strings.HasPrefix(r.stdout, m.Status().Instance+" epoch ") {
		t.Errorf("master as the tenant's user: %q; want %s", r.stdout, m.Status().Instance)
	}
	r = own.ctl(t, "", "--app", app, "locks")
	r.want(t, exitError, "locks as the tenant's user")
	if !strings.Contains(r.stderr, "ACLRules") {
		t.Errorf("locks as the tenant's user: stderr %q; want it to say to list as an ACLRules user", r.stderr)
	}
}
