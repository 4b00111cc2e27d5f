package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/backend/springredis"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/statuspage"
	"github.com/baton-go/baton/testkit/testenv"
)

// status, members and master against a service with a master, a slave
// and a lock held with a waiter in line, in both formats; then master and
// status of a service with no master.
func TestStatusMembersMaster(t *testing.T) {
	eachFixture(t, func(t *testing.T, fx fixture) {
		const app = "billing"
		m, _ := service(t, fx, app)
		st := fx.newStore(t).(backend.Queue)
		acquire(t, st.(backend.Store), app, "lock:nightly", owner(app, 8081, "00000000000000aa"))
		if _, err := st.AcquireQueued(t.Context(), backend.AppKey(tenant, app, "lock:nightly"), owner(app, 8082, "00000000000000bb"), time.Minute, 0, time.Minute); err == nil {
			t.Fatal("the waiter was granted the held lock")
		}

		for _, c := range []struct{ name, cmd, output string }{
			{"status", "status", "table"}, {"status-json", "status", "json"},
			{"members", "members", "table"}, {"members-json", "members", "json"},
			{"master", "master", "table"}, {"master-json", "master", "json"},
		} {
			r := fx.ctl(t, "", "--app", app, "--output", c.output, c.cmd)
			r.want(t, exitOK, c.name)
			golden(t, fx.name+"-"+c.name, r.stdout)
		}
		r := fx.ctl(t, "", "--app", app, "--output", "json", "master")
		var got statuspage.Master
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
			t.Fatalf("master --output json: %v\n%s", err, r.stdout)
		}
		if got.Epoch != m.Status().Epoch || got.ID != m.Status().Instance {
			t.Errorf("master --output json: %+v; want the master %s with epoch %d", got, m.Status().Instance, m.Status().Epoch)
		}

		// A service nobody runs: no master, no members, no locks.
		r = fx.ctl(t, "", "--app", "idle", "master")
		r.want(t, exitNo, "master of a service without one")
		golden(t, fx.name+"-master-none", r.stderr)
		r = fx.ctl(t, "", "--app", "idle", "status")
		r.want(t, exitOK, "status of a service without a master")
		golden(t, fx.name+"-status-none", r.stdout)
	})
}

// locks lists the service's leases (not the role), filtered by PREFIX,
// with holder, token, lease left and waiters, in both formats.
func TestLocks(t *testing.T) {
	eachFixture(t, func(t *testing.T, fx fixture) {
		const app = "ledger"
		service(t, fx, app)
		st := fx.newStore(t)
		acquire(t, st, app, "lock:invoice:42", owner(app, 8081, "00000000000000aa"))
		acquire(t, st, app, "job:report", owner(app, 8082, "00000000000000bb"))
		q := st.(backend.Queue)
		for _, w := range []string{"00000000000000cc", "00000000000000dd"} {
			if _, err := q.AcquireQueued(t.Context(), backend.AppKey(tenant, app, "lock:invoice:42"), owner(app, 8083, w), time.Minute, 0, time.Minute); err == nil {
				t.Fatal("a waiter was granted the held lock")
			}
		}
		for _, c := range []struct {
			name string
			args []string
		}{
			{"locks", []string{"locks"}},
			{"locks-json", []string{"--output", "json", "locks"}},
			{"locks-prefix", []string{"locks", "job:"}},
		} {
			r := fx.ctl(t, "", append([]string{"--app", app}, c.args...)...)
			r.want(t, exitOK, c.name)
			golden(t, fx.name+"-"+c.name, r.stdout)
		}
		r := fx.ctl(t, "", "--app", app, "locks", "nothing:")
		r.want(t, exitOK, "locks under a prefix nothing holds")
		if r.stdout != "" || !strings.Contains(r.stderr, "no locks held under {acme:ledger}:nothing:") {
			t.Errorf("locks nothing: stdout %q, stderr %q; want nothing and a note", r.stdout, r.stderr)
		}
	})
}

