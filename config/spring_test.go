package config_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
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

// springFixture is what testdata/application.properties and
// application.yml, a Spring Boot 2 service's file, hold for baton.
func springFixture() config.Config {
	want := config.Default()
	want.Instance.App, want.Instance.Port, want.Instance.Tenant, want.Instance.IP = "billing", 8080, "acme", "10.0.0.7"
	want.Redis.Addrs = []string{"redis.acme.internal:6380"}
	want.Redis.Password, want.Redis.DB = "s3cr3t-Redis-pw", 2
	want.Role.HeartbeatInterval, want.Role.HeartbeatExpiration = 10*time.Second, 30*time.Second
	want.SyncLock.RetryInterval, want.SyncLock.HoldDuration = 500*time.Millisecond, time.Minute
	return want
}

// loadSpring loads src with Spring and checks the keys it read against
// springFixture, with the password as want says.
func loadSpring(t *testing.T, src config.Source, edit func(*config.Config)) *config.Config {
	t.Helper()
	c, err := config.Load(config.Spring(src))
	if err != nil {
		t.Fatalf("Load(Spring(...)): %v", err)
	}
	want := springFixture()
	if edit != nil {
		edit(&want)
	}
	if got := *c; got.String() != want.String() {
		t.Errorf("Load(Spring(...)) =\n%v\nwant\n%v", got, want)
	}
	if c.Redis.Password != want.Redis.Password {
		t.Errorf("redis.password is not the file's spring.redis.password")
	}
	return c
}

// A Spring Boot service's application.properties loads as it is: the
// framework's keys where the framework has them, the Spring keys baton
// understands mapped, and the hundreds of others ignored and listed.
func TestSpringApplicationProperties(t *testing.T) {
	c := loadSpring(t, config.File("testdata/application.properties"), nil)
	ignored := c.Ignored()
	if len(ignored) < 300 {
		t.Errorf("Ignored() lists %d keys; want the file's few hundred unrelated ones", len(ignored))
	}
	for _, k := range []string{"server.servlet.context-path", "spring.datasource.password", "spring.redis.timeout",
		"spring.redis.lettuce.pool.max-active", "eureka.instance.hostname", "management.server.port", "acme.features.flag-001.enabled"} {
		if !slices.Contains(ignored, k) {
			t.Errorf("Ignored() lacks %s", k)
		}
	}
	for _, k := range ignored {
		if strings.HasPrefix(k, "scheduler-lock.") || strings.HasPrefix(k, "synchronized-lock.") || k == "server.port" ||
			k == "spring.redis.host" || k == "spring.redis.password" || k == "spring.application.name" {
			t.Errorf("Ignored() lists %s, which baton reads", k)
		}
	}
	if !slices.IsSorted(ignored) {
		t.Errorf("Ignored() is not sorted")
	}
	id, err := c.InstanceID()
	if err != nil || id.String() != "10.0.0.7:acme:billing:8080" {
		t.Errorf("InstanceID() = %v, %v; want the framework's 10.0.0.7:acme:billing:8080", id, err)
	}
}

// The same service's application.yml gives the same configuration and
// the same list of ignored keys, Spring's [a.b] map keys included.
func TestSpringApplicationYAML(t *testing.T) {
	props := loadSpring(t, config.File("testdata/application.properties"), nil)
	yml := loadSpring(t, config.File("testdata/application.yml"), nil)
	if !reflect.DeepEqual(props.Ignored(), yml.Ignored()) {
		t.Errorf("Ignored() differs between the properties and the YAML file:\n%v\n%v", props.Ignored(), yml.Ignored())
	}
}

// readFixture returns testdata/application.properties with edit applied.
func readFixture(t *testing.T, edit func(string) string) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/application.properties")
	if err != nil {
		t.Fatal(err)
	}
	return []byte(edit(string(data)))
}

