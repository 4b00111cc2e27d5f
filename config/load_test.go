package config_test

import (
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/config"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/synclock"
)

// full is the configuration every testdata/baton.* file holds.
var full = config.Config{
	Instance: instanceid.Options{
		App:           "billing",
		Tenant:        "acme",
		Port:          8080,
		IP:            "10.0.0.7",
		AdvertiseAddr: "10.0.0.8:8500",
	},
	Role: role.Config{
		Disabled:            true,
		HeartbeatInterval:   5 * time.Second,
		HeartbeatExpiration: 20 * time.Second,
		SafetyMargin:        time.Second,
	},
	SyncLock: synclock.Config{
		RetryInterval: 250 * time.Millisecond,
		HoldDuration:  time.Minute,
		MaxRetries:    3,
		ClaimWindow:   5 * time.Second,
	},
	Redis: config.Redis{
		Addrs:            []string{"10.0.0.1:6379", "10.0.0.2:6379"},
		Cluster:          true,
		Username:         "baton",
		Password:         "s3cret",
		SentinelUsername: "watcher",
		SentinelPassword: "s3ntinel",
		TLS:              true,
		KeyPrefix:        "acme-baton",
		DialTimeout:      config.DefaultDialTimeout,
		ReadTimeout:      config.DefaultReadTimeout,
		WriteTimeout:     config.DefaultWriteTimeout,
		ClientLog:        config.ClientLogDebug,

		Layout:              config.LayoutBaton,
		ShedLockEnvironment: "default",
		ShedLockKeyPrefix:   "job-lock",
	},
	Consul: config.Consul{
		Address:       "http://127.0.0.1:8500",
		Token:         "t0ken",
		Datacenter:    "dc1",
		KeyPrefix:     "baton",
		SessionTTLMin: 10 * time.Second,
	},
}

func mustLoad(t *testing.T, sources ...config.Source) *config.Config {
	t.Helper()
	c, err := config.Load(sources...)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

// problems returns the problems of an error Load returned, checking that
// it is an *Error wrapping ErrInvalid.
func problems(t *testing.T, err error) []config.Problem {
	t.Helper()
	if err == nil {
		t.Fatal("Load succeeded; want an error")
	}
	if !errors.Is(err, config.ErrInvalid) {
		t.Errorf("error %q does not wrap ErrInvalid", err)
	}
	var e *config.Error
	if !errors.As(err, &e) {
		t.Fatalf("error %q (%T) is not a *config.Error", err, err)
	}
	if len(e.Problems) == 0 {
		t.Fatal("*Error without problems")
	}
	return e.Problems
}

func TestLoadWithoutSourcesIsDefault(t *testing.T) {
	c := mustLoad(t)
	if !reflect.DeepEqual(*c, config.Default()) {
		t.Errorf("Load() = %v\nwant       %v", c, config.Default())
	}
}

func TestDefault(t *testing.T) {
	d := config.Default()
	want := config.Config{
		Instance: instanceid.Options{Tenant: "default"},
		Role:     role.Config{HeartbeatInterval: 15 * time.Second, HeartbeatExpiration: 45 * time.Second},
		SyncLock: synclock.Config{RetryInterval: time.Second, HoldDuration: 45 * time.Second},
		Redis: config.Redis{Addrs: []string{"127.0.0.1:6379"}, KeyPrefix: "baton",
			DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second,
			ClientLog: "debug", Layout: "baton", ShedLockEnvironment: "default", ShedLockKeyPrefix: "job-lock"},
		Consul: config.Consul{KeyPrefix: "baton", SessionTTLMin: 10 * time.Second},
	}
	if d.Redis.NoFailFast {
		t.Error("Default() does not fail fast (redis.fail-fast false)")
	}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("Default() = %v\nwant        %v", d, want)
	}
	if err := d.Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
	if err := d.Role.Validate(); err != nil {
		t.Errorf("Default().Role.Validate() = %v", err)
	}
	if err := d.SyncLock.Validate(); err != nil {
		t.Errorf("Default().SyncLock.Validate() = %v", err)
	}
	// Default must not share its slice between calls.
	d.Redis.Addrs[0] = "changed:1"
	if got := config.Default().Redis.Addrs[0]; got != "127.0.0.1:6379" {
		t.Errorf("Default() shares Redis.Addrs: got %q", got)
	}
}