// release refuses without --force, asks for confirmation, and a forced,
// confirmed release fences the old holder out: its Renew and Release are
// refused, and the next grant's token is above its token. Releasing the
// role key makes another election happen with a larger epoch.
func TestRelease(t *testing.T) {
	eachFixture(t, func(t *testing.T, fx fixture) {
		const app = "payments"
		m, slave := service(t, fx, app)
		holder := fx.newStore(t)
		o := owner(app, 8081, "00000000000000aa")
		held := acquire(t, holder, app, "lock:settle", o)
		key := backend.AppKey(tenant, app, "lock:settle")
		still := func(what string) {
			t.Helper()
			l, err := holder.Get(t.Context(), key)
			if err != nil || l.Owner != o || l.Token != held.Token {
				t.Fatalf("%s: the lease is %+v, %v; want it untouched", what, l, err)
			}
		}

		r := fx.ctl(t, "", "--app", app, "release", "lock:settle")
		r.want(t, exitNo, "release without --force")
		golden(t, fx.name+"-release-refused", r.stderr)
		still("after the refusal")

		r = fx.ctl(t, "no\n", "--app", app, "release", "lock:settle", "--force")
		r.want(t, exitNo, "release answered no")
		golden(t, fx.name+"-release-declined", r.stderr)
		still("after the declined confirmation")

		// The prompt says "Type yes": y is not yes (it used to release).
		r = fx.ctl(t, "y\n", "--app", app, "release", "lock:settle", "--force")
		r.want(t, exitNo, "release answered y")
		if !strings.Contains(r.stderr, `the answer was "y", not yes`) {
			t.Errorf("release answered y: stderr %q; want it to say that only yes confirms", r.stderr)
		}
		still("after the answer y")

		r = fx.ctl(t, "", "--app", app, "release", "lock:settle", "--force")
		r.want(t, exitNo, "release with nothing on stdin")
		still("without a confirmation")

		r = fx.ctl(t, "yes\n", "--app", app, "release", "lock:settle", "--force")
		r.want(t, exitOK, "release confirmed")
		golden(t, fx.name+"-release-confirmed", r.stdout+"--- stderr\n"+r.stderr)
		if _, err := holder.Renew(t.Context(), key, o, time.Minute); !isNotHeld(err) {
			t.Errorf("the old holder's Renew after the forced release: %v; want ErrNotHeld", err)
		}
		if err := holder.Release(t.Context(), key, o, 0); !isNotHeld(err) {
			t.Errorf("the old holder's Release after the forced release: %v; want ErrNotHeld", err)
		}
		next := acquire(t, fx.newStore(t), app, "lock:settle", owner(app, 8082, "00000000000000bb"))
		if next.Token <= held.Token {
			t.Errorf("the next holder's token %d is not above the released %d", next.Token, held.Token)
		}

		r = fx.ctl(t, "", "--app", app, "--yes", "--force", "--output", "json", "release", "{acme:payments}:lock:settle")
		r.want(t, exitOK, "release --yes --output json of a full key")
		golden(t, fx.name+"-release-json", r.stdout)
		r = fx.ctl(t, "", "--app", app, "--yes", "--force", "release", "lock:settle")
		r.want(t, exitNo, "release of a free key")
		golden(t, fx.name+"-release-free", r.stderr)

		// A key with a waiter in line passes to it, as a release would.
		waiter := owner(app, 8083, "00000000000000cc")
		held = acquire(t, holder, app, "lock:queued", o)
		if _, err := fx.newStore(t).(backend.Queue).AcquireQueued(t.Context(), backend.AppKey(tenant, app, "lock:queued"), waiter, time.Minute, 0, time.Minute); err == nil {
			t.Fatal("the waiter was granted the held lock")
		}
		r = fx.ctl(t, "", "--app", app, "--yes", "--force", "release", "lock:queued")
		r.want(t, exitOK, "release of a key with a waiter")
		golden(t, fx.name+"-release-waiter", r.stdout)
		if l, err := holder.Get(t.Context(), backend.AppKey(tenant, app, "lock:queued")); err != nil || l.Owner != waiter || l.Token <= held.Token {
			t.Errorf("after the forced release the key is %+v, %v; want the waiter %s's with a token above %d", l, err, waiter, held.Token)
		}

		// The role: the master steps down and a new tenure begins.
		before := m.Status().Epoch
		r = fx.ctl(t, "", "--app", app, "--yes", "--force", "release", "role")
		r.want(t, exitOK, "release of the role")
		waitFor(t, "a new tenure with a larger epoch", func() bool {
			return (m.IsMaster() && m.Status().Epoch > before) || (slave.IsMaster() && slave.Status().Epoch > before)
		})
	})
}

