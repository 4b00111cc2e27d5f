package main

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/testkit/consultest"
	"github.com/baton-go/baton/testkit/storetest"
)

// ctlArgs runs batonctl with args alone: no configuration file.
func ctlArgs(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, args, strings.NewReader(""), &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// A service on a store with a key prefix of its own (as examples/http
// makes) is reached with --redis or --consul and --prefix alone, no
// configuration file; the output names the store's keys, prefix
// included; without --prefix, master says which key it looked at and
// points at the flags. batonctl had no such flags, and printed keys
// without their prefix.
func TestConnectionFlags(t *testing.T) {
	wipe(t)
	const app, prefix = "hidden", "hidden-prefix"
	for _, c := range []struct {
		name, flag, addr, storeKey string
		newStore                   func(t testing.TB) backend.Store
	}{
		{"redis", "--redis", redisServer.Addr(), prefix + ":{acme:hidden}:lock:x", func(t testing.TB) backend.Store {
			return storetest.Redis(t, redisServer, redisbackend.WithPrefix(prefix))
		}},
		{"consul", "--consul", consulServer.Addr(), prefix + "/lease/{acme:hidden}:lock:x", func(t testing.TB) backend.Store {
			return consultest.Consul(t, consulServer, consulbackend.WithPrefix(prefix))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, _ := service(t, fixture{newStore: c.newStore}, app)
			acquire(t, c.newStore(t), app, "lock:x", owner(app, 8081, "00000000000000aa"))
			flags := []string{c.flag, c.addr, "--prefix", prefix, "--tenant", tenant, "--app", app}

			r := ctlArgs(t, append(flags, "master")...)
			r.want(t, exitOK, "master with "+c.flag+" and --prefix")
			if !strings.HasPrefix(r.stdout, m.Status().Instance+" epoch ") {
				t.Errorf("master: %q; want %s", r.stdout, m.Status().Instance)
			}
			r = ctlArgs(t, append(flags, "locks")...)
			r.want(t, exitOK, "locks with "+c.flag+" and --prefix")
			if !strings.Contains(r.stdout, c.storeKey+" ") {
				t.Errorf("locks does not show the store's key %s:\n%s", c.storeKey, r.stdout)
			}
			// The key as the output shows it names the lock to release.
			r = ctlArgs(t, append(flags, "--output", "json", "--force", "--yes", "release", c.storeKey)...)
			r.want(t, exitOK, "release of the store key")
			if !strings.Contains(r.stdout, `"key": "{acme:hidden}:lock:x"`) {
				t.Errorf("release %s did not release {acme:hidden}:lock:x:\n%s", c.storeKey, r.stdout)
			}

			r = ctlArgs(t, c.flag, c.addr, "--tenant", tenant, "--app", app, "master")
			r.want(t, exitNo, "master without --prefix")
			if !strings.Contains(r.stderr, "baton") || !strings.Contains(r.stderr, "--prefix") {
				t.Errorf("master without --prefix: stderr %q; want the key it looked at and a pointer to --prefix", r.stderr)
			}
		})
	}
	t.Run("with a configuration file", func(t *testing.T) {
		// --redis wins over redis.addrs, as --app over instance.app.
		fx := fixtures(t)[0]
		m := startElector(t, storetest.Redis(t, redisServer, redisbackend.WithPrefix(prefix)), app, 8081)
		waitFor(t, "master", m.IsMaster)
		cfg := writeConfig(t, "instance:\n  tenant: acme\nredis:\n  addrs: [\"127.0.0.1:"+closedPort(t)+"\"]\n")
		r := fx.ctl(t, "", "--config", cfg, "--redis", redisServer.Addr(), "--prefix", prefix, "--app", app, "master")
		r.want(t, exitOK, "master with --config, --redis and --prefix")
	})
}

// The flags that name a store must agree.
func TestConnectionFlagsConflict(t *testing.T) {
	for _, args := range [][]string{
		{"--redis", "127.0.0.1:1", "--consul", "127.0.0.1:2"},
		{"--redis", "127.0.0.1:1", "--backend", "consul"},
		{"--consul", "127.0.0.1:2", "--backend", "redis"},
	} {
		r := ctlArgs(t, append(args, "--app", "x", "status")...)
		r.want(t, exitUsage, strings.Join(args, " "))
	}
}

// deadServer accepts connections and never answers, as a stopped server
// does; it returns its address.
func deadServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// --timeout is the longest wait for a store that does not answer: its
// default, 5s, is what the help says, and a longer --timeout waits that
// long. The help said 10s where such a server failed after 5s (the Redis
// client's read timeout), and a --timeout above 5s changed nothing.
func TestTimeout(t *testing.T) {
	r := ctlArgs(t, "help")
	if !strings.Contains(r.stdout, "(default 5s)") || strings.Contains(r.stdout, "10s") {
		t.Errorf("the help does not give --timeout's default as 5s:\n%s", r.stdout)
	}
	dead := deadServer(t)
	cfg := writeConfig(t, "redis:\n  addrs: [\""+dead+"\"]\n")
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, defaultTimeout},
		{[]string{"--timeout", "7s"}, 7 * time.Second},
	} {
		start := time.Now()
		r := ctlArgs(t, append(c.args, "--config", cfg, "--app", "x", "status")...)
		took := time.Since(start)
		r.want(t, exitError, "status on a server that does not answer")
		if took < c.want-100*time.Millisecond || took > c.want+patience/2 {
			t.Errorf("status %v on a server that does not answer failed after %v; want %v", c.args, took, c.want)
		}
		if !strings.Contains(r.stderr, dead) {
			t.Errorf("stderr %q does not name the address %s", r.stderr, dead)
		}
	}
}
