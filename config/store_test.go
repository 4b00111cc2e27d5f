package config_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/config"
	"github.com/baton-go/baton/internal/testenv"
)

// The store options carry the key prefix and a restart guard as long as
// the longest lease the configuration keeps: on a server that has just
// started (as after a restart without its data) a free key is refused for
// about that long.
func TestRedisStoreOptions(t *testing.T) {
	r := testenv.NewRedis(t)
	for _, tc := range []struct {
		name             string
		role, hold       time.Duration
		interval         time.Duration
		longest, markers time.Duration
		prefix, want     string
	}{
		{name: "defaults", longest: 45 * time.Second, markers: 135 * time.Second, want: config.DefaultKeyPrefix},
		{name: "role TTL longest", role: 80 * time.Second, hold: 20 * time.Second, interval: 30 * time.Second,
			longest: 80 * time.Second, markers: 270 * time.Second, prefix: "cfg", want: "cfg"},
		{name: "hold longest", role: 30 * time.Second, hold: 70 * time.Second, interval: 2 * time.Second,
			longest: 70 * time.Second, markers: 30 * time.Second, want: config.DefaultKeyPrefix},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Role.HeartbeatExpiration, cfg.SyncLock.HoldDuration = tc.role, tc.hold
			if tc.interval > 0 {
				cfg.Role.HeartbeatInterval = tc.interval
			}
			if tc.prefix != "" {
				cfg.Redis.KeyPrefix = tc.prefix
			}
			store, err := redisbackend.New(r.Client(t), cfg.RedisStoreOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			if got := store.Prefix(); got != tc.want {
				t.Errorf("prefix %q, want %q", got, tc.want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			// A short ttl: the guard, not the ttl, decides how long the key
			// is refused.
			_, err = store.Acquire(ctx, "{acme:billing}:role", "o", 5*time.Second, 0)
			var held *backend.HeldError
			if !errors.As(err, &held) || !held.Recovering {
				t.Fatalf("Acquire on a server up for a moment: %v, want a recovering refusal", err)
			}
			// The server has been up for less than the test's own runtime,
			// so at least longest - 20 s is left, and at most longest plus
			// the second Redis adds for its whole-second uptime.
			if left := held.Holder.TTL; left <= tc.longest-20*time.Second || left > tc.longest+time.Second {
				t.Errorf("refused for %v more, want about the longest lease %v", left, tc.longest)
			}
			// A watch marks the key for nine heartbeat intervals, at least
			// 30 s.
			key := "{acme:billing}:lock:" + strings.ReplaceAll(tc.name, " ", "-")
			w, err := store.Watch(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			left, err := r.Client(t).PTTL(ctx, store.MarkerKey(key)).Result()
			if err != nil {
				t.Fatal(err)
			}
			if left <= tc.markers-20*time.Second || left > tc.markers {
				t.Errorf("watch marker lives %v, want %v", left, tc.markers)
			}
		})
	}
}

// ConsulStore makes a store on the agent the consul.* keys name, with
// their prefix, and refuses a role TTL or lock hold that Consul's
// sessions cannot hold, naming the key.
func TestConsulStore(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cfg := config.Default()
	cfg.Consul.Address = "http://" + a.Addr()
	cfg.Consul.KeyPrefix = "cfg-test"
	s, err := cfg.ConsulStore()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Prefix() != "cfg-test" {
		t.Errorf("prefix %q, want cfg-test", s.Prefix())
	}
	if got := backend.StoreName(s); got != "consul" {
		t.Errorf("backend.StoreName = %q, want consul", got)
	}
	// A Consul that baton never used looks like one that lost its data:
	// the guard, as long as the longest configured lease, refuses keys.
	_, err = s.Acquire(ctx, backend.AppKey("acme", "billing", "role"), "me", cfg.Role.HeartbeatExpiration, 0)
	if held, ok := errors.AsType[*backend.HeldError](err); !ok || !held.Recovering || held.Holder.TTL != 45*time.Second {
		t.Fatalf("first Acquire on a fresh agent: %v; want a Recovering refusal for the 45s restart guard", err)
	}
	if _, err := s.Acquire(ctx, backend.AppKey("acme", "billing", "short"), "me", 5*time.Second, 0); !errors.Is(err, backend.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "session_ttl_min") {
		t.Errorf("Acquire for 5s under a 10s session minimum: %v; want ErrInvalidArgument naming session_ttl_min", err)
	}

	short := config.Default()
	short.Role.HeartbeatInterval, short.Role.HeartbeatExpiration = 2*time.Second, 5*time.Second
	short.SyncLock.HoldDuration = 3 * time.Second
	_, err = short.ConsulStore()
	if !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("ConsulStore with a 5s role TTL and a 3s hold under a 10s session minimum: %v; want ErrInvalid", err)
	}
	for _, key := range []string{"scheduler-lock.heartbeat-expiration-duration-in-seconds=5", "synchronized-lock.hold-duration-in-seconds=3"} {
		if !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "consul.session-ttl-min-in-seconds") {
			t.Errorf("ConsulStore error %q does not name %s and the session minimum", err, key)
		}
	}
	short.Consul.SessionTTLMin = 2 * time.Second
	s2, err := short.ConsulStore()
	if err != nil {
		t.Fatalf("the same with a 2s session minimum: %v", err)
	}
	s2.Close()
}

// APIConfig maps the consul.* keys onto the client's configuration.
func TestConsulAPIConfig(t *testing.T) {
	c := config.Consul{Address: "https://consul.internal:8501", Token: "t", Datacenter: "dc2",
		CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"}
	got := c.APIConfig()
	if got.Address != "consul.internal:8501" || got.Scheme != "https" || got.Token != "t" || got.Datacenter != "dc2" ||
		got.TLSConfig.CAFile != "ca.pem" || got.TLSConfig.CertFile != "c.pem" || got.TLSConfig.KeyFile != "k.pem" {
		t.Errorf("APIConfig() = %+v", got)
	}
	if got := (config.Consul{Address: "10.0.0.1:8500", TLS: true}).APIConfig(); got.Address != "10.0.0.1:8500" || got.Scheme != "https" {
		t.Errorf("host:port with consul.tls: address %q scheme %q, want 10.0.0.1:8500 https", got.Address, got.Scheme)
	}
	if s := c.String(); strings.Contains(s, "consul.token=t ") || !strings.Contains(s, "consul.token=<redacted>") {
		t.Errorf("String() = %q: the token must be redacted", s)
	}
}
