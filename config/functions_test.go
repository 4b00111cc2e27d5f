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

// redis.functions makes cfg.RedisStore's store call baton's Redis
// functions: it fails, saying to load them, until an administrator did;
// with the Spring layout the key is refused by name.
func TestRedisFunctions(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, err := config.Load(config.Map(map[string]any{"redis.addrs": r.Addr(), "redis.functions": true}))
	if err != nil {
		t.Fatal(err)
	}
	s, err := cfg.RedisStore(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := backend.AppKey("acme", "billing", "lock", "fn")
	if _, err := s.Get(ctx, key); err == nil || !strings.Contains(err.Error(), "LoadFunctions") {
		t.Errorf("Get with redis.functions before the functions are loaded: %v; want an error that says to load them", err)
	}
	if err := redisbackend.LoadFunctions(ctx, r.Client(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Get of a free key with redis.functions once they are loaded: %v; want ErrNotFound", err)
	}

	_, err = config.Load(config.Map(map[string]any{"redis.functions": true, "redis.layout": "spring"}))
	if err == nil || !strings.Contains(err.Error(), "redis.functions") {
		t.Errorf("redis.functions with the Spring layout: %v; want an error naming redis.functions", err)
	}
}