// answerAfter is a stdin whose first Read runs before (while release
// waits for the operator's confirmation) and then reads answer.
type answerAfter struct {
	before func()
	answer io.Reader
}

func (a *answerAfter) Read(p []byte) (int, error) {
	if a.before != nil {
		a.before()
		a.before = nil
	}
	return a.answer.Read(p)
}

// release ends the lease it showed and nothing else: when the holder it
// showed released and another took the key while the operator read the
// prompt, release ends nothing, says who holds the key now and exits 4;
// the new holder keeps its lease and renews it.
func TestReleaseChangedHands(t *testing.T) {
	eachFixture(t, func(t *testing.T, fx fixture) {
		const app = "ledger"
		a, b := fx.newStore(t), fx.newStore(t)
		key := backend.AppKey(tenant, app, "lock:post")
		oa, ob := owner(app, 8081, "00000000000000aa"), owner(app, 8082, "00000000000000bb")
		shown := acquire(t, a, app, "lock:post", oa)
		var now backend.Lease
		stdin := &answerAfter{answer: strings.NewReader("yes\n"), before: func() {
			if err := a.Release(t.Context(), key, oa, 0); err != nil {
				t.Errorf("a's release while the prompt waits: %v", err)
			}
			now = acquire(t, b, app, "lock:post", ob)
		}}
		r := fx.ctlIn(t, stdin, "--app", app, "--force", "release", "lock:post")
		r.want(t, exitChanged, "release of a key that changed hands at the prompt")
		golden(t, fx.name+"-release-changed", r.stderr)
		if now.Token <= shown.Token {
			t.Fatalf("b's token %d is not above a's %d", now.Token, shown.Token)
		}
		if l, err := b.Get(t.Context(), key); err != nil || l.Owner != ob || l.Token != now.Token {
			t.Fatalf("after the release the key is %+v, %v; want b's lease (token %d) untouched", l, err, now.Token)
		}
		if _, err := b.Renew(t.Context(), key, ob, time.Minute); err != nil {
			t.Errorf("b's Renew after the release: %v; want its lease still held", err)
		}
	})
}

// watch prints the key's holder and every change of it, until its
// context ends, in both formats.
func TestWatch(t *testing.T) {
	eachFixture(t, func(t *testing.T, fx fixture) {
		for _, output := range []string{"table", "json"} {
			t.Run(output, func(t *testing.T) {
				const app = "watched"
				st := fx.newStore(t)
				key := backend.AppKey(tenant, app, "lock:"+output)
				w := startWatch(t, "--config", fx.config, "--app", app, "--output", output, "--interval", "50ms", "watch", "lock:"+output)
				lines := w.lines
				o := owner(app, 8081, "00000000000000aa")
				if _, err := st.Acquire(t.Context(), key, o, time.Minute, 0); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the line of the grant", lines(2))
				if err := st.Release(t.Context(), key, o, 0); err != nil {
					t.Fatal(err)
				}
				waitFor(t, "the line of the release", lines(3))
				golden(t, fx.name+"-watch-"+output, w.stop(t))
			})
		}
	})
}

