package config

import (
	"strings"
	"time"
)

// kind is the type of a key's value as written in a source.
type kind int

const (
	kindBool     kind = iota // true or false
	kindInt                  // a whole number
	kindMillis               // a whole number of milliseconds
	kindSeconds              // a whole number of seconds
	kindString               // a string
	kindList                 // a list of strings, or one comma-separated string
	kindDuration             // a duration with a unit: Go's form (30s) or ISO-8601 (PT30S)
)

// what describes a kind in error messages.
func (k kind) what() string {
	switch k {
	case kindBool:
		return "true or false (or yes/no, on/off, 1/0)"
	case kindInt:
		return "a whole number"
	case kindMillis:
		return "a whole number of milliseconds"
	case kindSeconds:
		return "a whole number of seconds"
	case kindList:
		return "a list of strings or one comma-separated string"
	case kindDuration:
		return "a duration such as 30s, 10m or PT30S"
	default:
		return "a string"
	}
}

// unit is the duration one count of a kindMillis or kindSeconds key stands
// for, or 0 for other kinds.
func (k kind) unit() time.Duration {
	switch k {
	case kindMillis:
		return time.Millisecond
	case kindSeconds:
		return time.Second
	}
	return 0
}

// key describes one configuration key: its name, type, and how its
// converted value is stored in and read back from a Config.
type key struct {
	name   string
	kind   kind
	secret bool // never shown in messages, String or logs

	// set stores v, converted to the key's kind (bool, int64, string or
	// []string), in c. Durations arrive as a count of the kind's unit.
	set func(c *Config, v any)
	// get reads the key's value from c, in the same representation set
	// takes, except that durations are returned as time.Duration.
	get func(c *Config) any
}

// Key names. They are the seed framework's property names where it has
// one; the rest follow its style.
const (
	keyRoleEnabled       = "scheduler-lock.enabled"
	keyRoleInterval      = "scheduler-lock.touch-heartbeat-interval-in-milliseconds"
	keyRoleExpiration    = "scheduler-lock.heartbeat-expiration-duration-in-seconds"
	keyRoleMargin        = "scheduler-lock.safety-margin-in-milliseconds"
	keyLockEnabled       = "synchronized-lock.enabled"
	keyLockRetry         = "synchronized-lock.retry-interval-in-milliseconds"
	keyLockHold          = "synchronized-lock.hold-duration-in-seconds"
	keyLockMaxRetries    = "synchronized-lock.max-retries"
	keyLockClaim         = "synchronized-lock.claim-window-in-milliseconds"
	keyJobLockAtMost     = "job-lock.default-lock-at-most-for"
	keyJobLockAtLeast    = "job-lock.default-lock-at-least-for"
	keyInstanceApp       = "instance.app"
	keyInstanceTenant    = "instance.tenant"
	keyInstancePort      = "instance.port"
	keyInstanceIP        = "instance.ip"
	keyInstanceAdvAddr   = "instance.advertise-address"
	keyRedisAddrs        = "redis.addrs"
	keyRedisCluster      = "redis.cluster"
	keyRedisMasterName   = "redis.master-name"
	keyRedisUsername     = "redis.username"
	keyRedisPassword     = "redis.password"
	keyRedisSentinelUser = "redis.sentinel-username"
	keyRedisSentinelPass = "redis.sentinel-password"
	keyRedisDB           = "redis.db"
	keyRedisTLS          = "redis.tls"
	keyRedisKeyPrefix    = "redis.key-prefix"
	keyRedisTLSCAFile    = "redis.tls-ca-file"
	keyRedisTLSCertFile  = "redis.tls-cert-file"
	keyRedisTLSKeyFile   = "redis.tls-key-file"
	keyRedisTLSServer    = "redis.tls-server-name"
	keyRedisTLSInsecure  = "redis.tls-insecure-skip-verify"
	keyRedisDialTimeout  = "redis.dial-timeout-in-milliseconds"
	keyRedisReadTimeout  = "redis.read-timeout-in-milliseconds"
	keyRedisWriteTimeout = "redis.write-timeout-in-milliseconds"
	keyRedisPoolSize     = "redis.pool-size"
	keyRedisFailFast     = "redis.fail-fast"
	keyRedisClientLog    = "redis.client-log"
	keyRedisFunctions    = "redis.functions"
	keyRedisLayout       = "redis.layout"
	keyRedisShedLockEnv  = "redis.shedlock-environment"
	keyRedisShedLockPfx  = "redis.shedlock-key-prefix"
	keyConsulAddress     = "consul.address"
	keyConsulToken       = "consul.token"
	keyConsulDatacenter  = "consul.datacenter"
	keyConsulTLS         = "consul.tls"
	keyConsulCAFile      = "consul.tls-ca-file"
	keyConsulCertFile    = "consul.tls-cert-file"
	keyConsulKeyFile     = "consul.tls-key-file"
	keyConsulKeyPrefix   = "consul.key-prefix"
	keyConsulTTLMin      = "consul.session-ttl-min-in-seconds"
	keyConsulLockDelay   = "consul.lock-delay-in-milliseconds"
)

