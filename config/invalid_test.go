package config_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/config"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/synclock"
)

const (
	enabled    = "scheduler-lock.enabled"
	interval   = "scheduler-lock.touch-heartbeat-interval-in-milliseconds"
	expiration = "scheduler-lock.heartbeat-expiration-duration-in-seconds"
	margin     = "scheduler-lock.safety-margin-in-milliseconds"
	lockOn     = "synchronized-lock.enabled"
	retry      = "synchronized-lock.retry-interval-in-milliseconds"
	hold       = "synchronized-lock.hold-duration-in-seconds"
	maxRetries = "synchronized-lock.max-retries"
	claim      = "synchronized-lock.claim-window-in-milliseconds"
)

// TestInvalid checks that each bad input yields exactly one problem that
// names the key and the value and says why.
func TestInvalid(t *testing.T) {
	tests := []struct {
		name   string
		in     map[string]any
		key    string
		value  string
		reason string
	}{
		// Unknown keys and structure.
		{"typo", map[string]any{"scheduler-lock.heartbeat-expiration-duration-in-second": 45},
			"scheduler-lock.heartbeat-expiration-duration-in-second", "45",
			"unknown key; did you mean scheduler-lock.heartbeat-expiration-duration-in-seconds?"},
		{"typo nested", map[string]any{"redis": map[string]any{"key-prefx": "x"}},
			"redis.key-prefx", "x", "unknown key; did you mean redis.key-prefix?"},
		{"unknown section", map[string]any{"schedulr-lock": map[string]any{"enabled": true}},
			"schedulr-lock", "{enabled}", "unknown key; did you mean scheduler-lock?"},
		{"unrelated key", map[string]any{"spring.application.name": "billing"},
			"spring.application.name", "billing", "unknown key"},
		{"secret typo redacted", map[string]any{"redis.pasword": "hunter2"},
			"redis.pasword", "<redacted>", "unknown key; did you mean redis.password?"},
		{"section as value", map[string]any{"redis": 5},
			"redis", "5", "is a section, not a value; set the keys under it, such as redis.addrs"},
		{"map as value", map[string]any{"redis.db": map[string]any{"x": 1}},
			"redis.db", "{x}", "must be a whole number, not a map"},
		{"set twice", map[string]any{"redis.db": 1, "redis": map[string]any{"db": 2}},
			"redis.db", "2 and 1", "is set twice in one source"},

		// Wrong types.
		{"bool maybe", map[string]any{enabled: "maybe"}, enabled, "maybe", "must be true or false"},
		{"bool number", map[string]any{lockOn: 1}, lockOn, "1", "must be true or false"},
		{"tls maybe", map[string]any{"redis.tls": "maybe"}, "redis.tls", "maybe", "must be true or false (or yes/no, on/off, 1/0)"},
		{"int abc", map[string]any{interval: "abc"}, interval, "abc", "must be a whole number of milliseconds"},
		{"seconds abc", map[string]any{hold: "abc"}, hold, "abc", "must be a whole number of seconds"},
		{"int fraction", map[string]any{interval: 1.5}, interval, "1.5", "must be a whole number of milliseconds"},
		{"duration text", map[string]any{interval: "15s"}, interval, "15s",
			"must be a whole number of milliseconds, not a duration (write 15000 for 15s)"},
		{"iso duration text", map[string]any{expiration: "PT1M"}, expiration, "PT1M",
			"must be a whole number of seconds, not a duration (write 60 for 1m0s)"},
		{"time.Duration", map[string]any{retry: 2 * time.Second}, retry, "2s",
			"is a time.Duration; give a whole number of milliseconds (write 2000 for 2s)"},
		{"too large", map[string]any{interval: int64(1) << 62}, interval, "4611686018427387904",
			"is too large for a duration in milliseconds"},
		{"too large text", map[string]any{hold: "99999999999999999999"}, hold, "99999999999999999999",
			"is too large for a duration in seconds"},
		{"max-retries text", map[string]any{maxRetries: "x"}, maxRetries, "x", "must be a whole number"},
		{"db huge", map[string]any{"redis.db": uint64(1) << 63}, "redis.db", "9223372036854775808", "is too large"},
		{"port text", map[string]any{"instance.port": "http"}, "instance.port", "http", "must be a whole number"},
		{"app number", map[string]any{"instance.app": 123}, "instance.app", "123", "must be a string; quote the value"},
		{"password number redacted", map[string]any{"redis.password": 123456}, "redis.password", "<redacted>",
			"must be a string; quote the value"},
		{"token bool redacted", map[string]any{"consul.token": true}, "consul.token", "<redacted>",
			"must be a string; quote the value"},
		{"addrs number", map[string]any{"redis.addrs": 6379}, "redis.addrs", "6379",
			"must be a list of strings or one comma-separated string"},
		{"addrs item number", map[string]any{"redis.addrs": []any{"a:1", 2}}, "redis.addrs", "[a:1, 2]",
			"item 2 is not a string"},
		{"addrs empty item", map[string]any{"redis.addrs": "a:1,,b:2"}, "redis.addrs", "a:1,,b:2", "item 2 is empty"},

		// Durations out of range.
		{"interval zero", map[string]any{interval: 0}, interval, "0", "must be positive"},
		{"interval negative", map[string]any{interval: -5}, interval, "-5", "must be positive"},
		{"expiration zero", map[string]any{expiration: "0"}, expiration, "0", "must be positive"},
		{"expiration negative", map[string]any{expiration: -45}, expiration, "-45", "must be positive"},
		{"margin zero", map[string]any{margin: 0}, margin, "0", "must be positive"},
		{"margin negative", map[string]any{margin: -1}, margin, "-1", "must be positive"},
		{"retry zero", map[string]any{retry: 0}, retry, "0", "must be positive"},
		{"hold zero", map[string]any{hold: 0}, hold, "0", "must be positive"},
		{"hold negative", map[string]any{hold: -1}, hold, "-1", "must be positive"},
		{"max-retries negative", map[string]any{maxRetries: -1}, maxRetries, "-1", "must not be negative"},
		{"claim window zero", map[string]any{claim: 0}, claim, "0", "must be positive"},

		// Rules between keys.
		{"claim window past the default hold", map[string]any{claim: 50000}, claim, "50000",
			"must not exceed synchronized-lock.hold-duration-in-seconds (45000 ms)"},
		{"claim window past the hold", map[string]any{claim: 5000, hold: 4}, claim, "5000",
			"must not exceed synchronized-lock.hold-duration-in-seconds (4000 ms)"},
		{"interval not below half", map[string]any{interval: 30000}, interval, "30000",
			"must be less than half of scheduler-lock.heartbeat-expiration-duration-in-seconds (45 s) so one lost renewal is survivable"},
		{"interval exactly half", map[string]any{interval: 22500, expiration: 45}, interval, "22500",
			"must be less than half of scheduler-lock.heartbeat-expiration-duration-in-seconds (45 s)"},
		{"expiration too short for default interval", map[string]any{expiration: 20}, expiration, "20",
			"must be more than twice scheduler-lock.touch-heartbeat-interval-in-milliseconds (15000 ms) so one lost renewal is survivable"},
		{"margin not below interval", map[string]any{margin: 15000}, margin, "15000",
			"must be less than scheduler-lock.touch-heartbeat-interval-in-milliseconds (15000 ms)"},
		{"margin above small interval", map[string]any{interval: 1000, expiration: 10, margin: 2000}, margin, "2000",
			"must be less than scheduler-lock.touch-heartbeat-interval-in-milliseconds (1000 ms)"},

		// Instance.
		{"port zero", map[string]any{"instance.port": 0}, "instance.port", "0", "must be in 1..65535"},
		{"port too high", map[string]any{"instance.port": 70000}, "instance.port", "70000", "must be in 1..65535"},
		{"port negative", map[string]any{"instance.port": -1}, "instance.port", "-1", "must be in 1..65535"},
		{"tenant empty", map[string]any{"instance.tenant": ""}, "instance.tenant", `""`, "must not be empty"},
		{"app empty", map[string]any{"instance.app": ""}, "instance.app", `""`, "must not be empty"},
		{"ip bad", map[string]any{"instance.ip": "not-an-ip"}, "instance.ip", "not-an-ip", "is not an IP address"},

		// Redis.
		{"db negative", map[string]any{"redis.db": -1}, "redis.db", "-1", "must not be negative"},
		{"db text", map[string]any{"redis.db": "one"}, "redis.db", "one", "must be a whole number"},
		{"db with cluster", map[string]any{"redis.db": 3, "redis.addrs": "a:1,b:2"}, "redis.db", "3",
			"must be 0 with Redis Cluster"},
		{"db with cluster flag", map[string]any{"redis.db": 3, "redis.cluster": true}, "redis.db", "3",
			"must be 0 with Redis Cluster"},
		{"cluster with sentinel", map[string]any{"redis.cluster": true, "redis.master-name": "m"}, "redis.cluster", "true",
			"cannot be combined with redis.master-name"},
		{"addrs empty list", map[string]any{"redis.addrs": []string{}}, "redis.addrs", `""`, "must list at least one address"},
		{"addrs empty string", map[string]any{"redis.addrs": ""}, "redis.addrs", `""`, "must list at least one address"},
		{"addrs no port", map[string]any{"redis.addrs": "localhost"}, "redis.addrs", "localhost", `"localhost" is not host:port`},
		{"addrs port zero", map[string]any{"redis.addrs": []string{"a:1", "b:0"}, "redis.master-name": "m"}, "redis.addrs", "a:1,b:0",
			`"b:0" has a port that is not in 1..65535`},
		{"addrs no host", map[string]any{"redis.addrs": ":6379"}, "redis.addrs", ":6379", `":6379" has no host`},
		{"key-prefix empty", map[string]any{"redis.key-prefix": ""}, "redis.key-prefix", `""`, "must not be empty"},
		{"key-prefix braces", map[string]any{"redis.key-prefix": "a{b}"}, "redis.key-prefix", "a{b}", "must not contain '{' or '}'"},

		// Consul.
		{"consul address without port", map[string]any{"consul.address": "consul.internal"}, "consul.address", "consul.internal", "is not host:port"},
		{"consul URL without port", map[string]any{"consul.address": "https://consul.internal"}, "consul.address", "https://consul.internal", "is not host:port"},
		{"consul cert without key", map[string]any{"consul.tls-cert-file": "c.pem"}, "consul.tls-key-file", `""`, "must be set together with consul.tls-cert-file"},
		{"consul key without cert", map[string]any{"consul.tls-key-file": "k.pem"}, "consul.tls-cert-file", `""`, "must be set together with consul.tls-key-file"},
		{"consul prefix slash", map[string]any{"consul.key-prefix": "/baton"}, "consul.key-prefix", "/baton", "must not start or end with '/'"},
		{"consul prefix empty", map[string]any{"consul.key-prefix": ""}, "consul.key-prefix", `""`, "must not be empty"},
		{"consul ttl min zero", map[string]any{"consul.session-ttl-min-in-seconds": 0}, "consul.session-ttl-min-in-seconds", "0", "must be in 1..86400"},
		{"consul ttl min above a day", map[string]any{"consul.session-ttl-min-in-seconds": 86401}, "consul.session-ttl-min-in-seconds", "86401", "must be in 1..86400"},
		{"consul lock delay above a minute", map[string]any{"consul.lock-delay-in-milliseconds": 60001}, "consul.lock-delay-in-milliseconds", "60001", "must be in 0..60000"},
		{"consul lock delay negative", map[string]any{"consul.lock-delay-in-milliseconds": -1}, "consul.lock-delay-in-milliseconds", "-1", "must be in 0..60000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := config.Load(config.Map(tt.in))
			ps := problems(t, err)
			if len(ps) != 1 {
				t.Fatalf("got %d problems, want 1:\n%v", len(ps), err)
			}
			p := ps[0]
			if p.Key != tt.key || p.Value != tt.value || !strings.Contains(p.Reason, tt.reason) {
				t.Errorf("problem = %+v\nwant key %q value %q reason containing %q", p, tt.key, tt.value, tt.reason)
			}
			want := fmt.Sprintf("config: %s=%s: ", tt.key, tt.value)
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
		})
	}
}

