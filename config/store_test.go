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
	"github.com/baton-go/baton/testkit/testenv"
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
