package config_test

import (
	"errors"
	"fmt"

	"github.com/baton-go/baton/config"
)

func ExampleLoad() {
	cfg, err := config.Load(config.Map(map[string]any{
		"scheduler-lock": map[string]any{
			"touch-heartbeat-interval-in-milliseconds": 5000,
			"heartbeat-expiration-duration-in-seconds": 20,
		},
		"instance.app":  "billing",
		"instance.port": 8080,
		"redis.addrs":   "10.0.0.1:6379,10.0.0.2:6379",
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Role.HeartbeatInterval, cfg.Role.HeartbeatExpiration)
	fmt.Println(cfg.Instance.Tenant, cfg.Instance.App, cfg.Instance.Port)
	fmt.Println(cfg.Redis.Addrs, cfg.Redis.KeyPrefix)
	// Output:
	// 5s 20s
	// default billing 8080
	// [10.0.0.1:6379 10.0.0.2:6379] baton
}

func ExampleLoad_problems() {
	_, err := config.Load(config.Map(map[string]any{
		"scheduler-lock.heartbeat-expiration-duration-in-second":  45,
		"scheduler-lock.touch-heartbeat-interval-in-milliseconds": 30000,
		"synchronized-lock.enabled":                               "maybe",
		"redis.db":                                                -1,
	}))
	fmt.Println(err)
	var e *config.Error
	fmt.Println(errors.Is(err, config.ErrInvalid), errors.As(err, &e), len(e.Problems))
	// Output:
	// config: scheduler-lock.heartbeat-expiration-duration-in-second=45: unknown key; did you mean scheduler-lock.heartbeat-expiration-duration-in-seconds?
	// config: synchronized-lock.enabled=maybe: must be true or false (or yes/no, on/off, 1/0)
	// config: scheduler-lock.touch-heartbeat-interval-in-milliseconds=30000: must be less than half of scheduler-lock.heartbeat-expiration-duration-in-seconds (45 s) so one lost renewal is survivable
	// config: redis.db=-1: must not be negative
	// true true 4
}

func ExampleParseDuration() {
	for _, s := range []string{"30s", "1h30m", "PT30S", "PT1H30M", "P1DT2H", "PT0.5S", "P1M"} {
		d, err := config.ParseDuration(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(s, "=", d)
	}
	// Output:
	// 30s = 30s
	// 1h30m = 1h30m0s
	// PT30S = 30s
	// PT1H30M = 1h30m0s
	// P1DT2H = 26h0m0s
	// PT0.5S = 500ms
	// config: duration "P1M" has months, whose length varies; use days (P30D), or put minutes after T (PT5M)
}

func ExampleEnvName() {
	fmt.Println(config.EnvName("BATON_", "scheduler-lock.heartbeat-expiration-duration-in-seconds"))
	fmt.Println(config.EnvName("BATON_", "redis.addrs"))
	// Output:
	// BATON_SCHEDULER_LOCK_HEARTBEAT_EXPIRATION_DURATION_IN_SECONDS
	// BATON_REDIS_ADDRS
}

// Baton's keys inside a Spring application.yml: Sub reads the part under
// "baton" and ignores the rest of the file; yes/on are booleans, as in
// Spring; job-lock durations are written as ShedLock writes them.
func ExampleSub() {
	yml := []byte(`
spring:
  application:
    name: billing
baton:
  instance:
    app: billing
    port: 8080
  scheduler-lock:
    enabled: yes
  job-lock:
    default-lock-at-most-for: PT10M
`)
	cfg, err := config.Load(config.Sub("baton", config.Bytes(yml, config.YAML)))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Instance.App, cfg.Instance.Port, !cfg.Role.Disabled, cfg.JobLock.LockAtMostFor)
	// Output:
	// billing 8080 true 10m0s
}

// A Spring application.properties file, read by java.util.Properties'
// rules, with a list in Spring's index syntax.
func ExampleBytes_properties() {
	props := []byte(`# baton's keys beside the service's own
server.port=8080
baton.instance.app = billing
baton.redis.addrs[0]=10.0.0.1:26379
baton.redis.addrs[1]=10.0.0.2:26379
baton.redis.master-name: billing-redis
baton.synchronized-lock.enabled=off
`)
	cfg, err := config.Load(config.Sub("baton", config.Bytes(props, config.Properties)))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Instance.App, cfg.Redis.Where(), cfg.SyncLock.Disabled)
	// Output:
	// billing Sentinel master "billing-redis" via 10.0.0.1:26379,10.0.0.2:26379 true
}

// The instance ID from the configuration: load first, so that files and
// the environment (BATON_INSTANCE_PORT, ...) count.
func ExampleConfig_InstanceID() {
	cfg, err := config.Load(config.Map(map[string]any{
		"instance": map[string]any{"app": "billing", "tenant": "acme", "port": 8080, "ip": "10.0.0.7"},
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	id, err := cfg.InstanceID()
	fmt.Println(id, err)

	_, err = config.Default().InstanceID()
	fmt.Println(err)
	// Output:
	// 10.0.0.7:acme:billing:8080 <nil>
	// config: instance.app="": must be set to build the instance ID (env BATON_INSTANCE_APP, spring.application.name with config.Spring, or Config.Instance.App in code)
	// config: instance.port=0: must be set to build the instance ID (env BATON_INSTANCE_PORT, server.port with config.Spring, or Config.Instance.Port in code)
}

// A Spring Boot service's application.properties, as it is: the
// framework's keys, the Spring keys baton understands, and everything
// else ignored and listed.
func ExampleSpring() {
	file := []byte(`spring.application.name=billing
server.port=8080
multiple-tenant.tenant=acme
eureka.instance.ip-address=10.0.0.7
spring.redis.host=10.0.0.5
spring.redis.password=secret
scheduler-lock.heartbeat-expiration-duration-in-seconds=60
spring.datasource.url=jdbc:postgresql://db/billing
management.server.port=9090
`)
	cfg, err := config.Load(config.Spring(config.Bytes(file, config.Properties)), config.Env("BATON_"))
	if err != nil {
		fmt.Println(err)
		return
	}
	id, _ := cfg.InstanceID()
	fmt.Println(id, cfg.Redis.Addrs, cfg.Role.HeartbeatExpiration)
	fmt.Println(cfg.Ignored())
	// Output:
	// 10.0.0.7:acme:billing:8080 [10.0.0.5:6379] 1m0s
	// [management.server.port spring.datasource.url]
}