// TestAllProblemsAtOnce checks that one error lists every bad key.
func TestAllProblemsAtOnce(t *testing.T) {
	_, err := config.Load(config.Map(map[string]any{
		enabled:               "maybe",
		interval:              30000,
		hold:                  0,
		maxRetries:            -2,
		"instance.port":       70000,
		"redis.db":            -1,
		"redis.password":      12,
		"redis.key-prefx":     "x",
		"consul.address":      "c:8500",
		"synchronized-lock.x": 1,
	}))
	ps := problems(t, err)
	keys := make([]string, len(ps))
	for i, p := range ps {
		keys[i] = p.Key
	}
	want := []string{
		"redis.key-prefx", "synchronized-lock.x", // unknown, while reading
		enabled, "redis.password", // wrong type, in table order
		interval, hold, maxRetries, "instance.port", "redis.db", // rules, in table order
	}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("problem keys:\n%q\nwant\n%q\nerror:\n%v", keys, want, err)
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != len(want) {
		t.Errorf("error has %d lines, want %d:\n%v", n, len(want), err)
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		if !strings.HasPrefix(line, "config: ") {
			t.Errorf("line %q lacks the config: prefix", line)
		}
	}
}

// TestBadTypeSkipsDependentRules checks that a key that did not convert
// is not also blamed, nor makes other keys blamed, by rules between keys.
func TestBadTypeSkipsDependentRules(t *testing.T) {
	_, err := config.Load(config.Map(map[string]any{interval: "abc", expiration: 20, margin: 99999}))
	ps := problems(t, err)
	if len(ps) != 1 || ps[0].Key != interval {
		t.Errorf("problems = %q, want only the one of %s", ps, interval)
	}
}

