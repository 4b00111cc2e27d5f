package config_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/config"
	"github.com/baton-go/baton/testkit/testenv"
)

// RedisStore turns the redis.* keys into a ready store: the key prefix
// reaches the keys written (it used to reach only RedisStoreOptions, which
// the README's quick start did not pass), and the timeouts and pool size
// reach the client, with ContextTimeoutEnabled on. Close closes the client
// too.
func TestRedisStoreFromConfig(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := config.Load(config.Map(map[string]any{
		"redis.addrs": r.Addr(), "redis.key-prefix": "acme-baton", "redis.pool-size": 3,
		"redis.dial-timeout-in-milliseconds": 1500, "redis.read-timeout-in-milliseconds": 700,
		"redis.write-timeout-in-milliseconds": 800, "redis.fail-fast": "on",
	}))
	if err != nil {
		t.Fatal(err)
	}
	// A server that has just started refuses grants for the restart
	// guard; this test is about the keys, so it turns the guard off.
	s, err := cfg.RedisStore(ctx, redisbackend.WithoutRestartGuard())
	if err != nil {
		t.Fatal(err)
	}
	var _ backend.Store = s
	if got := backend.StoreName(s); got != "redis" {
		t.Errorf("backend.StoreName = %q, want redis: logs would say backend=%s", got, got)
	}
	o := s.Client.(*redis.Client).Options()
	if o.PoolSize != 3 || o.DialTimeout != 1500*time.Millisecond || o.ReadTimeout != 700*time.Millisecond ||
		o.WriteTimeout != 800*time.Millisecond || !o.ContextTimeoutEnabled {
		t.Errorf("client options: pool %d, dial %v, read %v, write %v, context timeouts %v",
			o.PoolSize, o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled)
	}
	key := backend.AppKey("acme", "billing", "lock", "wired")
	if _, err := s.Acquire(ctx, key, "me", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	raw := r.Client(t)
	if n, err := raw.Exists(ctx, "acme-baton:"+key).Result(); err != nil || n != 1 {
		t.Errorf("key acme-baton:%s exists %d, %v; the prefix did not reach the store", key, n, err)
	}
	if n, _ := raw.Exists(ctx, "baton:"+key).Result(); n != 0 {
		t.Errorf("key written under the default prefix")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.Ping(ctx).Err(); !errors.Is(err, redis.ErrClosed) {
		t.Errorf("Ping after Close: %v; want the client closed", err)
	}
}

// With redis.fail-fast a store nobody answers for is an error naming the
// address; without it the store is returned and waits for Redis.
func TestRedisStoreFailFast(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	cfg, err := config.Load(config.Map(map[string]any{"redis.addrs": addr, "redis.fail-fast": true}))
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.RedisStore(ctx)
	if !errors.Is(err, config.ErrUnreachable) || s != nil {
		t.Fatalf("RedisStore with fail-fast on a closed port: %v, %v; want ErrUnreachable", s, err)
	}
	if want := "config: store unreachable at " + addr + " (redis.addrs): "; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q does not start with %q", err, want)
	}

	cfg.Redis.NoFailFast = true
	s, err = cfg.RedisStore(ctx)
	if err != nil {
		t.Fatalf("RedisStore without fail-fast: %v", err)
	}
	defer s.Close()
	if err := s.Ping(ctx); !errors.Is(err, config.ErrUnreachable) {
		t.Errorf("Ping: %v; want ErrUnreachable", err)
	}
}

// InstanceID reads the instance.* keys after Load, so the environment
// counts (the quick start used to detect the ID before loading, and
// BATON_INSTANCE_PORT was ignored); a missing key is named.
func TestInstanceIDFromConfig(t *testing.T) {
	clearEnv(t)
	t.Setenv("BATON_INSTANCE_PORT", "9090")
	t.Setenv("BATON_INSTANCE_IP", "10.0.0.7")
	cfg, err := config.Load(config.Map(map[string]any{"instance": map[string]any{"app": "billing", "port": 8080}}), config.Env("BATON_"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := cfg.InstanceID()
	if err != nil || id.String() != "10.0.0.7:default:billing:9090" {
		t.Fatalf("InstanceID = %v, %v; want 10.0.0.7:default:billing:9090", id, err)
	}

	_, err = config.Default().InstanceID()
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "config: instance.app=\"\": must be set to build the instance ID (env BATON_INSTANCE_APP") ||
		!strings.Contains(err.Error(), "config: instance.port=0: must be set") {
		t.Errorf("InstanceID without app and port: %v", err)
	}
}

// The instance.* values are checked by instanceid's rules at Load, under
// their keys, not first when the ID is built.
func TestInstanceKeysValidatedAtLoad(t *testing.T) {
	for _, tc := range []struct {
		key, value, want string
	}{
		{"instance.app", "bill:ing", `config: instance.app=bill:ing: app "bill:ing" contains ':'`},
		{"instance.tenant", "ac me", `config: instance.tenant="ac me": tenant "ac me" contains U+0020`},
		{"instance.app", strings.Repeat("a", 65), "more than 64"},
		{"instance.ip", "0.0.0.0", "config: instance.ip=0.0.0.0: ip \"0.0.0.0\" is unspecified"},
		{"instance.advertise-address", "consul.local:8500", "config: instance.advertise-address=consul.local:8500:"},
	} {
		_, err := config.Load(config.Map(map[string]any{tc.key: tc.value}))
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q: %v; want %q", tc.key, tc.value, err, tc.want)
		}
	}
}

// The topology follows the configuration: Sentinel with
// redis.master-name, Cluster with several addresses. The store works on
// each (fail-fast pings through the Sentinels and the cluster), and the
// key prefix reaches the keys written.
func TestRedisStoreTopologies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sen := testenv.NewSentinel(t)
	cl := testenv.NewCluster(t)
	if err := cl.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		keys  map[string]any
		check func(t *testing.T, key string)
	}{
		{"sentinel", map[string]any{"redis.addrs": sen.SentinelAddrs(), "redis.master-name": sen.MasterName()}, func(t *testing.T, key string) {
			m, err := sen.Master(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n, err := m.Client(t).Exists(ctx, key).Result(); err != nil || n != 1 {
				t.Errorf("%s on the Sentinel master: exists %d, %v", key, n, err)
			}
		}},
		{"cluster", map[string]any{"redis.addrs": cl.Addrs()}, func(t *testing.T, key string) {
			if n, err := cl.ClusterClient(t).Exists(ctx, key).Result(); err != nil || n != 1 {
				t.Errorf("%s in the cluster: exists %d, %v", key, n, err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.keys["redis.key-prefix"], tc.keys["redis.fail-fast"] = "topo", true
			cfg, err := config.Load(config.Map(tc.keys))
			if err != nil {
				t.Fatal(err)
			}
			s, err := cfg.RedisStore(ctx, redisbackend.WithoutRestartGuard())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := backend.StoreName(s); got != tc.name {
				t.Errorf("backend.StoreName = %q, want %q: logs would name the wrong store", got, tc.name)
			}
			key := backend.AppKey("acme", "billing", "lock", tc.name)
			if _, err := s.Acquire(ctx, key, "me", time.Minute, 0); err != nil {
				t.Fatal(err)
			}
			tc.check(t, "topo:"+key)
		})
	}
}

// redis.layout spring makes the store of a mixed Java/Go fleet: the job
// lock lands on ShedLock's key with the configured environment and
// prefix, the role on the app's name. RedisStore refuses that layout, so a
// config switched to it cannot silently keep baton's keys.
func TestSpringRedisStoreFromConfig(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := config.Load(config.Map(map[string]any{
		"redis.addrs": r.Addr(), "redis.layout": "spring", "redis.fail-fast": true,
		"redis.shedlock-environment": "prod", "redis.shedlock-key-prefix": "shedlock",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.RedisStore(ctx); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "SpringRedisStore") {
		t.Fatalf("RedisStore with redis.layout spring: %v; want an error naming SpringRedisStore", err)
	}
	s, err := cfg.SpringRedisStore(ctx, redisbackend.WithoutRestartGuard())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := backend.StoreName(s); got != "spring" {
		t.Errorf("backend.StoreName = %q, want spring", got)
	}
	raw := r.Client(t)
	for key, want := range map[string]string{
		backend.AppKey("acme", "billing", "job", "export"): "shedlock:prod:export",
		backend.AppKey("acme", "billing", "role"):          "billing",
	} {
		if _, err := s.Acquire(ctx, key, "10.0.0.7:acme:billing:8080#n", time.Minute, 0); err != nil {
			t.Fatal(err)
		}
		if n, err := raw.Exists(ctx, want).Result(); err != nil || n != 1 {
			t.Errorf("the lease of %s is not at the Java side's key %s (%d, %v)", key, want, n, err)
		}
	}
}

// redis.layout takes baton or spring, and spring not with a Cluster.
func TestLayoutChecked(t *testing.T) {
	for name, m := range map[string]map[string]any{
		"unknown layout":           {"redis.layout": "java"},
		"spring on a Cluster":      {"redis.layout": "spring", "redis.cluster": true},
		"environment with a space": {"redis.shedlock-environment": "a b"},
		"empty key prefix":         {"redis.shedlock-key-prefix": ""},
	} {
		_, err := config.Load(config.Map(m))
		if !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%s: %v; want ErrInvalid", name, err)
		}
	}
}

// A wrong password, or none where the server wants one, is reported as
// refused credentials naming the keys to fix, not as a store out of
// reach; the store's own calls say so too. The password shows nowhere.
func TestRedisStoreWrongPassword(t *testing.T) {
	const pw = "wrong-pass-8"
	r := testenv.NewRedis(t, testenv.RedisOptions{Config: []string{"requirepass right-pass"}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, password := range []string{pw, ""} {
		cfg, err := config.Load(config.Map(map[string]any{"redis.addrs": r.Addr(), "redis.password": password, "redis.fail-fast": true}))
		if err != nil {
			t.Fatal(err)
		}
		s, err := cfg.RedisStore(ctx)
		if !errors.Is(err, backend.ErrAuth) || errors.Is(err, config.ErrUnreachable) || s != nil ||
			!strings.Contains(err.Error(), "authentication failed at "+r.Addr()) || !strings.Contains(err.Error(), "redis.password") ||
			strings.Contains(err.Error(), pw) {
			t.Errorf("RedisStore with password %q: %v; want an authentication failure naming the address and redis.password", password, err)
		}
		cfg.Redis.NoFailFast = true
		s, err = cfg.RedisStore(ctx, redisbackend.WithoutRestartGuard())
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Acquire(ctx, backend.AppKey("acme", "billing", "role"), "me", time.Minute, 0)
		if !errors.Is(err, backend.ErrAuth) || !strings.Contains(err.Error(), "redis.password") || strings.Contains(err.Error(), pw) {
			t.Errorf("Acquire with password %q: %v; want an error wrapping backend.ErrAuth naming redis.password", password, err)
		}
		s.Close()
	}
}