// keys lists every configuration key, in the order of the reference table,
// of messages and of Config.String.
var keys = []key{
	{name: keyRoleEnabled, kind: kindBool,
		set: func(c *Config, v any) { c.Role.Disabled = !v.(bool) },
		get: func(c *Config) any { return !c.Role.Disabled }},
	{name: keyRoleInterval, kind: kindMillis,
		set: func(c *Config, v any) { c.Role.HeartbeatInterval = count(v, time.Millisecond) },
		get: func(c *Config) any { return c.Role.HeartbeatInterval }},
	{name: keyRoleExpiration, kind: kindSeconds,
		set: func(c *Config, v any) { c.Role.HeartbeatExpiration = count(v, time.Second) },
		get: func(c *Config) any { return c.Role.HeartbeatExpiration }},
	{name: keyRoleMargin, kind: kindMillis,
		set: func(c *Config, v any) { c.Role.SafetyMargin = count(v, time.Millisecond) },
		get: func(c *Config) any { return c.Role.SafetyMargin }},

	{name: keyLockEnabled, kind: kindBool,
		set: func(c *Config, v any) { c.SyncLock.Disabled = !v.(bool) },
		get: func(c *Config) any { return !c.SyncLock.Disabled }},
	{name: keyLockRetry, kind: kindMillis,
		set: func(c *Config, v any) { c.SyncLock.RetryInterval = count(v, time.Millisecond) },
		get: func(c *Config) any { return c.SyncLock.RetryInterval }},
	{name: keyLockHold, kind: kindSeconds,
		set: func(c *Config, v any) { c.SyncLock.HoldDuration = count(v, time.Second) },
		get: func(c *Config) any { return c.SyncLock.HoldDuration }},
	{name: keyLockMaxRetries, kind: kindInt,
		set: func(c *Config, v any) { c.SyncLock.MaxRetries = int(v.(int64)) },
		get: func(c *Config) any { return int64(c.SyncLock.MaxRetries) }},
	{name: keyLockClaim, kind: kindMillis,
		set: func(c *Config, v any) { c.SyncLock.ClaimWindow = count(v, time.Millisecond) },
		get: func(c *Config) any { return c.SyncLock.ClaimWindow }},

	{name: keyJobLockAtMost, kind: kindDuration,
		set: func(c *Config, v any) { c.JobLock.LockAtMostFor = v.(time.Duration) },
		get: func(c *Config) any { return c.JobLock.LockAtMostFor }},
	{name: keyJobLockAtLeast, kind: kindDuration,
		set: func(c *Config, v any) { c.JobLock.LockAtLeastFor = v.(time.Duration) },
		get: func(c *Config) any { return c.JobLock.LockAtLeastFor }},

	{name: keyInstanceApp, kind: kindString,
		set: func(c *Config, v any) { c.Instance.App = v.(string) },
		get: func(c *Config) any { return c.Instance.App }},
	{name: keyInstanceTenant, kind: kindString,
		set: func(c *Config, v any) { c.Instance.Tenant = v.(string) },
		get: func(c *Config) any { return c.Instance.Tenant }},
	{name: keyInstancePort, kind: kindInt,
		set: func(c *Config, v any) { c.Instance.Port = int(v.(int64)) },
		get: func(c *Config) any { return int64(c.Instance.Port) }},
	{name: keyInstanceIP, kind: kindString,
		set: func(c *Config, v any) { c.Instance.IP = v.(string) },
		get: func(c *Config) any { return c.Instance.IP }},
	{name: keyInstanceAdvAddr, kind: kindString,
		set: func(c *Config, v any) { c.Instance.AdvertiseAddr = v.(string) },
		get: func(c *Config) any { return c.Instance.AdvertiseAddr }},

	{name: keyRedisAddrs, kind: kindList,
		set: func(c *Config, v any) { c.Redis.Addrs = v.([]string) },
		get: func(c *Config) any { return c.Redis.Addrs }},
	{name: keyRedisCluster, kind: kindBool,
		set: func(c *Config, v any) { c.Redis.Cluster = v.(bool) },
		get: func(c *Config) any { return c.Redis.Cluster }},
	{name: keyRedisMasterName, kind: kindString,
		set: func(c *Config, v any) { c.Redis.MasterName = v.(string) },
		get: func(c *Config) any { return c.Redis.MasterName }},
	{name: keyRedisUsername, kind: kindString,
		set: func(c *Config, v any) { c.Redis.Username = v.(string) },
		get: func(c *Config) any { return c.Redis.Username }},
	{name: keyRedisPassword, kind: kindString, secret: true,
		set: func(c *Config, v any) { c.Redis.Password = v.(string) },
		get: func(c *Config) any { return c.Redis.Password }},
	{name: keyRedisSentinelUser, kind: kindString,
		set: func(c *Config, v any) { c.Redis.SentinelUsername = v.(string) },
		get: func(c *Config) any { return c.Redis.SentinelUsername }},
	{name: keyRedisSentinelPass, kind: kindString, secret: true,
		set: func(c *Config, v any) { c.Redis.SentinelPassword = v.(string) },
		get: func(c *Config) any { return c.Redis.SentinelPassword }},
	{name: keyRedisDB, kind: kindInt,
		set: func(c *Config, v any) { c.Redis.DB = int(v.(int64)) },
		get: func(c *Config) any { return int64(c.Redis.DB) }},
	{name: keyRedisTLS, kind: kindBool,
		set: func(c *Config, v any) { c.Redis.TLS = v.(bool) },
		get: func(c *Config) any { return c.Redis.TLS }},
	{name: keyRedisKeyPrefix, kind: kindString,
		set: func(c *Config, v any) { c.Redis.KeyPrefix = v.(string) },
		get: func(c *Config) any { return c.Redis.KeyPrefix }},
	{name: keyRedisTLSCAFile, kind: kindString,
		set: func(c *Config, v any) { c.Redis.CAFile = v.(string) },
		get: func(c *Config) any { return c.Redis.CAFile }},
	{name: keyRedisTLSCertFile, kind: kindString,
		set: func(c *Config, v any) { c.Redis.CertFile = v.(string) },
		get: func(c *Config) any { return c.Redis.CertFile }},
	{name: keyRedisTLSKeyFile, kind: kindString,
		set: func(c *Config, v any) { c.Redis.KeyFile = v.(string) },
		get: func(c *Config) any { return c.Redis.KeyFile }},
	{name: keyRedisTLSServer, kind: kindString,
		set: func(c *Config, v any) { c.Redis.ServerName = v.(string) },
		get: func(c *Config) any { return c.Redis.ServerName }},
	{name: keyRedisTLSInsecure, kind: kindBool,
		set: func(c *Config, v any) { c.Redis.InsecureSkipVerify = v.(bool) },
		get: func(c *Config) any { return c.Redis.InsecureSkipVerify }},
	{name: keyRedisDialTimeout, kind: kindMillis,
		set: func(c *Config, v any) { c.Redis.DialTimeout = count(v, time.Millisecond) },
		get: func(c *Config) any { return c.Redis.DialTimeout }},
	{name: keyRedisReadTimeout, kind: kindMillis,
		set: func(c *Config, v any) { c.Redis.ReadTimeout = count(v, time.Millisecond) },
		get: func(c *Config) any { return c.Redis.ReadTimeout }},
	{name: keyRedisWriteTimeout, kind: kindMillis,
		set: func(c *Config, v any) { c.Redis.WriteTimeout = count(v, time.Millisecond) },
		get: func(c *Config) any { return c.Redis.WriteTimeout }},
	{name: keyRedisPoolSize, kind: kindInt,
		set: func(c *Config, v any) { c.Redis.PoolSize = int(v.(int64)) },
		get: func(c *Config) any { return int64(c.Redis.PoolSize) }},
	{name: keyRedisFailFast, kind: kindBool,
		set: func(c *Config, v any) { c.Redis.NoFailFast = !v.(bool) },
		get: func(c *Config) any { return !c.Redis.NoFailFast }},
	{name: keyRedisClientLog, kind: kindString,
		set: func(c *Config, v any) { c.Redis.ClientLog = v.(string) },
		get: func(c *Config) any { return c.Redis.ClientLog }},
	{name: keyRedisFunctions, kind: kindBool,
		set: func(c *Config, v any) { c.Redis.Functions = v.(bool) },
		get: func(c *Config) any { return c.Redis.Functions }},
	{name: keyRedisLayout, kind: kindString,
		set: func(c *Config, v any) { c.Redis.Layout = v.(string) },
		get: func(c *Config) any { return c.Redis.Layout }},
	{name: keyRedisShedLockEnv, kind: kindString,
		set: func(c *Config, v any) { c.Redis.ShedLockEnvironment = v.(string) },
		get: func(c *Config) any { return c.Redis.ShedLockEnvironment }},
	{name: keyRedisShedLockPfx, kind: kindString,
		set: func(c *Config, v any) { c.Redis.ShedLockKeyPrefix = v.(string) },
		get: func(c *Config) any { return c.Redis.ShedLockKeyPrefix }},

	{name: keyConsulAddress, kind: kindString,
		set: func(c *Config, v any) { c.Consul.Address = v.(string) },
		get: func(c *Config) any { return c.Consul.Address }},
	{name: keyConsulToken, kind: kindString, secret: true,
		set: func(c *Config, v any) { c.Consul.Token = v.(string) },
		get: func(c *Config) any { return c.Consul.Token }},
	{name: keyConsulDatacenter, kind: kindString,
		set: func(c *Config, v any) { c.Consul.Datacenter = v.(string) },
		get: func(c *Config) any { return c.Consul.Datacenter }},
	{name: keyConsulTLS, kind: kindBool,
		set: func(c *Config, v any) { c.Consul.TLS = v.(bool) },
		get: func(c *Config) any { return c.Consul.TLS }},
	{name: keyConsulCAFile, kind: kindString,
		set: func(c *Config, v any) { c.Consul.CAFile = v.(string) },
		get: func(c *Config) any { return c.Consul.CAFile }},
	{name: keyConsulCertFile, kind: kindString,
		set: func(c *Config, v any) { c.Consul.CertFile = v.(string) },
		get: func(c *Config) any { return c.Consul.CertFile }},
	{name: keyConsulKeyFile, kind: kindString,
		set: func(c *Config, v any) { c.Consul.KeyFile = v.(string) },
		get: func(c *Config) any { return c.Consul.KeyFile }},
	{name: keyConsulKeyPrefix, kind: kindString,
		set: func(c *Config, v any) { c.Consul.KeyPrefix = v.(string) },
		get: func(c *Config) any { return c.Consul.KeyPrefix }},
	{name: keyConsulTTLMin, kind: kindSeconds,
		set: func(c *Config, v any) { c.Consul.SessionTTLMin = count(v, time.Second) },
		get: func(c *Config) any { return c.Consul.SessionTTLMin }},
	{name: keyConsulLockDelay, kind: kindMillis,
		set: func(c *Config, v any) { c.Consul.LockDelay = count(v, time.Millisecond) },
		get: func(c *Config) any { return c.Consul.LockDelay }},
}

