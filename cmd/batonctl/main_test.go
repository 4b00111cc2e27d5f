package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/testkit/consultest"
	"github.com/baton-go/baton/testkit/storetest"
	"github.com/baton-go/baton/testkit/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata with the output of this run")

// The package's private servers: a redis-server and a Consul agent,
// shared by the tests, which keep apart by using an app of their own.
var (
	redisServer  *testenv.Redis
	consulServer *testenv.Consul
)

func TestMain(m *testing.M) {
	flag.Parse()
	quietRedis()
	var err error
	if redisServer, err = testenv.StartRedis(testenv.RedisOptions{}); err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	if consulServer, err = testenv.StartConsul(testenv.ConsulOptions{}); err != nil {
		redisServer.Close()
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	code := m.Run()
	consulServer.Close()
	redisServer.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// patience bounds every wait of the tests for something that must happen.
const patience = 20 * time.Second

// tenant is the tenant of every test's service.
const tenant = "acme"

// fixture is one store kind the tests run batonctl against: a
// configuration file that points at its server, and clients of the same
// store for the tests' own electors and locks.
type fixture struct {
	name     string
	config   string                           // path of the configuration file
	newStore func(t testing.TB) backend.Store // a client as another process
}

// wipe empties the shared servers, so that a test (run again with
// -count, or after one that failed) starts from nothing. The tests do not
// run in parallel.
func wipe(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	if err := redisServer.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	if err := consulServer.DeleteAll(ctx); err != nil {
		t.Fatal(err)
	}
}

// fixtures empties the servers and returns the Redis and Consul
// fixtures, with configuration files in t's temporary directory.
func fixtures(t *testing.T) []fixture {
	wipe(t)
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return []fixture{
		{
			name:     "redis",
			config:   write("redis.yaml", fmt.Sprintf("instance:\n  tenant: %s\nredis:\n  addrs: [%q]\n", tenant, redisServer.Addr())),
			newStore: func(t testing.TB) backend.Store { return storetest.Redis(t, redisServer) },
		},
		{
			name:     "consul",
			config:   write("consul.yaml", fmt.Sprintf("instance:\n  tenant: %s\nconsul:\n  address: %q\n", tenant, consulServer.Addr())),
			newStore: func(t testing.TB) backend.Store { return consultest.Consul(t, consulServer) },
		},
	}
}

// eachFixture runs f as a subtest per store kind.
func eachFixture(t *testing.T, f func(t *testing.T, fx fixture)) {
	for _, fx := range fixtures(t) {
		t.Run(fx.name, func(t *testing.T) { f(t, fx) })
	}
}

// result is what one run of batonctl gave.
type result struct {
	code           int
	stdout, stderr string
}

// ctl runs batonctl with the fixture's configuration and args, stdin
// giving stdin.
func (fx fixture) ctl(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return fx.ctlIn(t, strings.NewReader(stdin), args...)
}

// ctlIn is ctl with stdin read from r.
func (fx fixture) ctlIn(t *testing.T, stdin io.Reader, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, append([]string{"--config", fx.config}, args...), stdin, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// want fails t unless r exited with code.
func (r result) want(t *testing.T, code int, what string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.code, code, r.stdout, r.stderr)
	}
}

// normalisers replace what changes from run to run (tokens, nonces,
// durations, times, ports) with placeholders, so that outputs compare
// with golden files.
var normalisers = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "<time>"},
	{regexp.MustCompile(`#[0-9a-f]{8,32}\b`), "#<nonce>"},
	{regexp.MustCompile(`\b\d{13,17}\b`), "<token>"},
	// A lower bound read from a token: absent when it is 0 (a grant
	// within the millisecond), so left out.
	{regexp.MustCompile(`,\n\s*"held_at_least_ms": ?\d+`), ""},
	{regexp.MustCompile(`"(ttl_ms|lease_ms|last_heartbeat_ms)": ?\d+`), `"$1": <ms>`},
	{regexp.MustCompile(`\b(\d+(\.\d+)?(h|ms|µs|ns|m|s))+\b`), "<dur>"},
	{regexp.MustCompile(`127\.0\.0\.1:\d{2,5}\b`), "127.0.0.1:<port>"},
	{regexp.MustCompile(`(\S) {2,}`), "$1  "},
}

func normalise(s string) string {
	for _, n := range normalisers {
		s = n.re.ReplaceAllString(s, n.with)
	}
	return s
}

// golden compares got, normalised, with testdata/name.golden, or writes
// it there with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = normalise(got)
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (normalised):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// waitFor polls cond until it holds, failing t after patience.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, patience)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// quiet keeps the electors' logs out of the test output.
var quiet = role.WithLogger(slog.New(slog.DiscardHandler))

// roleConfig is long enough that no tenure ends while a test looks.
var roleConfig = role.Config{HeartbeatInterval: time.Second, HeartbeatExpiration: 30 * time.Second}

// startElector starts an elector of app for instance port on st, stopped
// when t ends.
func startElector(t *testing.T, st backend.Store, app string, port int) *role.Elector {
	t.Helper()
	id, err := instanceid.New("127.0.0.1", tenant, app, port)
	if err != nil {
		t.Fatal(err)
	}
	el, err := role.NewElector(st, id, roleConfig, quiet)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Start(el, el.Run)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := testenv.Stop(ctx, el); err != nil {
			t.Errorf("stopping the elector of %s: %v", id, err)
		}
	})
	return el
}

// service starts two electors of app, the first one master, and waits
// until both are listed as members.
func service(t *testing.T, fx fixture, app string) (masterEl, slave *role.Elector) {
	t.Helper()
	masterEl = startElector(t, fx.newStore(t), app, 8081)
	waitFor(t, "master", masterEl.IsMaster)
	slave = startElector(t, fx.newStore(t), app, 8082)
	waitFor(t, "two members", func() bool {
		ms, err := masterEl.Members(t.Context())
		return err == nil && len(ms) == 2
	})
	return masterEl, slave
}

// owner is an owner string as synclock makes them: an instance ID and a
// nonce.
func owner(app string, port int, nonce string) string {
	return fmt.Sprintf("127.0.0.1:%s:%s:%d#%s", tenant, app, port, nonce)
}

// acquire grants key of app (the part after {tenant:app}:) to o on st.
func acquire(t *testing.T, st backend.Store, app, key, o string) backend.Lease {
	t.Helper()
	l, err := st.Acquire(t.Context(), backend.AppKey(tenant, app, key), o, time.Minute, 0)
	if err != nil {
		t.Fatalf("acquire %s: %v", key, err)
	}
	return l
}

// isNotHeld reports whether err says the caller does not hold the lease.
func isNotHeld(err error) bool { return errors.Is(err, backend.ErrNotHeld) }