// Spring Boot 3 moved the Redis keys to spring.data.redis.*; a file with
// both is read as Boot 3 reads it, and the Boot 2 keys are listed.
func TestSpringBoot3Redis(t *testing.T) {
	boot3 := readFixture(t, func(s string) string { return strings.ReplaceAll(s, "spring.redis.", "spring.data.redis.") })
	c := loadSpring(t, config.Bytes(boot3, config.Properties), nil)
	if !slices.Contains(c.Ignored(), "spring.data.redis.timeout") {
		t.Errorf("Ignored() lacks spring.data.redis.timeout: %v", c.Ignored())
	}

	both := readFixture(t, func(s string) string {
		return s + "spring.data.redis.host=redis3.acme.internal\nspring.data.redis.ssl.enabled=true\nspring.data.redis.username=billing\n"
	})
	c = loadSpring(t, config.Bytes(both, config.Properties), func(c *config.Config) {
		c.Redis.Addrs, c.Redis.Password, c.Redis.DB = []string{"redis3.acme.internal:6379"}, "", 0
		c.Redis.TLS, c.Redis.Username = true, "billing"
	})
	for _, k := range []string{"spring.redis.host", "spring.redis.password", "spring.redis.database"} {
		if !slices.Contains(c.Ignored(), k) {
			t.Errorf("with spring.data.redis.* set, Ignored() lacks %s", k)
		}
	}
}

// Sentinel and Cluster node lists, as one comma-separated string or as
// Spring's list items, and the URL form.
func TestSpringRedisTopologies(t *testing.T) {
	noHost := func(s string) string {
		s = strings.Replace(s, "spring.redis.host=redis.acme.internal\n", "", 1)
		return strings.Replace(s, "spring.redis.port=6380\n", "", 1)
	}
	for _, tc := range []struct {
		name, extra string
		edit        func(*config.Config)
	}{
		{"sentinel, one string", "spring.redis.sentinel.master=billing\nspring.redis.sentinel.nodes=10.0.1.1:26379, 10.0.1.2:26379,10.0.1.3:26379\nspring.redis.sentinel.password=sentinel-pw\n",
			func(c *config.Config) {
				c.Redis.MasterName, c.Redis.Addrs = "billing", []string{"10.0.1.1:26379", "10.0.1.2:26379", "10.0.1.3:26379"}
				c.Redis.SentinelPassword = "sentinel-pw"
			}},
		{"sentinel, list items", "spring.data.redis.sentinel.master=billing\nspring.data.redis.sentinel.nodes[0]=10.0.1.1:26379\nspring.data.redis.sentinel.nodes[1]=10.0.1.2:26379\nspring.data.redis.password=s3cr3t-Redis-pw\nspring.data.redis.database=2\n",
			func(c *config.Config) {
				c.Redis.MasterName, c.Redis.Addrs = "billing", []string{"10.0.1.1:26379", "10.0.1.2:26379"}
			}},
		{"cluster", "spring.redis.cluster.nodes=10.0.2.1:7000,10.0.2.2:7000,10.0.2.3:7000\nspring.redis.cluster.max-redirects=3\n",
			func(c *config.Config) {
				c.Redis.Cluster, c.Redis.Addrs, c.Redis.DB = true, []string{"10.0.2.1:7000", "10.0.2.2:7000", "10.0.2.3:7000"}, 0
			}},
		{"url", "spring.redis.url=rediss://billing:url-pw@10.0.3.1:6390/4\n",
			func(c *config.Config) {
				c.Redis.Addrs, c.Redis.TLS, c.Redis.Username, c.Redis.Password, c.Redis.DB = []string{"10.0.3.1:6390"}, true, "billing", "url-pw", 4
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := readFixture(t, func(s string) string {
				s = noHost(s)
				if strings.Contains(tc.extra, "spring.data.redis.") {
					s = strings.ReplaceAll(s, "spring.redis.", "spring.data.redis.")
				}
				if tc.name == "cluster" {
					s = strings.Replace(s, "spring.redis.database=2\n", "", 1)
				}
				return s + tc.extra
			})
			c := loadSpring(t, config.Bytes(data, config.Properties), tc.edit)
			if _, err := c.Redis.ClientOptions(); err != nil {
				t.Error(err)
			}
		})
	}
	_, err := config.Load(config.Spring(config.Bytes([]byte("spring.redis.sentinel.nodes=10.0.1.1:26379,10.0.1.2:26379\n"), config.Properties)))
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "spring.redis.sentinel.nodes=") ||
		!strings.Contains(err.Error(), "spring.redis.sentinel.master is not set") {
		t.Errorf("Sentinels without a master name: %v", err)
	}
}