func TestValidate(t *testing.T) {
	if err := (config.Config{}).Validate(); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	c := config.Default()
	c.Role.HeartbeatInterval = 30 * time.Second
	c.Role.SafetyMargin = -time.Second
	c.SyncLock.HoldDuration = -time.Second
	c.SyncLock.MaxRetries = -1
	c.Instance = instanceid.Options{Port: 70000, IP: "x"}
	c.Redis.DB = -1
	c.Redis.Password = "hunter2"
	c.Redis.Addrs = []string{"nohost"}
	err := c.Validate()
	ps := problems(t, err)
	var got []string
	for _, p := range ps {
		got = append(got, p.Key+"="+p.Value)
	}
	want := []string{
		interval + "=30000", margin + "=-1000", hold + "=-1", maxRetries + "=-1",
		"instance.port=70000", "instance.ip=x", "redis.addrs=nohost", "redis.db=-1",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("problems:\n%q\nwant\n%q", got, want)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error shows the password: %v", err)
	}

	// Values below the key's unit are shown as fractions.
	c = config.Config{Role: role.Config{HeartbeatInterval: 1500 * time.Microsecond, HeartbeatExpiration: 2 * time.Millisecond}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), interval+"=1.5: must be less than half of "+expiration+" (0.002 s)") {
		t.Errorf("sub-unit values: err = %v", err)
	}

	c = config.Config{SyncLock: synclock.Config{RetryInterval: time.Millisecond}}
	if err := c.Validate(); err != nil {
		t.Errorf("valid synclock config: %v", err)
	}
}

func TestErrorUnwrap(t *testing.T) {
	err := error(&config.Error{Problems: []config.Problem{{Key: "k", Value: "v", Reason: "r"}}})
	if !errors.Is(err, config.ErrInvalid) {
		t.Error("*Error does not wrap ErrInvalid")
	}
	if err.Error() != "config: k=v: r" {
		t.Errorf("Error() = %q", err)
	}
	p := config.Problem{Key: "redis.db", Value: "x", Origin: "env BATON_REDIS_DB", Reason: "must be a whole number"}
	if got, want := p.String(), "config: redis.db=x (from env BATON_REDIS_DB): must be a whole number"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