// count turns a count of unit, as a converted duration key holds it, into
// a duration. The conversion has already checked that it does not
// overflow.
func count(v any, unit time.Duration) time.Duration {
	return time.Duration(v.(int64)) * unit
}

var (
	// keyIndex finds a key by name.
	keyIndex = make(map[string]*key, len(keys))
	// sections holds every proper prefix of a key name ("redis",
	// "scheduler-lock"): a path a source may hold a map at.
	sections = map[string]bool{}
	// envSuffixes finds a key by its environment variable name without
	// the prefix ("REDIS_DB").
	envSuffixes = make(map[string]*key, len(keys))
	// relaxed finds a key or section by its relaxed form (relaxedName),
	// so that files may spell names as Spring's relaxed binding allows.
	relaxed = map[string]string{}
)

func init() {
	for i := range keys {
		k := &keys[i]
		keyIndex[k.name] = k
		addRelaxed(k.name)
		for j := range len(k.name) {
			if k.name[j] == '.' {
				sections[k.name[:j]] = true
				addRelaxed(k.name[:j])
			}
		}
		s := envSuffix(k.name)
		if other, dup := envSuffixes[s]; dup {
			panic("config: keys " + other.name + " and " + k.name + " share the environment name " + s)
		}
		envSuffixes[s] = k
	}
}

