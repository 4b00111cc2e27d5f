package config

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/synclock"
)

// Defaults of the keys that have one beyond the role and synclock
// packages' own.
const (
	// DefaultTenant is the default of instance.tenant.
	DefaultTenant = "default"
	// DefaultRedisAddr is the default of redis.addrs: a Redis on the
	// local host's standard port.
	DefaultRedisAddr = "127.0.0.1:6379"
	// DefaultKeyPrefix is the default of redis.key-prefix, the first part
	// of every Redis key baton writes.
	DefaultKeyPrefix = "baton"
)

// Config is the whole baton configuration, typed for the packages that use
// it. Load fills it from sources; Default returns the values used for
// every key no source sets. The package documentation lists the keys.
//
// Config prints and logs (String, GoString, LogValue) with passwords and
// tokens redacted.
type Config struct {
	// Instance holds the instance.* keys: the parts of this instance's
	// ID, for instanceid.Detect. App and Port are required by Detect,
	// not by Load, so that a program can set them in code.
	Instance instanceid.Options
	// Role holds the scheduler-lock.* keys, for the role package.
	Role role.Config
	// SyncLock holds the synchronized-lock.* keys, for the synclock
	// package.
	SyncLock synclock.Config
	// Redis holds the redis.* keys.
	Redis Redis
	// Consul holds the consul.* keys.
	Consul Consul
}

// Redis says how to reach Redis (redis.* keys). UniversalOptions turns it
// into go-redis options; the topology follows go-redis's rules: Sentinel
// when MasterName is set, else Cluster when Cluster is set or Addrs holds
// more than one address, else a single server.
type Redis struct {
	// Addrs are the host:port addresses of the server, of the cluster's
	// seed nodes, or of the Sentinels (redis.addrs). Default
	// [DefaultRedisAddr].
	Addrs []string
	// Cluster selects Redis Cluster even with a single seed address
	// (redis.cluster).
	Cluster bool
	// MasterName is the Sentinel master set's name; setting it selects
	// Sentinel (redis.master-name).
	MasterName string
	// Username and Password authenticate to the Redis servers
	// (redis.username, redis.password).
	Username string
	Password string
	// SentinelUsername and SentinelPassword authenticate to the
	// Sentinels when they differ from the servers' credentials
	// (redis.sentinel-username, redis.sentinel-password).
	SentinelUsername string
	SentinelPassword string
	// DB is the database number (redis.db); Cluster has only 0.
	DB int
	// TLS makes connections use TLS 1.2 or later with certificate
	// verification against the system roots (redis.tls).
	TLS bool
	// KeyPrefix starts every key baton writes (redis.key-prefix).
	// Default DefaultKeyPrefix.
	KeyPrefix string
}

// Consul says how to reach a Consul agent (consul.* keys). Empty fields
// leave the Consul client's own defaults and environment variables in
// force.
type Consul struct {
	// Address is the agent's address, host:port or a URL
	// (consul.address).
	Address string
	// Token is the ACL token (consul.token).
	Token string
	// Datacenter is the datacenter to use; empty means the agent's
	// (consul.datacenter).
	Datacenter string
	// TLS selects HTTPS to the agent (consul.tls); it is implied by an
	// https:// Address.
	TLS bool
	// CAFile is a PEM file of the CAs to trust (consul.tls-ca-file);
	// empty means the system's.
	CAFile string
	// CertFile and KeyFile are the client certificate and its key, for
	// agents that verify clients (consul.tls-cert-file,
	// consul.tls-key-file). Both or neither.
	CertFile, KeyFile string
	// KeyPrefix is the KV prefix of baton's data (consul.key-prefix).
	// Default DefaultKeyPrefix.
	KeyPrefix string
	// SessionTTLMin is the servers' session_ttl_min
	// (consul.session-ttl-min-in-seconds). Zero means Consul's default,
	// consulbackend.DefaultSessionTTLMin (10 s).
	SessionTTLMin time.Duration
	// LockDelay is the lock-delay of baton's sessions
	// (consul.lock-delay-in-milliseconds, default 0; see
	// consulbackend.WithLockDelay).
	LockDelay time.Duration
}

