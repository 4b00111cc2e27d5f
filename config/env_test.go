package config_test

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/config"
	"github.com/baton-go/baton/schedlock"
)

// clearEnv unsets every BATON_ variable the test process inherited, for
// the duration of the test.
func clearEnv(t *testing.T) {
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "BATON_") {
			t.Setenv(name, "") // registers the restore
			os.Unsetenv(name)
		}
	}
}

func TestEnvName(t *testing.T) {
	tests := []struct{ prefix, key, want string }{
		{"BATON_", "scheduler-lock.heartbeat-expiration-duration-in-seconds", "BATON_SCHEDULER_LOCK_HEARTBEAT_EXPIRATION_DURATION_IN_SECONDS"},
		{"BATON", "redis.key-prefix", "BATON_REDIS_KEY_PREFIX"},
		{"APP_", "instance.advertise-address", "APP_INSTANCE_ADVERTISE_ADDRESS"},
		{"BATON_", "redis.nope", ""},
	}
	for _, tt := range tests {
		if got := config.EnvName(tt.prefix, tt.key); got != tt.want {
			t.Errorf("EnvName(%q, %q) = %q, want %q", tt.prefix, tt.key, got, tt.want)
		}
	}
	seen := map[string]string{}
	for _, k := range config.Keys() {
		n := config.EnvName("BATON_", k)
		if other, dup := seen[n]; dup {
			t.Errorf("keys %s and %s share %s", other, k, n)
		}
		seen[n] = k
	}
}

// TestEnvEveryKey sets every key through its variable, from the values of
// testdata/baton.yaml, and expects the same Config.
func TestEnvEveryKey(t *testing.T) {
	clearEnv(t)
	ca, cert, key := writeTLSFiles(t)
	values := map[string]string{
		"scheduler-lock.enabled":                                  "false",
		"scheduler-lock.touch-heartbeat-interval-in-milliseconds": "5000",
		"scheduler-lock.heartbeat-expiration-duration-in-seconds": "20",
		"scheduler-lock.safety-margin-in-milliseconds":            "1000",
		"synchronized-lock.enabled":                               "true",
		"synchronized-lock.retry-interval-in-milliseconds":        "250",
		"synchronized-lock.hold-duration-in-seconds":              "60",
		"synchronized-lock.max-retries":                           "3",
		"synchronized-lock.claim-window-in-milliseconds":          "5000",
		"instance.app":                        "billing",
		"instance.tenant":                     "acme",
		"instance.port":                       "8080",
		"instance.ip":                         "10.0.0.7",
		"instance.advertise-address":          "10.0.0.8:8500",
		"redis.addrs":                         "10.0.0.1:6379,10.0.0.2:6379",
		"redis.cluster":                       "true",
		"redis.master-name":                   "",
		"redis.username":                      "baton",
		"redis.password":                      "s3cret",
		"redis.sentinel-username":             "watcher",
		"redis.sentinel-password":             "s3ntinel",
		"redis.db":                            "0",
		"redis.tls":                           "true",
		"redis.key-prefix":                    "acme-baton",
		"redis.tls-ca-file":                   ca,
		"redis.tls-cert-file":                 cert,
		"redis.tls-key-file":                  key,
		"redis.tls-server-name":               "localhost",
		"redis.tls-insecure-skip-verify":      "no",
		"redis.dial-timeout-in-milliseconds":  "1500",
		"redis.read-timeout-in-milliseconds":  "700",
		"redis.write-timeout-in-milliseconds": "800",
		"redis.pool-size":                     "4",
		"redis.fail-fast":                     "no",
		"redis.client-log":                    "off",
		"redis.functions":                     "no",
		"redis.layout":                        "baton",
		"redis.shedlock-environment":          "prod",
		"redis.shedlock-key-prefix":           "shedlock",
		"job-lock.default-lock-at-most-for":   "PT10M",
		"job-lock.default-lock-at-least-for":  "30s",
		"consul.address":                      "http://127.0.0.1:8500",
		"consul.token":                        "t0ken",
		"consul.datacenter":                   "dc1",
		"consul.tls":                          "true",
		"consul.tls-ca-file":                  "/etc/consul/ca.pem",
		"consul.tls-cert-file":                "/etc/consul/client.pem",
		"consul.tls-key-file":                 "/etc/consul/client-key.pem",
		"consul.key-prefix":                   "acme-baton",
		"consul.session-ttl-min-in-seconds":   "5",
		"consul.lock-delay-in-milliseconds":   "250",
	}
	for _, k := range config.Keys() {
		v, ok := values[k]
		if !ok {
			t.Fatalf("no test value for %s", k)
		}
		t.Setenv(config.EnvName("BATON_", k), v)
	}
	c := mustLoad(t, config.Env("BATON_"))
	want := full
	want.Consul.TLS = true
	want.Consul.CAFile, want.Consul.CertFile, want.Consul.KeyFile = "/etc/consul/ca.pem", "/etc/consul/client.pem", "/etc/consul/client-key.pem"
	want.Consul.KeyPrefix, want.Consul.SessionTTLMin, want.Consul.LockDelay = "acme-baton", 5*time.Second, 250*time.Millisecond
	want.Redis.CAFile, want.Redis.CertFile, want.Redis.KeyFile = ca, cert, key
	want.Redis.ServerName = "localhost"
	want.Redis.DialTimeout, want.Redis.ReadTimeout, want.Redis.WriteTimeout = 1500*time.Millisecond, 700*time.Millisecond, 800*time.Millisecond
	want.Redis.PoolSize, want.Redis.NoFailFast, want.Redis.ClientLog = 4, true, config.ClientLogOff
	want.Redis.ShedLockEnvironment, want.Redis.ShedLockKeyPrefix = "prod", "shedlock"
	want.JobLock = schedlock.Defaults{LockAtMostFor: 10 * time.Minute, LockAtLeastFor: 30 * time.Second}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("Load(Env) =\n%#v\nwant\n%#v", c, want)
	}
}

func TestEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("BATON_SCHEDULER_LOCK_HEARTBEAT_EXPIRATION_DURATION_IN_SECONDS", "60")
	t.Setenv("BATON_REDIS_KEY_PREFIX", "p")
	t.Setenv("BATON_REDIS_USERNAME", "") // empty: ignored
	t.Setenv("OTHER_REDIS_DB", "7")      // other prefix: ignored
	t.Setenv("baton_redis_db", "7")      // prefix is case-sensitive
	for _, prefix := range []string{"BATON_", "BATON"} {
		c := mustLoad(t, config.Map(map[string]any{"redis.username": "u"}), config.Env(prefix))
		if c.Role.HeartbeatExpiration != time.Minute || c.Redis.KeyPrefix != "p" || c.Redis.Username != "u" || c.Redis.DB != 0 {
			t.Errorf("Env(%q): got %v", prefix, c)
		}
	}
}

func TestEnvUnknownVariable(t *testing.T) {
	clearEnv(t)
	t.Setenv("BATON_REDIS_DBX", "1")
	t.Setenv("BATON_SCHEDULER_LOCK_HEARTBEAT_EXPIRATION_DURATION_IN_SECOND", "45")
	t.Setenv("BATON_REDIS_PASWORD", "hunter2")
	t.Setenv("BATON_REDIS_DB", "abc")
	_, err := config.Load(config.Env("BATON_"))
	ps := problems(t, err)
	want := []config.Problem{
		{Key: "BATON_REDIS_DBX", Value: "1", Reason: "environment variable matches no config key; did you mean BATON_REDIS_DB?"},
		{Key: "BATON_REDIS_PASWORD", Value: "<redacted>", Reason: "environment variable matches no config key; did you mean BATON_REDIS_PASSWORD?"},
		{Key: "BATON_SCHEDULER_LOCK_HEARTBEAT_EXPIRATION_DURATION_IN_SECOND", Value: "45",
			Reason: "environment variable matches no config key; did you mean BATON_SCHEDULER_LOCK_HEARTBEAT_EXPIRATION_DURATION_IN_SECONDS?"},
		{Key: "redis.db", Value: "abc", Origin: "env BATON_REDIS_DB", Reason: "must be a whole number"},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Errorf("problems:\n%q\nwant\n%q", ps, want)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error shows a secret: %v", err)
	}
}

func TestEnvOriginInRuleMessages(t *testing.T) {
	clearEnv(t)
	t.Setenv("BATON_SCHEDULER_LOCK_TOUCH_HEARTBEAT_INTERVAL_IN_MILLISECONDS", "30000")
	_, err := config.Load(config.File("testdata/empty.yaml"), config.Env("BATON_"))
	want := "config: scheduler-lock.touch-heartbeat-interval-in-milliseconds=30000 " +
		"(from env BATON_SCHEDULER_LOCK_TOUCH_HEARTBEAT_INTERVAL_IN_MILLISECONDS): " +
		"must be less than half of scheduler-lock.heartbeat-expiration-duration-in-seconds (45 s) so one lost renewal is survivable"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v\nwant  %s", err, want)
	}
}

func TestEnvEmptyPrefix(t *testing.T) {
	for _, prefix := range []string{"", "_"} {
		if _, err := config.Load(config.Env(prefix)); err == nil || !strings.Contains(err.Error(), "non-empty prefix") {
			t.Errorf("Env(%q): err = %v", prefix, err)
		}
	}
}