// Where baton's own key and a Spring key set one value, baton's key wins,
// and the Spring key it overrode is listed as ignored.
func TestSpringBatonKeyWins(t *testing.T) {
	data := readFixture(t, func(s string) string {
		return s + "baton.redis.addrs=10.0.9.1:6379\nbaton.instance.app=billing-go\nbaton.scheduler-lock.enabled=false\n" +
			"baton.redis.key-prefix=acme\n"
	})
	c := loadSpring(t, config.Bytes(data, config.Properties), func(c *config.Config) {
		c.Redis.Addrs, c.Instance.App, c.Role.Disabled, c.Redis.KeyPrefix = []string{"10.0.9.1:6379"}, "billing-go", true, "acme"
	})
	for _, k := range []string{"spring.redis.host", "spring.redis.port", "spring.application.name", "scheduler-lock.enabled"} {
		if !slices.Contains(c.Ignored(), k) {
			t.Errorf("Ignored() lacks %s, which a baton key overrode", k)
		}
	}
	// A later source wins over the file, as always.
	c, err := config.Load(config.Spring(config.Bytes(data, config.Properties)), config.Map(map[string]any{"instance.port": 9000}))
	if err != nil || c.Instance.Port != 9000 {
		t.Errorf("a later source over server.port: %v, %v", c, err)
	}
}

// Unknown keys stay errors unless Spring asks to ignore them: the whole
// Spring file without Spring names its keys and points at Spring; under
// Spring a typo in the framework's or baton's keys is still reported.
func TestSpringUnknownKeys(t *testing.T) {
	_, err := config.Load(config.File("testdata/application.properties"))
	for _, want := range []string{"config: server.servlet.context-path=/billing (from file testdata/application.properties): unknown key",
		"config: spring.application.name=billing", "config.Spring(config.File(...))"} {
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Load without Spring: want an error containing %q, got %v", want, err)
		}
	}
	data := readFixture(t, func(s string) string {
		return s + "scheduler-lock.touch-heartbeat-intervall-in-milliseconds=5000\nbaton.redis.dbx=1\nsynchronized-lock.max-retries=abc\n" +
			"synchronizedLock.retryIntervalInMilliseconds=400\n"
	})
	_, err = config.Load(config.Spring(config.Bytes(data, config.Properties)))
	for _, want := range []string{
		"config: scheduler-lock.touch-heartbeat-intervall-in-milliseconds=5000: unknown key; did you mean scheduler-lock.touch-heartbeat-interval-in-milliseconds?",
		"config: redis.dbx=1 (from baton.redis.dbx): unknown key; did you mean redis.db?",
		"config: synchronized-lock.max-retries=abc: must be a whole number",
		"config: synchronizedLock.retryIntervalInMilliseconds=400: is set twice in one source (also as synchronized-lock.retry-interval-in-milliseconds)",
	} {
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Load(Spring) of a file with typos: want an error containing %q, got %v", want, err)
		}
	}
	// Sub no longer drops the framework's own top-level keys without a word.
	_, err = config.Load(config.Sub("baton", config.Bytes([]byte("scheduler-lock.enabled=false\nbaton.redis.db=1\n"), config.Properties)))
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "config: scheduler-lock.enabled=false: is the framework's key, outside baton") ||
		!strings.Contains(err.Error(), "config.Spring") {
		t.Errorf("Sub with the framework's keys outside the path: %v", err)
	}
}

// Spring's placeholders are resolved from the file and the environment;
// one that is not set is an error naming the key.
func TestSpringPlaceholders(t *testing.T) {
	text := "spring.application.name=${APP_NAME:billing}\nserver.port=${BATON_TEST_PORT:8080}\n" +
		"multiple-tenant.tenant=${acme.tenant}\nacme.tenant=acme\nspring.redis.password=${BATON_TEST_REDIS_PW}\n"
	t.Setenv("BATON_TEST_PORT", "9090")
	t.Setenv("BATON_TEST_REDIS_PW", "from-env-pw")
	c, err := config.Load(config.Spring(config.Bytes([]byte(text), config.Properties)))
	if err != nil || c.Instance.App != "billing" || c.Instance.Port != 9090 || c.Instance.Tenant != "acme" || c.Redis.Password != "from-env-pw" {
		t.Fatalf("placeholders: %v, %v", c, err)
	}
	os.Unsetenv("BATON_TEST_REDIS_PW")
	_, err = config.Load(config.Spring(config.Bytes([]byte(text), config.Properties)))
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "config: spring.redis.password=<redacted>: holds the placeholder ${BATON_TEST_REDIS_PW}") {
		t.Errorf("an unset placeholder: %v", err)
	}
}

