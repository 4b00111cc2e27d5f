package config

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/backend/springredis"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
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
	// DefaultDialTimeout is the default of
	// redis.dial-timeout-in-milliseconds, go-redis's own.
	DefaultDialTimeout = 5 * time.Second
	// DefaultReadTimeout and DefaultWriteTimeout are the defaults of
	// redis.read-timeout-in-milliseconds and
	// redis.write-timeout-in-milliseconds, go-redis's own.
	DefaultReadTimeout  = 5 * time.Second
	DefaultWriteTimeout = 5 * time.Second
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
	// JobLock holds the job-lock.* keys: the default durations of job
	// locks, a schedlock option (schedlock.Defaults), as ShedLock's
	// defaultLockAtMostFor and defaultLockAtLeastFor.
	JobLock schedlock.Defaults
	// Redis holds the redis.* keys.
	Redis Redis
	// Consul holds the consul.* keys.
	Consul Consul

	// ignored lists the keys of Spring sources that Load did not use
	// (Ignored).
	ignored []string
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
	// verification, against the system roots unless CAFile names others
	// (redis.tls). Setting CAFile or CertFile implies it.
	TLS bool
	// KeyPrefix starts every key baton writes (redis.key-prefix).
	// Default DefaultKeyPrefix.
	KeyPrefix string
	// CAFile is a PEM file of the CAs that sign the servers'
	// certificates (redis.tls-ca-file); empty means the system's roots.
	CAFile string
	// CertFile and KeyFile are a client certificate and its key, PEM, for
	// servers that verify clients (redis.tls-cert-file,
	// redis.tls-key-file). Both or neither.
	CertFile, KeyFile string
	// ServerName is the name the servers' certificates must hold
	// (redis.tls-server-name), when it is not the host of the address
	// dialled (a server reached through an IP, a proxy or a tunnel).
	ServerName string
	// InsecureSkipVerify accepts any server certificate
	// (redis.tls-insecure-skip-verify). The connection is encrypted but
	// anyone on the path can pose as the server: for tests only.
	InsecureSkipVerify bool
	// DialTimeout bounds connecting to a server
	// (redis.dial-timeout-in-milliseconds). Default DefaultDialTimeout.
	DialTimeout time.Duration
	// ReadTimeout and WriteTimeout bound one command's read and write
	// (redis.read-timeout-in-milliseconds,
	// redis.write-timeout-in-milliseconds); a call's context deadline
	// ends it sooner. Default DefaultReadTimeout and DefaultWriteTimeout.
	ReadTimeout, WriteTimeout time.Duration
	// PoolSize is the most connections the client keeps per server
	// (redis.pool-size). Zero means go-redis's default, 10 per
	// GOMAXPROCS.
	PoolSize int
	// NoFailFast lets Config.RedisStore and SpringRedisStore return a
	// store without pinging it (redis.fail-fast: false), for a service
	// that must start while Redis is down and wait for it as a slave. By
	// default (false) they ping and fail when the store does not answer
	// or refuses the credentials, since a service that starts anyway is a
	// slave that can never win.
	NoFailFast bool
	// ClientLog says where go-redis's own messages go (redis.client-log):
	// ClientLogDebug (the default, also for ""), ClientLogOff or
	// ClientLogKeep. See ClientLogDebug for why this is process-wide.
	ClientLog string
	// Functions makes the store call baton's Redis functions (FCALL)
	// instead of sending Lua scripts (redis.functions), for an ACL user
	// that may not send scripts (redisbackend.TenantACLRules); an
	// administrator loads them (redisbackend.LoadFunctions). Not with
	// LayoutSpring.
	Functions bool
	// Layout is the key layout of the role and locks (redis.layout):
	// LayoutBaton (the default), or LayoutSpring for a fleet in which
	// Java instances of the service run beside Go ones during a
	// migration (Config.SpringRedisStore, package springredis).
	Layout string
	// ShedLockEnvironment and ShedLockKeyPrefix are the environment and
	// key prefix of the Java side's ShedLock Redis provider, for
	// LayoutSpring (redis.shedlock-environment, default "default";
	// redis.shedlock-key-prefix, default "job-lock").
	ShedLockEnvironment, ShedLockKeyPrefix string
}