// APIConfig returns the Consul client configuration for c: the Consul
// client's defaults (and its CONSUL_* environment variables) with c's
// settings over them. Every call returns a new configuration the caller
// may change.
func (c Consul) APIConfig() *api.Config {
	cfg := api.DefaultConfig()
	if c.Address != "" {
		cfg.Address = c.Address
		if rest, ok := strings.CutPrefix(c.Address, "https://"); ok {
			cfg.Address, cfg.Scheme = rest, "https"
		} else if rest, ok := strings.CutPrefix(c.Address, "http://"); ok {
			cfg.Address, cfg.Scheme = rest, "http"
		}
	}
	if c.TLS {
		cfg.Scheme = "https"
	}
	if c.Token != "" {
		cfg.Token = c.Token
	}
	if c.Datacenter != "" {
		cfg.Datacenter = c.Datacenter
	}
	if c.CAFile != "" {
		cfg.TLSConfig.CAFile = c.CAFile
	}
	if c.CertFile != "" {
		cfg.TLSConfig.CertFile, cfg.TLSConfig.KeyFile = c.CertFile, c.KeyFile
	}
	return cfg
}

// ConsulStore returns a Consul store for c: on the agent c.Consul names,
// with its key prefix, session minimum and lock-delay, and a restart
// guard as long as the longest lease the configuration keeps (see
// consulbackend.WithRestartGuard). It refuses a
// configuration whose leases Consul cannot hold: a role TTL
// (scheduler-lock.heartbeat-expiration-duration-in-seconds) or lock hold
// (synchronized-lock.hold-duration-in-seconds) below the session minimum.
// The caller closes the store.
func (c Config) ConsulStore() (*consulbackend.Store, error) {
	min := c.Consul.SessionTTLMin
	if min == 0 {
		min = consulbackend.DefaultSessionTTLMin
	}
	r, l := c.Role.WithDefaults(), c.SyncLock.WithDefaults()
	var bad []Problem
	if !c.Role.Disabled && r.HeartbeatExpiration < min {
		bad = append(bad, Problem{Key: keyRoleExpiration, Value: strconv.FormatInt(int64(r.HeartbeatExpiration/time.Second), 10),
			Reason: fmt.Sprintf("must be at least the Consul session minimum of %v (%s): Consul cannot hold a role key for less", min, keyConsulTTLMin)})
	}
	if !c.SyncLock.Disabled && l.HoldDuration < min {
		bad = append(bad, Problem{Key: keyLockHold, Value: strconv.FormatInt(int64(l.HoldDuration/time.Second), 10),
			Reason: fmt.Sprintf("must be at least the Consul session minimum of %v (%s): Consul cannot hold a lock for less", min, keyConsulTTLMin)})
	}
	if len(bad) > 0 {
		return nil, &Error{Problems: bad}
	}
	opts := []consulbackend.Option{consulbackend.WithSessionTTLMin(min), consulbackend.WithLockDelay(c.Consul.LockDelay),
		consulbackend.WithRestartGuard(max(r.HeartbeatExpiration, l.HoldDuration))}
	if c.Consul.KeyPrefix != "" {
		opts = append(opts, consulbackend.WithPrefix(c.Consul.KeyPrefix))
	}
	return consulbackend.New(c.Consul.APIConfig(), opts...)
}

// Default returns the configuration Load returns when no source sets
// anything: the seed framework's defaults (heartbeat every 15 s, role TTL
// 45 s, lock retry every 1 s, lock hold at most 45 s, retry until
// success, both features enabled), tenant "default", Redis at
// 127.0.0.1:6379 with key prefix "baton", Consul with key prefix "baton"
// and a session minimum of 10 s. Role.SafetyMargin stays zero,
// which the role package reads as its own default.
func Default() Config {
	return Config{
		Instance: instanceid.Options{Tenant: DefaultTenant},
		Role: role.Config{
			HeartbeatInterval:   role.DefaultHeartbeatInterval,
			HeartbeatExpiration: role.DefaultHeartbeatExpiration,
		},
		SyncLock: synclock.Config{
			RetryInterval: synclock.DefaultRetryInterval,
			HoldDuration:  synclock.DefaultHoldDuration,
		},
		Redis: Redis{
			Addrs:     []string{DefaultRedisAddr},
			KeyPrefix: DefaultKeyPrefix,
		},
		Consul: Consul{
			KeyPrefix:     DefaultKeyPrefix,
			SessionTTLMin: consulbackend.DefaultSessionTTLMin,
		},
	}
}

