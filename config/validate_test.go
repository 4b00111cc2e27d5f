package config_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/config"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/synclock"
)

// onlyProblem loads in and checks that the one problem names key, shows
// value and gives a reason holding every part of want.
func onlyProblem(t *testing.T, in map[string]any, key, value string, want ...string) {
	t.Helper()
	_, err := config.Load(config.Map(in))
	ps := problems(t, err)
	if len(ps) != 1 {
		t.Fatalf("%v: %d problems, want 1:\n%v", in, len(ps), err)
	}
	p := ps[0]
	if p.Key != key || p.Value != value {
		t.Errorf("%v: problem %s=%s; want %s=%s", in, p.Key, p.Value, key, value)
	}
	for _, w := range want {
		if !strings.Contains(p.Reason, w) {
			t.Errorf("%v: reason %q does not say %q", in, p.Reason, w)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("%v: one problem in more than one line:\n%s", in, err)
	}
}

// A lease no store holds is refused by Load under its key, with the limit
// in the key's unit and in days, as role, synclock and schedlock refuse
// it; a duration below a millisecond is refused rather than rounded; and
// durations that are no lease are bounded too.
func TestDurationLimits(t *testing.T) {
	const year = 365 * 24 * 3600
	onlyProblem(t, map[string]any{expiration: 400 * 24 * 3600}, expiration, "34560000",
		"must be at most 31536000 (365 days)", "no store holds a longer lease")
	onlyProblem(t, map[string]any{hold: year + 1}, hold, "31536001", "must be at most 31536000 (365 days)")
	onlyProblem(t, map[string]any{"job-lock.default-lock-at-most-for": "9000h"}, "job-lock.default-lock-at-most-for", "9000h0m0s",
		"must be at most 365 days")
	onlyProblem(t, map[string]any{"job-lock.default-lock-at-most-for": "500us"}, "job-lock.default-lock-at-most-for", "500µs",
		"must be at least 1ms", "whole milliseconds")
	onlyProblem(t, map[string]any{"job-lock.default-lock-at-least-for": "P400D"}, "job-lock.default-lock-at-least-for", "9600h0m0s",
		"must be at most 365 days")
	onlyProblem(t, map[string]any{retry: int64(year+1) * 1000}, retry, "31536001000", "must be at most 31536000000 (365 days)")
	onlyProblem(t, map[string]any{"redis.read-timeout-in-milliseconds": int64(1) << 40}, "redis.read-timeout-in-milliseconds",
		"1099511627776", "must be at most 31536000000 (365 days)")
	// 2 x interval overflowed and passed.
	onlyProblem(t, map[string]any{interval: int64(1) << 62 / 1e6}, interval, "4611686018427", "must be less than half of "+expiration)
	// A year exactly is fine everywhere.
	if _, err := config.Load(config.Map(map[string]any{expiration: year, interval: 1000, hold: year, "job-lock.default-lock-at-most-for": "P365D"})); err != nil {
		t.Errorf("a year: %v", err)
	}
	// Consul's sessions hold a day at most: CheckConsul (which
	// consulconfig.Store calls first) says so under the key, instead of
	// the store failing on its restart guard.
	long := config.Default()
	long.Role.HeartbeatExpiration = 48 * time.Hour
	if err := long.CheckConsul(); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), expiration+"=172800: must be at most 86400 (1 day) with Consul") {
		t.Errorf("CheckConsul with a 2-day role TTL: %v; want an *Error naming %s and Consul's limit", err, expiration)
	}
	// Validate, for a Config built in Go, too.
	c := config.Config{Role: role.Config{HeartbeatExpiration: 366 * 24 * time.Hour}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), expiration+"=31622400: must be at most 31536000 (365 days)") {
		t.Errorf("Validate of a 366-day role TTL: %v", err)
	}
}

// Sizes and counts are bounded: a pool of a billion connections used to
// exhaust the process's memory in go-redis; retries that add up to more
// than a year of waiting overflowed.
func TestSizeLimits(t *testing.T) {
	onlyProblem(t, map[string]any{"redis.pool-size": 1000000000}, "redis.pool-size", "1000000000", "must be in 0..10000")
	onlyProblem(t, map[string]any{maxRetries: int64(1) << 40}, maxRetries, "1099511627776",
		"must be at most 31536000", "365 days")
	onlyProblem(t, map[string]any{maxRetries: 400 * 24 * 3600, retry: 1000}, maxRetries, "34560000", "must be at most 31536000")
	if _, err := config.Load(config.Map(map[string]any{"redis.pool-size": config.MaxPoolSize, maxRetries: 1000})); err != nil {
		t.Errorf("the largest pool: %v", err)
	}
	// A Config built in Go never reaches go-redis with such a pool.
	c := config.Default()
	c.Redis.PoolSize = 1000000000
	if s, err := c.RedisStore(context.Background()); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "redis.pool-size") {
		if s != nil {
			s.Close()
		}
		t.Errorf("RedisStore with a pool of a billion: %v; want an *Error naming redis.pool-size", err)
	}
	c = config.Config{SyncLock: synclock.Config{MaxRetries: 1 << 40}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), maxRetries) {
		t.Errorf("Validate of 2^40 retries: %v", err)
	}
}