// The values of redis.layout.
const (
	// LayoutBaton is baton's own key layout (redisbackend).
	LayoutBaton = "baton"
	// LayoutSpring is the Spring framework's and ShedLock's key layout,
	// shared with Java instances (springredis).
	LayoutSpring = "spring"
)

// TLSEnabled reports whether connections to Redis use TLS: redis.tls is
// set, or a CA or client certificate file is given.
func (r Redis) TLSEnabled() bool {
	return r.TLS || r.CAFile != "" || r.CertFile != "" || r.ServerName != "" || r.InsecureSkipVerify
}

// TLSConfig returns the TLS configuration of the redis.tls* keys, or nil
// when TLS is off: TLS 1.2 or later, the CAs of CAFile (else the system's
// roots) and the client certificate of CertFile and KeyFile. It reads the
// files; an error names the key and the file.
func (r Redis) TLSConfig() (*tls.Config, error) {
	if !r.TLSEnabled() {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: r.ServerName, InsecureSkipVerify: r.InsecureSkipVerify}
	if r.CAFile != "" {
		pem, err := os.ReadFile(r.CAFile)
		if err != nil {
			return nil, fmt.Errorf("config: %s: %w", keyRedisTLSCAFile, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("config: %s=%s: no PEM certificate in the file: %w", keyRedisTLSCAFile, r.CAFile, ErrInvalid)
		}
		t.RootCAs = pool
	}
	if r.CertFile != "" || r.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(r.CertFile, r.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("config: %s=%s, %s=%s: %w", keyRedisTLSCertFile, r.CertFile, keyRedisTLSKeyFile, r.KeyFile, err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
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

// Bounds of a Consul session's TTL, as the Consul store (in the nested
// module github.com/baton-go/baton/backend/consulbackend) applies them:
// the servers' default session_ttl_min and the longest session they hold.
// config keeps its own copy so that it builds without the Consul client;
// consulconfig's tests check that the two agree.
const (
	// ConsulDefaultSessionTTLMin is the default of
	// consul.session-ttl-min-in-seconds, Consul's own default.
	ConsulDefaultSessionTTLMin = 10 * time.Second
	// ConsulMaxSessionTTL is the longest lease a Consul session holds.
	ConsulMaxSessionTTL = 24 * time.Hour
)

// CheckConsul reports what keeps c from making a Consul store: consul.*
// keys that Validate refuses (such as an address with credentials), and a
// role TTL (scheduler-lock.heartbeat-expiration-duration-in-seconds) or
// lock hold (synchronized-lock.hold-duration-in-seconds) that Consul's
// sessions cannot hold: below the session minimum or above a day
// (ConsulMaxSessionTTL). consulconfig.Store (in the module
// github.com/baton-go/baton/config/consulconfig) calls it before it makes
// the store; the error wraps ErrInvalid.
func (c Config) CheckConsul() error {
	min := cmp.Or(c.Consul.SessionTTLMin, ConsulDefaultSessionTTLMin)
	if err := sectionCheck(&Config{Consul: c.Consul}, "consul."); err != nil {
		return err
	}
	r, l := c.Role.WithDefaults(), c.SyncLock.WithDefaults()
	var bad []Problem
	if !c.Role.Disabled {
		bad = append(bad, consulLease(keyRoleExpiration, r.HeartbeatExpiration, min, "a role key")...)
	}
	if !c.SyncLock.Disabled {
		bad = append(bad, consulLease(keyLockHold, l.HoldDuration, min, "a lock")...)
	}
	if len(bad) > 0 {
		return &Error{Problems: bad}
	}
	return nil
}

// LongestLease is the longest lease the role and the synchronized locks
// keep: the role TTL
// (scheduler-lock.heartbeat-expiration-duration-in-seconds) or
// synchronized-lock.hold-duration-in-seconds, whichever is longer. The
// stores' restart guards made from a configuration last this long.
func (c Config) LongestLease() time.Duration {
	return max(c.Role.WithDefaults().HeartbeatExpiration, c.SyncLock.WithDefaults().HoldDuration)
}

// consulLease reports a lease key whose duration d a Consul session
// cannot hold: less than the session minimum min, or more than
// ConsulMaxSessionTTL.
func consulLease(name string, d, min time.Duration, what string) []Problem {
	value := inUnit(d, time.Second)
	switch {
	case d < min:
		return []Problem{{Key: name, Value: value, Reason: fmt.Sprintf("must be at least the Consul session minimum of %v (%s): Consul cannot hold %s for less", min, keyConsulTTLMin, what)}}
	case d > ConsulMaxSessionTTL:
		return []Problem{{Key: name, Value: value, Reason: fmt.Sprintf("must be at most %s with Consul, the longest session it holds: Consul cannot hold %s for longer",
			limitText(name, ConsulMaxSessionTTL), what)}}
	}
	return nil
}

// check applies Validate's rules of the redis.* keys to r, so that a store
// is never made from an address with credentials, an absurd pool size or
// a key prefix the store refuses, whether r was loaded or built in Go.
func (r Redis) check() error {
	return sectionCheck(&Config{Redis: r}, "redis.")
}

// sectionCheck returns the problems Validate finds in c under the keys
// that start with prefix, or nil.
func sectionCheck(c *Config, prefix string) error {
	var e *Error
	if err := c.Validate(); !errors.As(err, &e) {
		return err
	}
	var mine []Problem
	for _, p := range e.Problems {
		if strings.HasPrefix(p.Key, prefix) {
			mine = append(mine, p)
		}
	}
	if len(mine) == 0 {
		return nil
	}
	return &Error{Problems: mine}
}

// lockDefaults is synclock's defaults of the seed's two keys with one:
// retry interval and hold duration. ClaimWindow stays zero, so that it
// follows a configured hold duration.
func lockDefaults() synclock.Config {
	d := synclock.Config{}.WithDefaults()
	return synclock.Config{RetryInterval: d.RetryInterval, HoldDuration: d.HoldDuration}
}

// Default returns the configuration Load returns when no source sets
// anything: the seed framework's defaults (heartbeat every 15 s, role TTL
// 45 s, lock retry every 1 s, lock hold at most 45 s, retry until
// success, both features enabled), tenant "default", Redis at
// 127.0.0.1:6379 with key prefix "baton", pinged when the store is made
// (redis.fail-fast) and with go-redis's own messages at slog's debug
// level (redis.client-log), Consul with key prefix "baton" and a session
// minimum of 10 s. Role.SafetyMargin stays zero,
// which the role package reads as its own default.
func Default() Config {
	roleDefaults := role.Config{}.WithDefaults()
	return Config{
		Instance: instanceid.Options{Tenant: DefaultTenant},
		Role: role.Config{
			HeartbeatInterval:   roleDefaults.HeartbeatInterval,
			HeartbeatExpiration: roleDefaults.HeartbeatExpiration,
		},
		SyncLock: lockDefaults(),
		Redis: Redis{
			Addrs:        []string{DefaultRedisAddr},
			KeyPrefix:    DefaultKeyPrefix,
			Layout:       LayoutBaton,
			DialTimeout:  DefaultDialTimeout,
			ReadTimeout:  DefaultReadTimeout,
			WriteTimeout: DefaultWriteTimeout,

			ClientLog: ClientLogDebug,

			ShedLockEnvironment: "default",
			ShedLockKeyPrefix:   "job-lock",
		},
		Consul: Consul{
			KeyPrefix:     DefaultKeyPrefix,
			SessionTTLMin: ConsulDefaultSessionTTLMin,
		},
	}
}

// UniversalOptions returns go-redis options for r, for
// redis.NewUniversalClient: addresses and topology, credentials, database,
// timeouts, pool size and TLS (TLSConfig: TLS 1.2 or later; the server
// name is taken from each address when dialling). Every call returns new
// options that the caller may change. ClientOptions is the same with an
// error for TLS files that cannot be read; here such an error makes every
// dial fail with it. Config.RedisStore makes the client and the store in
// one call. UniversalOptions does not check r: call Config.Validate first
// (Load does), or use RedisStore, which refuses what Validate refuses
// (such as a pool size above MaxPoolSize, which go-redis would allocate
// at once).
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
		DialTimeout:           r.DialTimeout,
		ReadTimeout:           r.ReadTimeout,
		WriteTimeout:          r.WriteTimeout,
		PoolSize:              r.PoolSize,
	}
	t, err := r.TLSConfig()
	if err != nil {
		o.Dialer = func(context.Context, string, string) (net.Conn, error) { return nil, err }
	}
	o.TLSConfig = t
	return o
}

// ClientOptions is UniversalOptions, with an error if the TLS files
// (redis.tls-ca-file, redis.tls-cert-file, redis.tls-key-file) cannot be
// read.
func (r Redis) ClientOptions() (*redis.UniversalOptions, error) {
	if _, err := r.TLSConfig(); err != nil {
		return nil, err
	}
	return r.UniversalOptions(), nil
}

// Where describes the Redis r names, for messages: its address, the
// cluster's seed addresses, or the Sentinel master set and its Sentinels,
// with the password of any address's userinfo redacted.
func (r Redis) Where() string {
	shown := make([]string, len(r.Addrs))
	for i, a := range r.Addrs {
		shown[i] = backend.HideUserinfo(a)
	}
	addrs := strings.Join(shown, ",")
	switch {
	case r.MasterName != "":
		return fmt.Sprintf("Sentinel master %q via %s", r.MasterName, addrs)
	case r.Cluster || len(r.Addrs) > 1:
		return "Redis Cluster " + addrs
	}
	return addrs
}

// RedisStore is a Redis store together with the client it runs on, as
// Config.RedisStore makes them. It is a backend.Store (and every optional
// interface redisbackend.Store implements); Close closes the store and
// then the client.
type RedisStore struct {
	*redisbackend.Store
	// Client is the go-redis client the store uses; the application may
	// use it too, until Close.
	Client redis.UniversalClient
	redis  Redis // the redis.* keys, for messages
}

// Close closes the store's pub/sub connection and then the client.
func (s *RedisStore) Close() error {
	return errors.Join(s.Store.Close(), s.Client.Close())
}

// Ping checks that the store answers, within ctx. Its error wraps
// ErrUnreachable and the client's error, and names the address:
// "config: store unreachable at 10.0.0.5:6379 (redis.addrs): dial tcp
// ...: connection refused". When the server answers but refuses the
// credentials (a wrong password, none where one is needed), the error
// wraps backend.ErrAuth instead and names the keys to fix:
// "config: authentication failed at 10.0.0.5:6379: the server refused
// the credentials; check redis.username and redis.password: WRONGPASS
// ...".
func (s *RedisStore) Ping(ctx context.Context) error { return pingRedis(ctx, s.Client, s.redis) }

// pingRedis pings rdb, the client of the Redis r names, and explains a
// failure with pingError.
func pingRedis(ctx context.Context, rdb redis.UniversalClient, r Redis) error {
	if err := rdb.Ping(ctx).Err(); err != nil {
		return pingError(r, err)
	}
	return nil
}

// RedisStore returns a store on the Redis the redis.* keys name, ready to
// use: a go-redis client made with the redis.* keys (Redis.ClientOptions:
// topology, credentials, timeouts, pool size, TLS, ContextTimeoutEnabled)
// and a redisbackend store on it with the options RedisStoreOptions gives
// (the key prefix, a restart guard as long as the longest configured
// lease, marker and health-check timing for the heartbeat). opts are
// appended, so they win.
//
// Unless redis.fail-fast is false (Redis.NoFailFast), it then pings the
// store, bounded by ctx and by the dial and read timeouts, and returns an
// error wrapping ErrUnreachable that names the address when nothing
// answers, or wrapping backend.ErrAuth when the server refuses the
// credentials (see RedisStore.Ping). With redis.fail-fast false it does
// not talk to Redis, and the role and locks wait for Redis as they would
// for a restart.
//
// It routes go-redis's own log messages as redis.client-log says (by
// default to slog.Default() at debug level; see ClientLogDebug): that
// setting is process-wide, because go-redis has one logger per process.
//
// It first applies Validate's rules of the redis.* keys, so that
// a Config built in Go with an address holding credentials, an absurd
// pool size or a key prefix the store refuses fails with an *Error naming
// the key. The caller closes the store, which closes the client.
func (c Config) RedisStore(ctx context.Context, opts ...redisbackend.Option) (*RedisStore, error) {
	if c.Redis.Layout == LayoutSpring {
		return nil, &Error{Problems: []Problem{{Key: keyRedisLayout, Value: LayoutSpring,
			Reason: "asks for the Spring framework's key layout: build the store with Config.SpringRedisStore"}}}
	}
	rdb, err := c.Redis.client()
	if err != nil {
		return nil, err
	}
	store, err := redisbackend.New(rdb, append(c.RedisStoreOptions(), opts...)...)
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("config: redis store: %w", err)
	}
	s := &RedisStore{Store: store, Client: rdb, redis: c.Redis}
	if err := c.failFast(ctx, s.Ping); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// client checks the redis.* keys as Validate does, routes go-redis's log
// as redis.client-log says and makes the client they describe.
func (r Redis) client() (redis.UniversalClient, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	o, err := r.ClientOptions()
	if err != nil {
		return nil, err
	}
	r.routeClientLog()
	return redis.NewUniversalClient(o), nil
}

// failFast pings a new store with ping unless redis.fail-fast is false,
// bounded by ctx and by the dial and read timeouts.
func (c Config) failFast(ctx context.Context, ping func(context.Context) error) error {
	if c.Redis.NoFailFast {
		return nil
	}
	r := c.Redis
	bound := cmp.Or(r.DialTimeout, DefaultDialTimeout) + cmp.Or(r.ReadTimeout, DefaultReadTimeout)
	pctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	return ping(pctx)
}

// SpringRedisStore is a springredis store together with the client it
// runs on, as Config.SpringRedisStore makes them; Close closes both.
type SpringRedisStore struct {
	*springredis.Store
	// Client is the go-redis client the store uses.
	Client redis.UniversalClient
	redis  Redis // the redis.* keys, for messages
}

// Close closes the store and then the client.
func (s *SpringRedisStore) Close() error {
	return errors.Join(s.Store.Close(), s.Client.Close())
}

// Ping checks that the store answers, within ctx (see RedisStore.Ping).
func (s *SpringRedisStore) Ping(ctx context.Context) error { return pingRedis(ctx, s.Client, s.redis) }

// SpringRedisStore returns a store in the Spring framework's and
// ShedLock's key layout (package springredis), for a fleet in which Java
// and Go instances of one service share one election and one set of locks
// during a migration: the client as RedisStore makes it, ShedLock's
// environment and key prefix from redis.shedlock-environment and
// redis.shedlock-key-prefix, and baton's own records with the options
// RedisStoreOptions gives, then opts. It refuses a Cluster (the Java
// side's keys carry no hash tag). redis.fail-fast and redis.client-log
// work as for RedisStore.
func (c Config) SpringRedisStore(ctx context.Context, opts ...redisbackend.Option) (*SpringRedisStore, error) {
	rdb, err := c.Redis.client()
	if err != nil {
		return nil, err
	}
	layout := springredis.Layout{Environment: c.Redis.ShedLockEnvironment, JobKeyPrefix: c.Redis.ShedLockKeyPrefix}
	store, err := springredis.New(rdb, layout, append(c.RedisStoreOptions(), opts...)...)
	if err != nil {
		rdb.Close()
		return nil, fmt.Errorf("config: spring redis store: %w", err)
	}
	s := &SpringRedisStore{Store: store, Client: rdb, redis: c.Redis}
	if err := c.failFast(ctx, s.Ping); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// InstanceID computes this instance's ID from the instance.* keys with
// instanceid.Detect; from a Spring file read with Spring, those are
// eureka.instance.ip-address, multiple-tenant.tenant,
// spring.application.name and server.port, as the framework built it. Load the configuration first, so that files and the
// environment (BATON_INSTANCE_PORT, ...) count. When instance.app or
// instance.port is not set, the error is an *Error naming the keys; other
// errors wrap instanceid's.
func (c Config) InstanceID() (instanceid.ID, error) {
	var missing []Problem
	if c.Instance.App == "" {
		missing = append(missing, Problem{Key: keyInstanceApp, Value: `""`,
			Reason: "must be set to build the instance ID (env " + EnvName("BATON_", keyInstanceApp) + ", spring.application.name with config.Spring, or Config.Instance.App in code)"})
	}
	if c.Instance.Port == 0 {
		missing = append(missing, Problem{Key: keyInstancePort, Value: "0",
			Reason: "must be set to build the instance ID (env " + EnvName("BATON_", keyInstancePort) + ", server.port with config.Spring, or Config.Instance.Port in code)"})
	}
	if len(missing) > 0 {
		return instanceid.ID{}, &Error{Problems: missing}
	}
	id, err := instanceid.Detect(c.Instance)
	if err != nil {
		return instanceid.ID{}, fmt.Errorf("config: instance ID from the instance.* keys: %w", err)
	}
	return id, nil
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
	if c.Redis.Functions {
		opts = append(opts, redisbackend.WithFunctions())
	}
	r := c.Role.WithDefaults()
	return append(opts, redisbackend.WithRestartGuard(c.LongestLease()),
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

// MarshalJSON encodes r as encoding/json encodes the struct, field by
// field, with the passwords redacted and the password of any address's
// userinfo too, so that json.Marshal of a Config (or of anything that
// holds a Redis) reveals no secret. The result is for reading: decoding
// it gives "<redacted>" for every password that was set.
func (r Redis) MarshalJSON() ([]byte, error) {
	type plain Redis // without this method
	p := plain(r)
	p.Password, p.SentinelPassword = redact(p.Password), redact(p.SentinelPassword)
	p.Addrs = make([]string, len(r.Addrs))
	for i, a := range r.Addrs {
		p.Addrs[i] = backend.HideUserinfo(a)
	}
	if r.Addrs == nil {
		p.Addrs = nil
	}
	return json.Marshal(p)
}

// MarshalJSON encodes c as encoding/json encodes the struct, with the
// token and the password of the address's userinfo redacted (see
// Redis.MarshalJSON).
func (c Consul) MarshalJSON() ([]byte, error) {
	type plain Consul // without this method
	p := plain(c)
	p.Token, p.Address = redact(p.Token), backend.HideUserinfo(p.Address)
	return json.Marshal(p)
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
		if k.kind == kindDuration {
			return v.String()
		}
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
		if k.kind == kindDuration {
			return slog.StringValue(v.String())
		}
		if unit := k.kind.unit(); v%unit == 0 {
			return slog.Int64Value(int64(v / unit))
		}
		return slog.StringValue(inUnit(v, k.kind.unit()))
	case []string:
		items := make([]string, len(v))
		for i, s := range v {
			items[i] = backend.HideUserinfo(s)
		}
		return slog.AnyValue(items)
	case string:
		if k.secret {
			return slog.StringValue(redact(v))
		}
		return slog.StringValue(backend.HideUserinfo(v))
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