func TestLoadFiles(t *testing.T) {
	for _, path := range []string{
		"testdata/baton.yaml",
		"testdata/baton.yml",
		"testdata/baton.json",
		"testdata/baton.toml",
	} {
		t.Run(path, func(t *testing.T) {
			c := mustLoad(t, config.File(path))
			if !reflect.DeepEqual(*c, full) {
				t.Errorf("Load(File(%q)) =\n%#v\nwant\n%#v", path, c, full)
			}
		})
	}
}

func TestLoadEmptyFile(t *testing.T) {
	c := mustLoad(t, config.File("testdata/empty.yaml"))
	if !reflect.DeepEqual(*c, config.Default()) {
		t.Errorf("empty file: got %v, want the defaults", c)
	}
}

func TestLoadBytes(t *testing.T) {
	for _, format := range []config.Format{config.YAML, config.JSON, config.TOML, "yml", "YAML"} {
		data := map[config.Format]string{
			config.YAML: "redis:\n  db: 4\n",
			"yml":       "redis.db: 4\n",
			"YAML":      "redis: {db: 4}\n",
			config.JSON: `{"redis": {"db": 4}}`,
			config.TOML: "[redis]\ndb = 4\n",
		}[format]
		c := mustLoad(t, config.Bytes([]byte(data), format))
		if c.Redis.DB != 4 {
			t.Errorf("Bytes(%q, %q): DB = %d, want 4", data, format, c.Redis.DB)
		}
	}
	_, err := config.Load(config.Bytes([]byte("a=1"), "ini"))
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), `"ini"`) {
		t.Errorf("Bytes with format ini: err = %v; want ErrInvalid naming the format", err)
	}
}

func TestFileErrors(t *testing.T) {
	_, err := config.Load(config.File("testdata/missing.yaml"))
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, config.ErrInvalid) {
		t.Errorf("missing file: err = %v; want fs.ErrNotExist, not ErrInvalid", err)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "config: ") {
		t.Errorf("missing file: message %q lacks the config: prefix", err)
	}

	_, err = config.Load(config.File("testdata/baton.ini"))
	if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "testdata/baton.ini") {
		t.Errorf("unknown extension: err = %v; want ErrInvalid naming the path", err)
	}

	for _, path := range []string{"testdata/syntax.yaml", "testdata/syntax.json", "testdata/syntax.toml"} {
		_, err := config.Load(config.File(path))
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), path) || !strings.HasPrefix(err.Error(), "config: ") {
			t.Errorf("%s: err = %v; want ErrInvalid naming the path", path, err)
		}
	}

	_, err = config.Load(config.Source{})
	if err == nil || !strings.Contains(err.Error(), "zero Source") {
		t.Errorf("zero Source: err = %v", err)
	}
}

func TestFileProblemsNameTheFile(t *testing.T) {
	ps := problems(t, func() error { _, err := config.Load(config.File("testdata/problems.yaml")); return err }())
	want := []config.Problem{
		{Key: "scheduler-lock.heartbeat-expiration-duration-in-second", Value: "45", Origin: "file testdata/problems.yaml",
			Reason: "unknown key; did you mean scheduler-lock.heartbeat-expiration-duration-in-seconds?"},
		{Key: "redis.password", Value: "<redacted>", Origin: "file testdata/problems.yaml", Reason: "must be a string"},
		{Key: "redis.db", Value: "-1", Origin: "file testdata/problems.yaml", Reason: "must not be negative"},
	}
	if !reflect.DeepEqual(ps, want) {
		t.Errorf("problems:\n%q\nwant\n%q", ps, want)
	}
}