// addRelaxed indexes a key or section name by its relaxed form.
func addRelaxed(name string) {
	r := relaxedName(name)
	if other, dup := relaxed[r]; dup && other != name {
		panic("config: keys " + other + " and " + name + " share the relaxed form " + r)
	}
	relaxed[r] = name
}

// relaxedName is the form in which Spring's relaxed binding compares
// property names: lower case, without '-' and '_', so that
// "touchHeartbeatIntervalInMilliseconds", "touch_heartbeat_..." and
// "touch-heartbeat-..." are one name. Dots still separate the parts.
func relaxedName(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '-' || r == '_':
			return -1
		case 'A' <= r && r <= 'Z':
			return r - 'A' + 'a'
		}
		return r
	}, name)
}

// canonical returns the key or section name that name stands for under
// relaxed binding, or name itself if it stands for none.
func canonical(name string) string {
	if _, ok := keyIndex[name]; ok || sections[name] {
		return name
	}
	if c, ok := relaxed[relaxedName(name)]; ok {
		return c
	}
	return name
}

// envSuffix is the environment variable name of a key without the prefix:
// the key upper-cased with '.' and '-' replaced by '_'.
func envSuffix(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '.' || r == '-':
			return '_'
		case 'a' <= r && r <= 'z':
			return r - 'a' + 'A'
		}
		return r
	}, name)
}

// EnvName returns the environment variable that sets the configuration key
// name when the variables are read with Env(prefix): the prefix, with a
// trailing '_' added if it lacks one, followed by the key upper-cased with
// '.' and '-' replaced by '_'. For example EnvName("BATON_",
// "redis.key-prefix") is "BATON_REDIS_KEY_PREFIX". It returns "" if name
// is not a configuration key.
func EnvName(prefix, name string) string {
	if _, ok := keyIndex[name]; !ok {
		return ""
	}
	return envPrefix(prefix) + envSuffix(name)
}

// Keys returns the name of every configuration key, in the order of the
// reference table in the package documentation.
func Keys() []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.name
	}
	return out
}

// suggest returns the known name closest to name by edit distance, or ""
// if none is close enough to be a likely typo.
func suggest(name string, known []string) string {
	best, bestDist := "", -1
	for _, k := range known {
		d := editDistance(name, k)
		if bestDist < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	if bestDist < 0 || bestDist > max(2, len(name)/5) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	if len(a) > 256 || len(b) > 256 {
		return max(len(a), len(b)) // too long to be a typo of a key; skip the work
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
