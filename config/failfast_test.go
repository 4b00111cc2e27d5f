package config_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/config"
	"github.com/baton-go/baton/testkit/testenv"
)

// closedAddr returns a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// A store is pinged when it is made unless the configuration says
// otherwise: with no redis.fail-fast key, and for a Config built in Go
// whose NoFailFast is zero, a closed port is an error naming the address
// instead of a slave that waits for a Redis that is not there; with
// redis.fail-fast false the store is returned.
func TestRedisStoreFailsFastByDefault(t *testing.T) {
	addr := closedAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	loaded, err := config.Load(config.Map(map[string]any{"redis.addrs": addr}))
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]config.Config{
		"loaded":      *loaded,
		"built in Go": {Redis: config.Redis{Addrs: []string{addr}}},
	} {
		s, err := cfg.RedisStore(ctx)
		if !errors.Is(err, config.ErrUnreachable) || s != nil || !strings.Contains(err.Error(), "store unreachable at "+addr) {
			t.Errorf("%s: RedisStore on a closed port: %v, %v; want an error wrapping ErrUnreachable naming %s", name, s, err, addr)
		}
		if s, err := cfg.SpringRedisStore(ctx); !errors.Is(err, config.ErrUnreachable) || s != nil {
			t.Errorf("%s: SpringRedisStore on a closed port: %v, %v; want ErrUnreachable", name, s, err)
		}
	}

	optOut, err := config.Load(config.Map(map[string]any{"redis.addrs": addr, "redis.fail-fast": false}))
	if err != nil {
		t.Fatal(err)
	}
	s, err := optOut.RedisStore(ctx)
	if err != nil {
		t.Fatalf("RedisStore with redis.fail-fast false: %v; want a store that waits for Redis", err)
	}
	s.Close()
}

// A wrong password fails the start by default, reported as refused
// credentials ("authentication failed", backend.ErrAuth), not as a store
// out of reach and not as a slave that warns about member heartbeats.
func TestRedisStoreWrongPasswordByDefault(t *testing.T) {
	r := testenv.NewRedis(t, testenv.RedisOptions{Config: []string{"requirepass x"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := config.Load(config.Map(map[string]any{"redis.addrs": r.Addr(), "redis.password": "not-x"}))
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.RedisStore(ctx, redisbackend.WithoutRestartGuard())
	if s != nil {
		s.Close()
	}
	if !errors.Is(err, backend.ErrAuth) || errors.Is(err, config.ErrUnreachable) ||
		!strings.Contains(err.Error(), "config: authentication failed at "+r.Addr()) || strings.Contains(err.Error(), "not-x") {
		t.Fatalf("RedisStore with a wrong password: %v; want \"config: authentication failed at %s ...\" wrapping backend.ErrAuth", err, r.Addr())
	}
	cfg.Redis.Password = "x"
	s, err = cfg.RedisStore(ctx, redisbackend.WithoutRestartGuard())
	if err != nil {
		t.Fatalf("RedisStore with the right password: %v", err)
	}
	s.Close()
}

// redis.client-log takes only the values it documents.
func TestClientLogValues(t *testing.T) {
	for _, v := range []string{"debug", "off", "keep"} {
		if _, err := config.Load(config.Map(map[string]any{"redis.client-log": v})); err != nil {
			t.Errorf("redis.client-log=%s: %v", v, err)
		}
	}
	_, err := config.Load(config.Map(map[string]any{"redis.client-log": "stdout"}))
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), `config: redis.client-log=stdout: must be "debug"`) {
		t.Errorf("redis.client-log=stdout: %v; want the values it takes", err)
	}
	bad := config.Default()
	bad.Redis.ClientLog = "loud"
	if s, err := bad.RedisStore(context.Background()); !errors.Is(err, config.ErrInvalid) || s != nil {
		t.Errorf("RedisStore with ClientLog %q: %v, %v; want ErrInvalid", "loud", s, err)
	}
}

// clientLogChild is the environment variable that makes
// TestRedisClientLog's test binary the child it runs.
const clientLogChild = "BATON_TEST_CLIENT_LOG_CHILD"

// go-redis's own messages ("redis: connection pool: failed to dial ...")
// stay out of the service's log unless it asks for them: by default they
// go to slog.Default() at debug level, "off" drops them, and "keep" leaves
// go-redis's own logger, which writes them to stderr. go-redis's logger
// belongs to the process, so each case runs in a child process of its own
// and the test reads what the child wrote.
func TestRedisClientLog(t *testing.T) {
	if mode, ok := os.LookupEnv(clientLogChild); ok {
		runClientLogChild(t, mode)
		return
	}
	addr := closedAddr(t)
	for _, tc := range []struct {
		value       string // redis.client-log; "" leaves the default
		debug       bool   // the child's slog.Default() logs debug records
		wantStderr  bool   // go-redis's message on the child's stderr
		wantSlogged bool   // and in its slog output
	}{
		{value: "", debug: false},
		{value: "", debug: true, wantSlogged: true},
		{value: "off", debug: true},
		{value: "keep", debug: true, wantStderr: true},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestRedisClientLog$", "-test.count=1")
		cmd.Env = append(os.Environ(), clientLogChild+"="+tc.value, "BATON_TEST_CHILD_ADDR="+addr)
		if tc.debug {
			cmd.Env = append(cmd.Env, "BATON_TEST_CHILD_DEBUG=1")
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("client-log %q: child: %v\n%s\n%s", tc.value, err, stdout.String(), stderr.String())
		}
		const chatter = "connection pool: failed to dial"
		if got := strings.Contains(stderr.String(), chatter); got != tc.wantStderr {
			t.Errorf("client-log %q: go-redis's message on stderr: %v, want %v; stderr:\n%s", tc.value, got, tc.wantStderr, stderr.String())
		}
		slogged := strings.Contains(stdout.String(), "level=DEBUG msg=\""+chatter) && strings.Contains(stdout.String(), "component=go-redis")
		if slogged != tc.wantSlogged {
			t.Errorf("client-log %q, debug %v: go-redis's message in slog at debug level: %v, want %v; stdout:\n%s",
				tc.value, tc.debug, slogged, tc.wantSlogged, stdout.String())
		}
	}
}

// runClientLogChild makes a store on a closed port with redis.client-log
// mode and pings it, so that go-redis logs a failed dial.
func runClientLogChild(t *testing.T, mode string) {
	level := slog.LevelInfo
	if os.Getenv("BATON_TEST_CHILD_DEBUG") != "" {
		level = slog.LevelDebug
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: level})))
	keys := map[string]any{"redis.addrs": os.Getenv("BATON_TEST_CHILD_ADDR"), "redis.fail-fast": false}
	if mode != "" {
		keys["redis.client-log"] = mode
	}
	cfg, err := config.Load(config.Map(keys))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := cfg.RedisStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(ctx); !errors.Is(err, config.ErrUnreachable) {
		t.Fatalf("Ping on a closed port: %v; want ErrUnreachable", err)
	}
}