func TestOverrideOrder(t *testing.T) {
	t.Setenv("BATON_REDIS_DB", "3")
	t.Setenv("BATON_INSTANCE_APP", "from-env")

	c := mustLoad(t,
		config.File("testdata/baton.yaml"),
		config.Map(map[string]any{"redis.db": 0, "redis.cluster": false, "instance": map[string]any{"app": "from-map", "tenant": "map-tenant"}, "redis.addrs": "10.0.0.9:6379"}),
		config.Env("BATON_"),
	)
	if c.Redis.DB != 3 || c.Instance.App != "from-env" {
		t.Errorf("env did not override: DB=%d App=%q", c.Redis.DB, c.Instance.App)
	}
	if c.Instance.Tenant != "map-tenant" {
		t.Errorf("map did not override the file: Tenant=%q", c.Instance.Tenant)
	}
	if c.Instance.Port != 8080 || c.Redis.Username != "baton" {
		t.Errorf("file values not set by later sources were lost: %v", c)
	}

	// Reversed: the file wins over the environment.
	c = mustLoad(t, config.Env("BATON_"), config.File("testdata/baton.yaml"))
	if c.Instance.App != "billing" {
		t.Errorf("file after env: App = %q, want billing", c.Instance.App)
	}

	// A later list replaces, it does not append.
	c = mustLoad(t,
		config.Map(map[string]any{"redis.addrs": []string{"a:1", "b:2"}}),
		config.Map(map[string]any{"redis.addrs": []string{"c:3"}}),
	)
	if !reflect.DeepEqual(c.Redis.Addrs, []string{"c:3"}) {
		t.Errorf("Addrs = %q, want [c:3]", c.Redis.Addrs)
	}

	// A null sets nothing; it does not erase an earlier value.
	c = mustLoad(t,
		config.Map(map[string]any{"redis.db": 5}),
		config.Bytes([]byte("redis:\n  db: null\nconsul:\n"), config.YAML),
	)
	if c.Redis.DB != 5 {
		t.Errorf("null erased redis.db: got %d", c.Redis.DB)
	}

	// The value of the winning source is the one checked: a bad value
	// overridden by a good one is not reported.
	mustLoad(t,
		config.Map(map[string]any{"redis.db": "abc"}),
		config.Map(map[string]any{"redis.db": 1}),
	)
}

func TestMapNestedAndDotted(t *testing.T) {
	type myString string
	cases := map[string]map[string]any{
		"nested": {"redis": map[string]any{"db": 2, "tls": true}, "instance": map[string]any{"app": "x"}},
		"dotted": {"redis.db": 2, "redis.tls": true, "instance.app": "x"},
		"mixed":  {"redis": map[string]any{"db": 2}, "redis.tls": "true", "instance": map[string]string{"app": "x"}},
		"typed":  {"redis": map[string]any{"db": uint8(2), "tls": true}, "instance.app": myString("x")},
		"float":  {"redis.db": 2.0, "redis.tls": "1", "instance.app": "x"},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			c := mustLoad(t, config.Map(m))
			if c.Redis.DB != 2 || !c.Redis.TLS || c.Instance.App != "x" {
				t.Errorf("got DB=%d TLS=%v App=%q", c.Redis.DB, c.Redis.TLS, c.Instance.App)
			}
		})
	}

	// Map does not modify its argument.
	m := map[string]any{"redis": map[string]any{"db": 1}, "redis.tls": true}
	mustLoad(t, config.Map(m))
	if len(m) != 2 || len(m["redis"].(map[string]any)) != 1 {
		t.Errorf("Map modified its argument: %v", m)
	}
}

func TestListValues(t *testing.T) {
	for _, v := range []any{
		"a:1,b:2",
		" a:1 , b:2 ",
		[]string{"a:1", "b:2"},
		[]any{"a:1", "b:2"},
		[2]string{"a:1", "b:2"},
	} {
		c := mustLoad(t, config.Map(map[string]any{"redis.addrs": v, "redis.master-name": "m"}))
		if !reflect.DeepEqual(c.Redis.Addrs, []string{"a:1", "b:2"}) {
			t.Errorf("redis.addrs=%#v: got %q", v, c.Redis.Addrs)
		}
	}
}

func TestValuesAsStrings(t *testing.T) {
	c := mustLoad(t, config.Map(map[string]any{
		"scheduler-lock.enabled":                                  "FALSE",
		"scheduler-lock.touch-heartbeat-interval-in-milliseconds": " 1000 ",
		"scheduler-lock.heartbeat-expiration-duration-in-seconds": "+10",
		"synchronized-lock.max-retries":                           "7",
		"instance.port":                                           "8080",
	}))
	if !c.Role.Disabled || c.Role.HeartbeatInterval != time.Second || c.Role.HeartbeatExpiration != 10*time.Second ||
		c.SyncLock.MaxRetries != 7 || c.Instance.Port != 8080 {
		t.Errorf("got %v", c)
	}
}

func TestLoadResultPassesPackageValidation(t *testing.T) {
	c := mustLoad(t, config.File("testdata/baton.yaml"))
	if err := c.Role.Validate(); err != nil {
		t.Error(err)
	}
	if err := c.SyncLock.Validate(); err != nil {
		t.Error(err)
	}
	if err := c.Validate(); err != nil {
		t.Error(err)
	}
}