// Glob characters, braces and spaces in a key prefix are refused by Load,
// naming the key and the character, and by the store constructors.
func TestKeyPrefixCharacters(t *testing.T) {
	for prefix, want := range map[string]string{
		"bat[on": "holds '[', a glob character",
		"b?ton":  "holds '?', a glob character",
		"svc*":   "holds '*', a glob character",
		"bat on": "holds ' '",
		"a{b":    "must not contain '{' or '}'",
	} {
		for _, key := range []string{"redis.key-prefix", "consul.key-prefix"} {
			_, err := config.Load(config.Map(map[string]any{key: prefix}))
			ps := problems(t, err)
			if len(ps) != 1 || ps[0].Key != key || !strings.Contains(ps[0].Reason, want) || !strings.Contains(ps[0].Reason, backend.KeyPrefixChars) {
				t.Errorf("%s=%q: %v; want one problem saying %q and %q", key, prefix, err, want, backend.KeyPrefixChars)
			}
		}
	}
	for _, ok := range []string{"acme-baton", "team_a.prod:baton", "acme/baton"} {
		if _, err := config.Load(config.Map(map[string]any{"redis.key-prefix": ok, "consul.key-prefix": ok})); err != nil {
			t.Errorf("prefix %q: %v", ok, err)
		}
	}
	c := config.Default()
	c.Redis.KeyPrefix = "svc*"
	if s, err := c.RedisStore(context.Background()); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "redis.key-prefix") {
		if s != nil {
			s.Close()
		}
		t.Errorf("RedisStore with prefix svc*: %v; want an *Error naming redis.key-prefix", err)
	}
	c = config.Default()
	c.Consul.KeyPrefix = "b?ton"
	if err := c.CheckConsul(); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "consul.key-prefix") {
		t.Errorf("CheckConsul with prefix b?ton: %v; want an *Error naming consul.key-prefix", err)
	}
}

// An address with credentials is refused without showing the password,
// saying which key the password goes in; nothing else shows it either.
func TestCredentialsInAddresses(t *testing.T) {
	const pw = "pw-in-url-4"
	onlyProblem(t, map[string]any{"redis.addrs": "redis://:" + pw + "@host:6379"}, "redis.addrs", "redis://:<redacted>@host:6379",
		"holds credentials", "redis.password")
	onlyProblem(t, map[string]any{"redis.addrs": "10.0.0.1:6379,user:" + pw + "@10.0.0.2:6379", "redis.master-name": "m"}, "redis.addrs",
		"10.0.0.1:6379,user:<redacted>@10.0.0.2:6379", "redis.password", "redis.sentinel-password")
	onlyProblem(t, map[string]any{"consul.address": "https://user:" + pw + "@host"}, "consul.address", "https://user:<redacted>@host",
		"holds credentials", "consul.token")
	// A wrong type, a typo of the key and a key set twice show the value
	// too.
	for _, in := range []map[string]any{
		{"redis.adrs": "redis://:" + pw + "@host:6379"},
		{"consul.address": []string{"https://user:" + pw + "@host"}},
		{"redis": map[string]any{"addrs": "u:" + pw + "@h:1"}, "redis.addrs": "u:" + pw + "@h:2"},
	} {
		_, err := config.Load(config.Map(in))
		if err == nil || strings.Contains(err.Error(), pw) {
			t.Errorf("%v: %v; want an error without the password", in, err)
		}
	}
	// A Config built in Go: the stores refuse it, and printing, logging
	// and JSON hide the password.
	c := config.Default()
	c.Redis.Addrs = []string{"redis://:" + pw + "@127.0.0.1:6379"}
	c.Consul.Address = "https://user:" + pw + "@127.0.0.1:8501"
	if s, err := c.RedisStore(context.Background()); err == nil || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "redis.password") {
		if s != nil {
			s.Close()
		}
		t.Errorf("RedisStore: %v; want an error saying where the password goes, without it", err)
	}
	if err := c.CheckConsul(); err == nil || strings.Contains(err.Error(), pw) || !strings.Contains(err.Error(), "consul.token") {
		t.Errorf("CheckConsul: %v; want an error saying where the token goes, without the password", err)
	}
	js, _ := json.Marshal(c)
	for name, out := range map[string]string{"String": c.String(), "Where": c.Redis.Where(), "json": string(js), "Validate": c.Validate().Error()} {
		if strings.Contains(out, pw) {
			t.Errorf("%s shows the password: %s", name, out)
		}
	}
}
