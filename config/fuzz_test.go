package config_test

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/baton-go/baton/config"
)

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{
		"0", "30s", "1h30m", "1.5h", "+5s", "-5s", "2562047h47m16.854775807s", "30",
		"PT30S", "PT1H30M", "P1D", "P2W", "P1DT2H", "PT0.5S", "PT0,5S", "pt30s", "P1Y", "P1M",
		"PT", "P", "PT1.5H30M", "P106751DT23H47M16.854775807S", "PT0.0000000019S", "PT1µS", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := config.ParseDuration(s)
		if err != nil {
			if !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("ParseDuration(%q): error %q does not wrap ErrInvalid", s, err)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, negative", s, d)
		}
		again, err := config.ParseDuration(d.String())
		if err != nil || again != d {
			t.Fatalf("ParseDuration(%q) = %v, but ParseDuration(%q) = %v, %v", s, d, d.String(), again, err)
		}
	})
}

// checkLoaded checks what Load returned for arbitrary input: an error
// that wraps ErrInvalid, or a Config every package accepts.
func checkLoaded(t *testing.T, c *config.Config, err error) {
	t.Helper()
	if err != nil {
		if !errors.Is(err, config.ErrInvalid) {
			t.Fatalf("error %q does not wrap ErrInvalid", err)
		}
		return
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Load returned a Config that Validate rejects: %v", err)
	}
	if err := c.Role.Validate(); err != nil {
		t.Fatalf("Load returned a role.Config that role rejects: %v", err)
	}
	if err := c.SyncLock.Validate(); err != nil {
		t.Fatalf("Load returned a synclock.Config that synclock rejects: %v", err)
	}
	if c.Role.HeartbeatInterval <= 0 || c.Role.HeartbeatExpiration < 2*c.Role.HeartbeatInterval {
		t.Fatalf("bad role timing passed: %v", c)
	}
	_ = c.String()
	_ = c.Redis.UniversalOptions()
}

func FuzzLoadYAML(f *testing.F) {
	for _, path := range []string{"testdata/baton.yaml", "testdata/baton.yml", "testdata/problems.yaml", "testdata/syntax.yaml", "testdata/application.yml"} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"", "null", "[]", "- a", "redis: 5", "redis: {db: [1]}", "redis.db: 1\nredis: {db: 2}",
		"scheduler-lock.touch-heartbeat-interval-in-milliseconds: 9223372036854775807",
		"scheduler-lock: {heartbeat-expiration-duration-in-seconds: 1e300}",
		"instance: {port: 0x1F90, app: !!binary aGVsbG8=}",
		"? [a, b]\n: c", "a: &x [*x]", "redis: {addrs: [{a: 1}]}", "1: 2", "instance: {app: 2001-12-14}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Load(config.Bytes(data, config.YAML))
		checkLoaded(t, c, err)
		c, err = config.Load(config.Spring(config.Bytes(data, config.YAML)))
		checkLoaded(t, c, err)
	})
}

func FuzzLoadMap(f *testing.F) {
	f.Add("redis.db", "3", int64(3), true)
	f.Add("scheduler-lock.touch-heartbeat-interval-in-milliseconds", "30000", int64(30000), false)
	f.Add("scheduler-lock.heartbeat-expiration-duration-in-seconds", "-1", int64(-1), false)
	f.Add("instance.port", "65536", int64(65536), true)
	f.Add("redis.addrs", "a:1,b:2", int64(0), true)
	f.Add("redis", "x", int64(1), false)
	f.Add("redis..db", "", int64(0), true)
	f.Fuzz(func(t *testing.T, key, text string, n int64, asText bool) {
		var v any = n
		if asText {
			v = text
		}
		c, err := config.Load(config.Map(map[string]any{key: v}))
		checkLoaded(t, c, err)
		if err == nil {
			_ = time.Duration(c.Role.HeartbeatInterval).String()
		}
	})
}

func FuzzLoadProperties(f *testing.F) {
	for _, s := range []string{
		"", "# c\n! c\n", "redis.db=1", "redis.db: 1", "redis.db 1", "redis.db\t=\t1", "redis.db",
		"redis.key-prefix=a\\\n  b", "redis.key-prefix=a\\", "redis.key-prefix=\\u0041\\uD83D\\uDE00\\uDE00",
		"redis.key-prefix=\\u12", "redis.addrs[0]=a:1\nredis.addrs[1]=b:1", "redis.addrs[1]=a:1",
		"redis.addrs=a:1\nredis.addrs[0]=b:1", "baton.redis.tls=on\nbaton.redis.db=0", "\xff\xfe=\xe9",
		"\uFEFFredis.db=1\r\nredis.tls=yes\rredis.pool-size=3",
		"spring.redis.url=rediss://u:p@h:1/2", "spring.redis.url=redis://[::1", "server.port=${P:${Q}}",
		"spring.redis.sentinel.nodes[0]=a:1", "spring.data.redis.cluster.nodes=a:1,b:2\nspring.redis.host=x",
		"eureka.instance.hostname=[::1]\nspring.redis.port=${spring.redis.port}", "baton=1\nscheduler-lock=2",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := config.Load(config.Bytes(data, config.Properties))
		checkLoaded(t, c, err)
		c, err = config.Load(config.Sub("baton", config.Bytes(data, config.Properties)))
		checkLoaded(t, c, err)
		c, err = config.Load(config.Spring(config.Bytes(data, config.Properties)))
		checkLoaded(t, c, err)
	})
}