// spring.redis.password never shows: not in Load's errors (a bad value
// beside it, the password given twice or as a list, a bad URL holding
// one), not in String, %#v, JSON or slog, not in the debug log of ignored
// keys and not in Ignored.
func TestSpringRedactsPassword(t *testing.T) {
	const secret = "s3cr3t-Redis-pw"
	var debug bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&debug, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer slog.SetDefault(prev)

	c := loadSpring(t, config.File("testdata/application.properties"), nil)
	js, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("loaded", "config", c)
	outputs := map[string]string{
		"String": c.String(), "%#v": fmt.Sprintf("%#v", c), "%+v": fmt.Sprintf("%+v", *c), "JSON": string(js),
		"slog": logs.String(), "Ignored": strings.Join(c.Ignored(), " "), "debug log": debug.String(),
	}
	if !strings.Contains(debug.String(), "server.servlet.context-path") {
		t.Errorf("the debug log does not list the ignored keys:\n%s", debug.String())
	}
	for _, tc := range []struct{ name, text string }{
		{"bad value beside", "spring.redis.password=" + secret + "\nspring.redis.database=two\n"},
		{"unresolved placeholder beside", "spring.redis.password=" + secret + "\nserver.port=${NO_SUCH_BATON_VAR}\n"},
		{"bad url", "spring.redis.url=redis//:" + secret + "@10.0.0.1:6379\n"},
		{"url with a bad db", "spring.redis.url=redis://:" + secret + "@10.0.0.1:6379/x\n"},
		{"credentials in the nodes", "spring.redis.cluster.nodes=redis://:" + secret + "@10.0.0.1:6379\n"},
	} {
		_, err := config.Load(config.Spring(config.Bytes([]byte(tc.text), config.Properties)))
		if err == nil {
			t.Errorf("%s: Load succeeded; want an error", tc.name)
			continue
		}
		outputs[tc.name] = err.Error()
	}
	for _, tc := range []struct{ name, text string }{
		{"twice", "spring:\n  redis:\n    password: " + secret + "\n  redis.password: other-" + secret + "\n"},
		{"a list", "spring:\n  redis:\n    password: [" + secret + "]\n"},
	} {
		_, err := config.Load(config.Spring(config.Bytes([]byte(tc.text), config.YAML)))
		if err == nil {
			t.Errorf("%s: Load succeeded; want an error", tc.name)
			continue
		}
		outputs[tc.name] = err.Error()
	}
	for name, out := range outputs {
		if strings.Contains(out, secret) {
			t.Errorf("%s shows spring.redis.password:\n%s", name, out)
		}
	}
	for _, name := range []string{"String", "JSON", "twice", "a list", "credentials in the nodes"} {
		if !strings.Contains(outputs[name], "redacted") {
			t.Errorf("%s does not mark the redaction:\n%s", name, outputs[name])
		}
	}
}

// eureka.instance.hostname counts as the address only when it is an IP
// and eureka.instance.ip-address is not set: an instance ID holds an IP.
func TestSpringEurekaHostname(t *testing.T) {
	for text, want := range map[string]string{
		"eureka.instance.hostname=10.0.0.8\n":                                      "10.0.0.8",
		"eureka.instance.hostname=billing-7.acme.internal\n":                       "",
		"eureka.instance.hostname=10.0.0.8\neureka.instance.ip-address=10.0.0.9\n": "10.0.0.9",
		"eureka:\n  instance:\n    ipAddress: 10.0.0.9\n":                          "10.0.0.9",
	} {
		format := config.Properties
		if strings.Contains(text, ":\n") {
			format = config.YAML
		}
		c, err := config.Load(config.Spring(config.Bytes([]byte(text), format)))
		if err != nil || c.Instance.IP != want {
			t.Errorf("%q: instance.ip=%q, %v; want %q", text, c.Instance.IP, err, want)
			continue
		}
		if want != "10.0.0.8" && strings.Contains(text, "hostname") && !slices.Contains(c.Ignored(), "eureka.instance.hostname") {
			t.Errorf("%q: Ignored() = %v; want eureka.instance.hostname listed", text, c.Ignored())
		}
	}
}