// The command line: usage errors exit 2, help exits 0, an unreachable
// store exits 1 naming its address.
func TestCommandLine(t *testing.T) {
	fx := fixtures(t)[0]
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", []string{"--app", "x"}, exitUsage, "no command given"},
		{"unknown command", []string{"--app", "x", "purge"}, exitUsage, `unknown command "purge" (commands: functions, help, init, locks, master, members, release, status, watch)`},
		{"misspelt command", []string{"--app", "x", "stauts"}, exitUsage, `unknown command "stauts"; did you mean "status"?`},
		{"misspelt command with flags after", []string{"lock", "--app", "x"}, exitUsage, `unknown command "lock"; did you mean "locks"?`},
		{"unknown flag", []string{"--bogus", "status"}, exitUsage, "flag provided but not defined: -bogus"},
		{"bad output", []string{"--app", "x", "--output", "yaml", "status"}, exitUsage, `--output "yaml": want table or json`},
		{"bad backend", []string{"--app", "x", "--backend", "etcd", "status"}, exitUsage, `--backend "etcd": want redis or consul`},
		{"missing key", []string{"--app", "x", "release"}, exitUsage, "usage: batonctl [flags] release KEY"},
		{"extra argument", []string{"--app", "x", "master", "y"}, exitUsage, "usage: batonctl [flags] master"},
		{"no app", []string{"status"}, exitUsage, "which service? pass --app NAME"},
		{"bad key", []string{"--app", "x", "--force", "release", "{a}{b}"}, exitUsage, "at most one {hash tag}"},
		{"bad tenant", []string{"--app", "x", "--tenant", "a:b", "status"}, exitError, "instance.tenant"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := fx.ctl(t, "", c.args...)
			r.want(t, c.code, c.name)
			if !strings.Contains(r.stderr, c.want) {
				t.Errorf("stderr %q does not say %q", r.stderr, c.want)
			}
		})
	}
	t.Run("help", func(t *testing.T) {
		for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
			r := fx.ctl(t, "", args...)
			r.want(t, exitOK, strings.Join(args, " "))
			if !strings.Contains(r.stdout, "Usage: batonctl [flags] COMMAND [ARGS]") || !strings.Contains(r.stdout, "Exit codes:") {
				t.Errorf("%v: stdout does not show the usage:\n%s", args, r.stdout)
			}
		}
	})
	t.Run("credentials in addresses", func(t *testing.T) {
		const pw = "pw-in-url-5"
		r := fx.ctl(t, "", "--app", "x", "--config", writeConfig(t, "redis:\n  addrs: [\"redis://:"+pw+"@127.0.0.1:6379\"]\n"), "status")
		r.want(t, exitError, "status with a password in redis.addrs")
		if strings.Contains(r.stderr, pw) || !strings.Contains(r.stderr, "redis.password") {
			t.Errorf("stderr %q shows the password, or does not say it goes in redis.password", r.stderr)
		}
		t.Setenv("CONSUL_HTTP_ADDR", "https://user:"+pw+"@127.0.0.1:8501")
		r = fx.ctl(t, "", "--app", "x", "--backend", "consul", "status")
		r.want(t, exitError, "status with a password in CONSUL_HTTP_ADDR")
		if strings.Contains(r.stderr, pw) || !strings.Contains(r.stderr, "consul.token") {
			t.Errorf("stderr %q shows the password, or does not say where the token goes", r.stderr)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		r := testenv.NewRedis(t, testenv.RedisOptions{Config: []string{"requirepass right-pass"}})
		run := fx.ctl(t, "", "--app", "x", "--config", writeConfig(t, "redis:\n  addrs: [\""+r.Addr()+"\"]\n  password: wrong-pass-6\n"), "status")
		run.want(t, exitError, "status with a wrong password")
		if !strings.Contains(run.stderr, "authentication failed at "+r.Addr()) || !strings.Contains(run.stderr, "redis.password") ||
			strings.Contains(run.stderr, "unreachable") || strings.Contains(run.stderr, "wrong-pass-6") {
			t.Errorf("stderr %q; want an authentication failure naming redis.password, without the password", run.stderr)
		}
	})
	t.Run("unreachable", func(t *testing.T) {
		closed := closedPort(t)
		r := fx.ctl(t, "", "--app", "x", "--timeout", "2s", "--config", writeConfig(t, "redis:\n  addrs: [\"127.0.0.1:"+closed+"\"]\n"), "status")
		r.want(t, exitError, "status on a closed port")
		if !strings.Contains(r.stderr, "unreachable at 127.0.0.1:"+closed) {
			t.Errorf("stderr %q does not name the unreachable address", r.stderr)
		}
	})
}

