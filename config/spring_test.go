package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/config"
)

// A Spring application.yml holds the settings of every library; Sub reads
// baton's part and ignores the rest, and Spring's booleans (yes, on) are
// accepted.
func TestSubOfSpringYAML(t *testing.T) {
	yml := `
spring:
  application:
    name: billing
  datasource:
    url: jdbc:postgresql://db/billing
server:
  port: 8080
baton:
  instance:
    app: billing
    port: 8080
  scheduler-lock:
    enabled: yes
    touch-heartbeat-interval-in-milliseconds: 5000
  synchronized-lock.enabled: Off
  job-lock:
    default-lock-at-most-for: PT10M
    default-lock-at-least-for: 30s
`
	c, err := config.Load(config.Sub("baton", config.Bytes([]byte(yml), config.YAML)))
	if err != nil {
		t.Fatal(err)
	}
	if c.Instance.App != "billing" || c.Instance.Port != 8080 || c.Role.Disabled || c.Role.HeartbeatInterval != 5*time.Second ||
		!c.SyncLock.Disabled || c.JobLock.LockAtMostFor != 10*time.Minute || c.JobLock.LockAtLeastFor != 30*time.Second {
		t.Errorf("Load(Sub(baton, application.yml)) = %v", c)
	}

	// Without Sub the other libraries' keys are unknown to baton.
	if _, err := config.Load(config.Bytes([]byte(yml), config.YAML)); !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "config: spring=") {
		t.Errorf("Load of the whole file: %v; want spring.* reported as unknown", err)
	}

	// Under the path the usual rules hold, and the message says where.
	_, err = config.Load(config.Sub("acme.baton", config.Bytes([]byte("acme:\n  baton:\n    redis:\n      dbx: 1\n  other: 2\n"), config.YAML)))
	if err == nil || !strings.Contains(err.Error(), "config: redis.dbx=1 (from under acme.baton): unknown key; did you mean redis.db?") {
		t.Errorf("an unknown key under the path: %v", err)
	}
	// Nothing under the path sets nothing.
	c, err = config.Load(config.Sub("baton", config.Bytes([]byte("spring:\n  x: 1\n"), config.YAML)))
	if err != nil || !reflect.DeepEqual(*c, config.Default()) {
		t.Errorf("a file without baton's part: %v, %v; want the defaults", c, err)
	}
	// A value where the part belongs is reported.
	if _, err := config.Load(config.Sub("baton", config.Map(map[string]any{"baton": "on"}))); err == nil || !strings.Contains(err.Error(), "config: baton=on") {
		t.Errorf("a value at the path: %v", err)
	}
	if _, err := config.Load(config.Sub("", config.Map(nil))); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("Sub with an empty path: %v", err)
	}
}

// application.properties: separators '=', ':' and blanks, both comment
// styles, continuation lines, escapes, Spring's list items, under a path.
func TestPropertiesFile(t *testing.T) {
	text := `# Spring's own
spring.application.name=billing
! another comment style
baton.instance.app = billing
baton.instance.port: 8080
baton.instance.tenant   acme
  baton.scheduler-lock.enabled=ON
baton.redis.addrs[1]=10.0.0.2:6379
baton.redis.addrs[0]=10.0.0.1:6379
baton.redis.key-prefix=ac\
    me
baton.redis.password=p\u00e4ss\=w\u00f6rd\\
baton.redis.username=\ lead\:ing\ttab
# a comment ending in a backslash does not continue \
baton.redis.pool-size=1
baton.redis.pool-size=2
baton.job-lock.default-lock-at-most-for=PT10M
`
	path := filepath.Join(t.TempDir(), "application.properties")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(text, "\n", "\r\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(config.Sub("baton", config.File(path)))
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.Instance.App, want.Instance.Port, want.Instance.Tenant = "billing", 8080, "acme"
	want.Redis.Addrs = []string{"10.0.0.1:6379", "10.0.0.2:6379"}
	want.Redis.KeyPrefix, want.Redis.Password, want.Redis.Username = "acme", `päss=wörd\`, " lead:ing\ttab"
	want.Redis.PoolSize = 2
	want.JobLock.LockAtMostFor = 10 * time.Minute
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("Load(properties) =\n%#v\nwant\n%#v (password %q, username %q)", c, want, c.Redis.Password, c.Redis.Username)
	}

	for _, tc := range []struct{ name, text, want string }{
		{"bad unicode escape", "redis.key-prefix=a\\u12x4\n", `line 1: value of redis.key-prefix: malformed \u escape`},
		{"list with a gap", "redis.addrs[0]=a:1\nredis.addrs[2]=b:1\n", "redis.addrs[1] is missing"},
		{"unknown key", "redis.dbb=1\n", "config: redis.dbb=1: unknown key; did you mean redis.db?"},
		{"bad bool", "redis.tls=enabled\n", "must be true or false (or yes/no, on/off, 1/0)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Load(config.Bytes([]byte(tc.text), config.Properties))
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load: %v; want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

// Booleans are read as Spring reads them, in any case.
func TestSpringBooleans(t *testing.T) {
	for text, want := range map[string]bool{
		"true": true, "TRUE": true, "yes": true, "Yes": true, "on": true, "ON": true, "1": true, " t ": true,
		"false": false, "False": false, "no": false, "NO": false, "off": false, "Off": false, "0": false, "f": false,
	} {
		c, err := config.Load(config.Map(map[string]any{"redis.tls": text}))
		if err != nil || c.Redis.TLS != want {
			t.Errorf("redis.tls=%q: %v, %v; want %v", text, c.Redis.TLS, err, want)
		}
	}
}

// Names may be spelled as Spring's relaxed binding allows — camelCase,
// snake_case or kebab-case, in any case — in files and maps; a key given
// twice under two spellings is reported.
func TestRelaxedNames(t *testing.T) {
	yml := `
schedulerLock:
  touchHeartbeatIntervalInMilliseconds: 5000
synchronized_lock.hold_duration_in_seconds: 60
redis:
  keyPrefix: acme
  masterName: billing-redis
  TLS: on
jobLock.defaultLockAtMostFor: PT1M
`
	c, err := config.Load(config.Bytes([]byte(yml), config.YAML))
	if err != nil {
		t.Fatal(err)
	}
	if c.Role.HeartbeatInterval != 5*time.Second || c.SyncLock.HoldDuration != time.Minute || c.Redis.KeyPrefix != "acme" ||
		c.Redis.MasterName != "billing-redis" || !c.Redis.TLS || c.JobLock.LockAtMostFor != time.Minute {
		t.Errorf("Load of relaxed names = %v", c)
	}
	_, err = config.Load(config.Map(map[string]any{"redis": map[string]any{"keyPrefix": "a", "key-prefix": "b"}}))
	if err == nil || !strings.Contains(err.Error(), "redis.key-prefix=") || !strings.Contains(err.Error(), "is set twice in one source") {
		t.Errorf("one key under two spellings: %v", err)
	}
	// A typo is still a typo, reported as written.
	_, err = config.Load(config.Map(map[string]any{"redis.keyPrefx": "a"}))
	if err == nil || !strings.Contains(err.Error(), "config: redis.keyPrefx=a: unknown key; did you mean redis.key-prefix?") {
		t.Errorf("a typo in camelCase: %v", err)
	}
}
