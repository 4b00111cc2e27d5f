package testenv_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/testkit/testenv"
)

func TestRedisServesCommands(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	if !strings.HasPrefix(r.Addr(), "127.0.0.1:") || r.Port() <= 0 {
		t.Fatalf("Addr() = %q, Port() = %d; want a loopback address", r.Addr(), r.Port())
	}
	c := r.Client(t)
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}
	if err := r.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after FlushAll = %d, %v; want 0", n, err)
	}
	// No persistence by default.
	cfg, err := c.ConfigGet(ctx, "save").Result()
	if err != nil || cfg["save"] != "" {
		t.Fatalf("CONFIG GET save = %v, %v; want empty", cfg, err)
	}
}

func TestRedisKillAndRestartOnSamePort(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	c := r.Client(t)
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	port, pid := r.Port(), r.PID()

	if err := r.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if r.Running() {
		t.Fatal("Running() after Kill = true")
	}
	assertGone(t, pid)
	short, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := c.Ping(short).Err(); err == nil {
		t.Fatal("PING succeeded on a killed server")
	}
	if err := r.Kill(); err != nil {
		t.Fatalf("second Kill: %v", err)
	}

	if err := r.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if r.Port() != port {
		t.Fatalf("port after Restart = %d, want %d", r.Port(), port)
	}
	if r.PID() == pid || r.PID() == 0 {
		t.Fatalf("PID after Restart = %d, old %d", r.PID(), pid)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k after Restart = %d, %v; want 0 (no persistence)", n, err)
	}

	// Restart of a running server stops it first.
	pid = r.PID()
	if err := r.Restart(); err != nil {
		t.Fatalf("Restart while running: %v", err)
	}
	assertGone(t, pid)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after second Restart: %v", err)
	}
}

func TestRedisAppendOnlySurvivesKill(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t, testenv.RedisOptions{AppendOnly: true})
	c := r.Client(t)
	ctx := t.Context()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if err := r.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := r.Restart(); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET after Kill+Restart = %q, %v; want v", got, err)
	}
}

func TestRedisPauseResume(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	opts := r.Options()
	opts.ContextTimeoutEnabled = true // let the 200 ms deadline bound the read
	c := redis.NewClient(opts)
	defer c.Close()
	ctx := t.Context()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Pause(); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err := c.Ping(short).Err()
	cancel()
	if err == nil {
		t.Fatal("PING answered by a paused server")
	}
	if err := r.Resume(); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	long, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Ping(long).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
}

func TestRedisStopWhilePaused(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	pid := r.PID()
	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	assertGone(t, pid)
	if err := r.Pause(); !errors.Is(err, testenv.ErrNotRunning) {
		t.Fatalf("Pause on a stopped server = %v, want ErrNotRunning", err)
	}
}

func TestRedisCloseRemovesEverything(t *testing.T) {
	t.Parallel()
	r, err := testenv.StartRedis(testenv.RedisOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pid, dir := r.PID(), r.Dir()
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	assertGone(t, pid)
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("directory %s after Close: %v; want it removed", dir, err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := r.Restart(); !errors.Is(err, testenv.ErrClosed) {
		t.Fatalf("Restart after Close = %v, want ErrClosed", err)
	}
}

func TestStartFailureReportsServerOutput(t *testing.T) {
	t.Parallel()
	r, err := testenv.StartRedis(testenv.RedisOptions{Config: []string{"no-such-directive yes"}})
	if err == nil {
		_ = r.Close()
		t.Fatal("StartRedis with a bad directive succeeded")
	}
	for _, want := range []string{"did not start", "no-such-directive"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

func TestLookPathNamesMakeDeps(t *testing.T) {
	t.Parallel()
	_, err := testenv.LookPath("baton-no-such-program")
	if !errors.Is(err, testenv.ErrBinaryNotFound) {
		t.Fatalf("LookPath = %v, want ErrBinaryNotFound", err)
	}
	if !strings.Contains(err.Error(), "baton-no-such-program not found in PATH") ||
		!strings.Contains(err.Error(), "make deps") {
		t.Fatalf("error does not say what is missing and how to fix it: %v", err)
	}
	for _, name := range []string{"redis-server", "redis-sentinel", "redis-cli"} {
		if _, err := testenv.LookPath(name); err != nil {
			t.Errorf("LookPath(%q): %v", name, err)
		}
	}
}

// assertGone fails t unless process pid no longer exists.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatalf("bad pid %d", pid)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d still exists (kill -0: %v)", pid, err)
	}
}