// UniversalOptions returns go-redis options for r, for
// redis.NewUniversalClient. With TLS set, TLSConfig requires TLS 1.2 or
// later; the server name is taken from each address when dialling. Every
// call returns new options that the caller may change.
//
// ContextTimeoutEnabled is set: without it go-redis does not let a
// context's deadline end a read, so a call to a server that stopped
// answering waits for the client's ReadTimeout (5 s by default) whatever
// deadline baton gave it. The role elector does not depend on it (it stops
// waiting for a renewal at the tenure's deadline either way), but a
// renewal or a lock call that ends at its deadline frees its connection
// and lets the next try start on time. Keep it set if you change the
// options.
//
// Reconnecting after a server restart: after PoolSize dials in a row have
// failed (each tries DialerRetries times, 100 ms apart by default),
// go-redis fails every new dial at once and probes the server in the
// background about once a second until a dial succeeds. A client can
// therefore stay cut off for up to about a second after the server is
// back. go-redis offers no option for that probe interval; the role's
// timing should leave room for it (with the defaults, a master whose last
// renewal was sent at t retries from t + 15 s and steps down at
// t + 40.5 s).
func (r Redis) UniversalOptions() *redis.UniversalOptions {
	o := &redis.UniversalOptions{
		Addrs:                 slices.Clone(r.Addrs),
		MasterName:            r.MasterName,
		Username:              r.Username,
		Password:              r.Password,
		SentinelUsername:      r.SentinelUsername,
		SentinelPassword:      r.SentinelPassword,
		DB:                    r.DB,
		IsClusterMode:         r.Cluster,
		ContextTimeoutEnabled: true,
	}
	if r.TLS {
		o.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return o
}

// RedisStoreOptions returns the options of redisbackend.New that this
// configuration implies: the key prefix (redis.key-prefix) and a restart
// guard as long as the longest lease the role and the synchronized locks
// keep (the role TTL, scheduler-lock.heartbeat-expiration-duration-in-seconds,
// and synchronized-lock.hold-duration-in-seconds), so that a Redis
// restarted without its data grants no role or lock until every lease it
// lost has ended by its holder's clock. A program whose job locks
// (schedlock) keep longer leases appends its own
// redisbackend.WithRestartGuard; the last one given wins.
//
// It also keeps a slave's standing cost within one Redis command per
// heartbeat interval — half an interval's worth of member heartbeats, a
// third of watch-marker refreshes: every slave watches the role key, and
// its store refreshes the key's marker every third of the marker's life,
// which is set to nine heartbeat intervals (at least 30 s; 135 s at the
// defaults),
// and pings its pub/sub connection after a silence of the health check,
// which is set to two intervals (at least 15 s; 30 s at the defaults), so
// that the master's renewal, published every interval, keeps it from
// pinging. A pub/sub connection that broke silently is then replaced
// after at most four intervals (two health checks), and a slave that
// missed a release meanwhile claims at the role key's TTL as always.
//
//	store, err := redisbackend.New(rdb, cfg.RedisStoreOptions()...)
func (c Config) RedisStoreOptions() []redisbackend.Option {
	var opts []redisbackend.Option
	if c.Redis.KeyPrefix != "" {
		opts = append(opts, redisbackend.WithPrefix(c.Redis.KeyPrefix))
	}
	r := c.Role.WithDefaults()
	longest := max(r.HeartbeatExpiration, c.SyncLock.WithDefaults().HoldDuration)
	return append(opts, redisbackend.WithRestartGuard(longest),
		redisbackend.WithMarkerTTL(max(30*time.Second, 9*r.HeartbeatInterval)),
		redisbackend.WithHealthCheck(max(15*time.Second, 2*r.HeartbeatInterval)))
}

// String formats c as space-separated key=value pairs of every key, in
// the order of the reference table, with passwords and tokens redacted.
func (c Config) String() string {
	return pairs(&c, "")
}

// GoString is String in Go-like syntax, so that %#v redacts secrets too.
func (c Config) GoString() string {
	return "config.Config{" + pairs(&c, "") + "}"
}

// LogValue logs c as one group per section (instance, scheduler-lock,
// ...) named by the configuration keys, with passwords and tokens
// redacted.
func (c Config) LogValue() slog.Value {
	return logValue(&c, "")
}

// String formats r as space-separated key=value pairs of the redis.* keys
// with the passwords redacted.
func (r Redis) String() string {
	return pairs(&Config{Redis: r}, "redis.")
}

// GoString is String in Go-like syntax, so that %#v redacts secrets too.
func (r Redis) GoString() string {
	return "config.Redis{" + r.String() + "}"
}

// LogValue logs the redis.* keys with the passwords redacted.
func (r Redis) LogValue() slog.Value {
	return logValue(&Config{Redis: r}, "redis.")
}

// String formats c as space-separated key=value pairs of the consul.*
// keys with the token redacted.
func (c Consul) String() string {
	return pairs(&Config{Consul: c}, "consul.")
}

// GoString is String in Go-like syntax, so that %#v redacts secrets too.
func (c Consul) GoString() string {
	return "config.Consul{" + c.String() + "}"
}

// LogValue logs the consul.* keys with the token redacted.
func (c Consul) LogValue() slog.Value {
	return logValue(&Config{Consul: c}, "consul.")
}

// pairs formats the keys of c that start with prefix as key=value.
func pairs(c *Config, prefix string) string {
	var b strings.Builder
	for i := range keys {
		k := &keys[i]
		if !strings.HasPrefix(k.name, prefix) {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k.name)
		b.WriteByte('=')
		b.WriteString(shownValue(k, c))
	}
	return b.String()
}

// logValue builds a group per section of the keys that start with prefix;
// the prefix's own section is not repeated.
func logValue(c *Config, prefix string) slog.Value {
	var groups []slog.Attr
	var section string
	var attrs []slog.Attr
	flush := func() {
		if len(attrs) > 0 {
			groups = append(groups, slog.Attr{Key: section, Value: slog.GroupValue(attrs...)})
		}
		attrs = nil
	}
	for i := range keys {
		k := &keys[i]
		if !strings.HasPrefix(k.name, prefix) {
			continue
		}
		sec, name, _ := strings.Cut(k.name, ".")
		if sec != section {
			flush()
			section = sec
		}
		attrs = append(attrs, slog.Attr{Key: name, Value: slogValue(k, c)})
	}
	if prefix != "" {
		return slog.GroupValue(attrs...)
	}
	flush()
	return slog.GroupValue(groups...)
}

// shownValue formats the value of k in c for String: durations in the
// key's unit, lists comma-separated, secrets redacted.
func shownValue(k *key, c *Config) string {
	v := k.get(c)
	switch v := v.(type) {
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case time.Duration:
		return inUnit(v, k.kind.unit())
	case []string:
		items := make([]string, len(v))
		for i, s := range v {
			items[i] = showString(s)
		}
		return strings.Join(items, ",")
	case string:
		if k.secret {
			return redact(v)
		}
		if v == "" {
			return ""
		}
		return showString(v)
	}
	return fmt.Sprint(v)
}

// slogValue is the value of k in c for LogValue.
func slogValue(k *key, c *Config) slog.Value {
	switch v := k.get(c).(type) {
	case bool:
		return slog.BoolValue(v)
	case int64:
		return slog.Int64Value(v)
	case time.Duration:
		if unit := k.kind.unit(); v%unit == 0 {
			return slog.Int64Value(int64(v / unit))
		}
		return slog.StringValue(inUnit(v, k.kind.unit()))
	case []string:
		return slog.AnyValue(slices.Clone(v))
	case string:
		if k.secret {
			return slog.StringValue(redact(v))
		}
		return slog.StringValue(v)
	}
	return slog.StringValue(shownValue(k, c))
}

// inUnit formats d as a count of unit: "15000" for 15 s in milliseconds,
// "1.5" for 1500 ms in seconds.
func inUnit(d, unit time.Duration) string {
	if d%unit == 0 {
		return strconv.FormatInt(int64(d/unit), 10)
	}
	return strconv.FormatFloat(float64(d)/float64(unit), 'f', -1, 64)
}