// closedPort returns a loopback port nothing listens on: one the kernel
// picked free, closed again.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

// writeConfig writes a configuration file with text and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// watch without a key follows the role: no master, then the master an
// elector became, then no master again once it stopped.
func TestWatchRole(t *testing.T) {
	eachFixture(t, func(t *testing.T, fx fixture) {
		const app = "elected"
		w := startWatch(t, "--config", fx.config, "--app", app, "--interval", "50ms", "watch")
		lines := w.lines
		id, err := instanceid.New("127.0.0.1", tenant, app, 8081)
		if err != nil {
			t.Fatal(err)
		}
		el, err := role.NewElector(fx.newStore(t), id, roleConfig, quiet)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Start(el, el.Run)
		waitFor(t, "the line of the election", lines(2))
		sctx, scancel := context.WithTimeout(t.Context(), patience)
		defer scancel()
		if err := testenv.Stop(sctx, el); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the line of the step-down", lines(3))
		golden(t, fx.name+"-watch-role", w.stop(t))
	})
}

// The environment configures batonctl as it configures the library
// (BATON_*), and --tenant overrides instance.tenant.
func TestEnvironment(t *testing.T) {
	fx := fixtures(t)[0]
	const app = "configured"
	m := startElector(t, fx.newStore(t), app, 8081)
	waitFor(t, "master", m.IsMaster)
	t.Setenv("BATON_REDIS_ADDRS", redisServer.Addr())
	t.Setenv("BATON_INSTANCE_APP", app)
	t.Setenv("BATON_INSTANCE_TENANT", "other")
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"--tenant", tenant, "master"}, strings.NewReader(""), &out, &errOut)
	if code != exitOK || !strings.HasPrefix(out.String(), m.Status().Instance+" epoch ") {
		t.Errorf("master from the environment: exit %d, stdout %q, stderr %q; want %s", code, out.String(), errOut.String(), m.Status().Instance)
	}
	out.Reset()
	errOut.Reset()
	code = run(t.Context(), []string{"master"}, strings.NewReader(""), &out, &errOut)
	if code != exitNo || !strings.Contains(errOut.String(), "other/configured has no master") {
		t.Errorf("master of tenant other (BATON_INSTANCE_TENANT): exit %d, stderr %q; want 3 and no master", code, errOut.String())
	}
	t.Setenv("BATON_REDIS_BOGUS", "1")
	errOut.Reset()
	code = run(t.Context(), []string{"master"}, strings.NewReader(""), &out, &errOut)
	if code != exitError || !strings.Contains(errOut.String(), "BATON_REDIS_BOGUS") {
		t.Errorf("an unknown BATON_ variable: exit %d, stderr %q; want 1 naming it", code, errOut.String())
	}
}

