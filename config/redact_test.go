package config_test

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/baton-go/baton/config"
)

const (
	redisSecret    = "redis-secret-1"
	sentinelSecret = "sentinel-secret-2"
	consulSecret   = "consul-secret-3"
)

func secretConfig() config.Config {
	c := config.Default()
	c.Redis.Password = redisSecret
	c.Redis.SentinelPassword = sentinelSecret
	c.Consul.Token = consulSecret
	return c
}

func TestRedaction(t *testing.T) {
	c := secretConfig()
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	logger.Info("loaded", "config", c, "redis", c.Redis, "consul", c.Consul, "ptr", &c)
	textLogs := new(bytes.Buffer)
	slog.New(slog.NewTextHandler(textLogs, nil)).Info("loaded", "config", c)

	outputs := map[string]string{
		"String":        c.String(),
		"%v":            fmt.Sprintf("%v", c),
		"%+v":           fmt.Sprintf("%+v", c),
		"%#v":           fmt.Sprintf("%#v", c),
		"%v pointer":    fmt.Sprintf("%v", &c),
		"%s":            fmt.Sprintf("%s", c),
		"redis %v":      fmt.Sprintf("%v", c.Redis),
		"redis %+v":     fmt.Sprintf("%+v", c.Redis),
		"redis %#v":     fmt.Sprintf("%#v", c.Redis),
		"consul %+v":    fmt.Sprintf("%+v", c.Consul),
		"consul %#v":    fmt.Sprintf("%#v", c.Consul),
		"json log":      logs.String(),
		"text log":      textLogs.String(),
		"slice":         fmt.Sprintf("%v %+v", []config.Config{c}, []config.Redis{c.Redis}),
		"nested struct": fmt.Sprintf("%+v %#v", struct{ C config.Config }{c}, struct{ R config.Redis }{c.Redis}),
	}
	for name, out := range outputs {
		for _, secret := range []string{redisSecret, sentinelSecret, consulSecret} {
			if strings.Contains(out, secret) {
				t.Errorf("%s shows a secret:\n%s", name, out)
			}
		}
	}
	for _, name := range []string{"String", "%#v", "json log", "redis %v"} {
		if !strings.Contains(outputs[name], "<redacted>") {
			t.Errorf("%s does not mark the redaction:\n%s", name, outputs[name])
		}
	}
	if !strings.Contains(logs.String(), `"scheduler-lock":{"enabled":true,"touch-heartbeat-interval-in-milliseconds":15000`) {
		t.Errorf("JSON log does not group by section with key names:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"redis":{"addrs":["127.0.0.1:6379"]`) {
		t.Errorf("JSON log of Redis:\n%s", logs.String())
	}
}

func TestString(t *testing.T) {
	c := secretConfig()
	c.Instance.App = "my app"
	got := c.String()
	want := `scheduler-lock.enabled=true scheduler-lock.touch-heartbeat-interval-in-milliseconds=15000 ` +
		`scheduler-lock.heartbeat-expiration-duration-in-seconds=45 scheduler-lock.safety-margin-in-milliseconds=0 ` +
		`synchronized-lock.enabled=true synchronized-lock.retry-interval-in-milliseconds=1000 ` +
		`synchronized-lock.hold-duration-in-seconds=45 synchronized-lock.max-retries=0 synchronized-lock.claim-window-in-milliseconds=0 ` +
		`job-lock.default-lock-at-most-for=0s job-lock.default-lock-at-least-for=0s ` +
		`instance.app="my app" instance.tenant=default instance.port=0 instance.ip= instance.advertise-address= ` +
		`redis.addrs=127.0.0.1:6379 redis.cluster=false redis.master-name= redis.username= redis.password=<redacted> ` +
		`redis.sentinel-username= redis.sentinel-password=<redacted> redis.db=0 redis.tls=false redis.key-prefix=baton ` +
		`redis.tls-ca-file= redis.tls-cert-file= redis.tls-key-file= redis.tls-server-name= redis.tls-insecure-skip-verify=false ` +
		`redis.dial-timeout-in-milliseconds=5000 ` +
		`redis.read-timeout-in-milliseconds=5000 redis.write-timeout-in-milliseconds=5000 redis.pool-size=0 redis.fail-fast=true redis.client-log=debug redis.functions=false ` +
		`redis.layout=baton redis.shedlock-environment=default redis.shedlock-key-prefix=job-lock ` +
		`consul.address= consul.token=<redacted> consul.datacenter= consul.tls=false consul.tls-ca-file= ` +
		`consul.tls-cert-file= consul.tls-key-file= consul.key-prefix=baton consul.session-ttl-min-in-seconds=10 ` +
		`consul.lock-delay-in-milliseconds=0`
	if got != want {
		t.Errorf("String() =\n%s\nwant\n%s", got, want)
	}
	// An empty secret shows as empty, so "not set" stays visible.
	if s := (config.Redis{}).String(); !strings.Contains(s, "redis.password= ") {
		t.Errorf("empty password: %s", s)
	}
}

func TestUniversalOptions(t *testing.T) {
	c := mustLoad(t, config.File("testdata/baton.yaml"))
	o := c.Redis.UniversalOptions()
	if !reflect.DeepEqual(o.Addrs, c.Redis.Addrs) || !o.IsClusterMode || o.Username != "baton" || o.Password != "s3cret" ||
		o.SentinelUsername != "watcher" || o.SentinelPassword != "s3ntinel" || o.DB != 0 || o.MasterName != "" {
		t.Errorf("UniversalOptions() = %+v", o)
	}
	if !o.ContextTimeoutEnabled {
		t.Error("UniversalOptions leaves ContextTimeoutEnabled off: a context's deadline would not end a read")
	}
	if o.TLSConfig == nil || o.TLSConfig.MinVersion != tls.VersionTLS12 || o.TLSConfig.InsecureSkipVerify {
		t.Errorf("TLSConfig = %+v; want MinVersion TLS 1.2 with verification", o.TLSConfig)
	}
	o.Addrs[0] = "changed:1"
	if c.Redis.Addrs[0] == "changed:1" {
		t.Error("UniversalOptions shares Addrs with the Config")
	}

	o = config.Redis{Addrs: []string{"s:26379"}, MasterName: "mymaster", DB: 2}.UniversalOptions()
	if o.TLSConfig != nil || o.MasterName != "mymaster" || o.DB != 2 || o.IsClusterMode {
		t.Errorf("UniversalOptions() = %+v", o)
	}
}

// json.Marshal of a Config, of its Redis and Consul parts and of a struct
// that holds them shows no password or token; the rest keeps the shape
// encoding/json gives the struct.
func TestMarshalJSONRedacts(t *testing.T) {
	c := secretConfig()
	c.Redis.Username = "baton"
	outs := map[string]any{"config": c, "pointer": &c, "redis": c.Redis, "consul": c.Consul, "nested": struct{ R config.Redis }{c.Redis}}
	for name, v := range outs {
		js, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, secret := range []string{redisSecret, sentinelSecret, consulSecret} {
			if strings.Contains(string(js), secret) {
				t.Errorf("json.Marshal(%s) shows a secret: %s", name, js)
			}
		}
	}
	js, _ := json.Marshal(c)
	var back config.Config
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if back.Redis.Password != "<redacted>" || back.Redis.Username != "baton" || back.Consul.Token != "<redacted>" ||
		!reflect.DeepEqual(back.Redis.Addrs, c.Redis.Addrs) || back.Role != c.Role || back.Consul.KeyPrefix != c.Consul.KeyPrefix {
		t.Errorf("json of a Config decodes to %+v; want it with the secrets redacted", back)
	}
	// An unset secret stays empty, so "not set" stays visible.
	if js, _ := json.Marshal(config.Default()); !strings.Contains(string(js), `"Password":""`) {
		t.Errorf("json of the default Config: %s", js)
	}
}

// A reason holding several lines (an errors.Join) is one line in a
// problem's message.
func TestProblemOneLine(t *testing.T) {
	p := config.Problem{Key: "scheduler-lock", Value: "...", Reason: "role: a\nrole: b"}
	if got, want := p.String(), "config: scheduler-lock=...: role: a; role: b"; got != want {
		t.Errorf("String() = %q; want %q", got, want)
	}
}