// The Spring layout (redis.layout=spring), shared with Java instances:
// status, master and members read the Java side's role key and baton's
// members; locks cannot list the Java side's keys (exit 1, saying so);
// release ends a Java instance's lock.
func TestSpringLayout(t *testing.T) {
	const app = "legacy"
	wipe(t)
	cfg := writeConfig(t, fmt.Sprintf("instance:\n  tenant: %s\nredis:\n  addrs: [%q]\n  layout: spring\n", tenant, redisServer.Addr()))
	fx := fixture{name: "spring", config: cfg, newStore: func(t testing.TB) backend.Store {
		s, err := springredis.New(redisServer.Client(t), springredis.Layout{}, redisbackend.WithoutRestartGuard())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}}
	service(t, fx, app)
	for _, c := range []struct{ name, cmd string }{{"status", "status"}, {"master", "master"}, {"members", "members"}} {
		r := fx.ctl(t, "", "--app", app, c.cmd)
		r.want(t, exitOK, c.name)
		golden(t, "spring-"+c.name, r.stdout)
	}
	r := fx.ctl(t, "", "--app", app, "locks")
	r.want(t, exitError, "locks on the Spring layout")
	if !strings.Contains(r.stderr, "the redis (spring layout) store cannot list leases") {
		t.Errorf("locks on the Spring layout: stderr %q does not say why", r.stderr)
	}
	// A Java instance holds a synchronized lock: SET NX of the method's
	// signature with its instance ID.
	rdb := redisServer.Client(t)
	const method = "com.acme.Legacy.close()"
	if ok, err := rdb.SetNX(t.Context(), method, "10.0.0.9:acme:legacy:8080", time.Minute).Result(); err != nil || !ok {
		t.Fatalf("the Java side's SET NX: %v, %v", ok, err)
	}
	r = fx.ctl(t, "", "--app", app, "--force", "--yes", "release", "lock:"+method)
	r.want(t, exitOK, "release of a Java instance's lock")
	golden(t, "spring-release", r.stdout)
	if n, err := rdb.Exists(t.Context(), method).Result(); err != nil || n != 0 {
		t.Errorf("the Java side's key after the release: exists %d, %v; want it gone", n, err)
	}
}

// watching is a batonctl watch running on its own goroutine.
type watching struct {
	cancel      context.CancelFunc
	done        chan int
	out, errOut testenv.SyncBuffer
}

// startWatch runs batonctl with args (a watch command) until stop, and
// waits for its first line.
func startWatch(t *testing.T, args ...string) *watching {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	w := &watching{cancel: cancel, done: make(chan int, 1)}
	go func() { w.done <- run(ctx, args, strings.NewReader(""), &w.out, &w.errOut) }()
	waitFor(t, "the first line of watch", w.lines(1))
	return w
}

// lines reports whether watch has printed n lines.
func (w *watching) lines(n int) func() bool {
	return func() bool { return strings.Count(w.out.String(), "\n") >= n }
}

// stop ends the watch, checks that it exited 0, and returns its output.
func (w *watching) stop(t *testing.T) string {
	t.Helper()
	w.cancel()
	select {
	case code := <-w.done:
		if code != exitOK {
			t.Errorf("watch ended with exit code %d, want 0; stderr:\n%s", code, w.errOut.String())
		}
	case <-time.After(patience):
		t.Fatal("watch did not end with its context")
	}
	return w.out.String()
}

// A role lease, a lock and a member written into Redis by another client
// with terminal escapes and newlines in their names: master, status,
// locks and members never print them raw (the store reports them as
// corrupt, quoted, and names the key). They used to reach the
// operator's terminal as read.
func TestForgedNamesNotPrinted(t *testing.T) {
	wipe(t)
	fx := fixtures(t)[0]
	const app = "forged"
	st := fx.newStore(t).(*redisbackend.Store)
	rdb := redisServer.Client(t)
	ctx := t.Context()
	role := st.LeaseKey(backend.AppKey(tenant, app, "role"))
	lock := st.LeaseKey(backend.AppKey(tenant, app, "lock:k"))
	if err := rdb.Set(ctx, role, "1 "+hostile[:len(hostile)-len("\nline\u202e")]+"#00aa", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.Set(ctx, lock, "2 \x1b[31mred#00bb", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"master", "status", "locks", "members"} {
		r := fx.ctl(t, "", "--app", app, cmd)
		if out := r.stdout + r.stderr; strings.ContainsAny(out, "\x1b\x07") {
			t.Errorf("%s printed stored escapes raw (exit %d):\n%q", cmd, r.code, out)
		} else if r.code == exitOK {
			t.Errorf("%s: exit %d; want an error for the corrupt data:\n%s%s", cmd, r.code, r.stdout, r.stderr)
		}
	}
}
