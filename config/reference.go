package config

import (
	"fmt"
	"strings"
)

// KeyDoc documents one configuration key, as the reference in
// docs/configuration.md shows it.
type KeyDoc struct {
	// Key is the key's name, as in a file: "redis.addrs".
	Key string
	// Default is the value the key takes when no source sets it, in
	// Markdown: a literal in backquotes, or words when it is derived
	// from other keys or from the environment ("none" when it has none).
	Default string
	// Env is the environment variable that sets the key, for the prefix
	// Reference was given, with a note in Markdown after it if any.
	Env string
	// Meaning says what the key does, in Markdown.
	Meaning string
}

// Reference documents every key, in the order of the reference table of
// docs/configuration.md, with the environment variables of envPrefix
// (Env's prefix, such as "BATON_"). That table is generated from it (go test
// ./config -run TestReadmeReference -update) and a test fails when they
// differ.
func Reference(envPrefix string) []KeyDoc {
	out := make([]KeyDoc, 0, len(keys))
	for _, k := range keys {
		d := keyDocs[k.name]
		env := "`" + EnvName(envPrefix, k.name) + "`"
		if d.env != "" {
			env += " " + d.env
		}
		out = append(out, KeyDoc{Key: k.name, Default: d.def, Env: env, Meaning: d.doc})
	}
	return out
}

// ReferenceTable renders Reference(envPrefix) as a Markdown table.
func ReferenceTable(envPrefix string) string {
	var b strings.Builder
	b.WriteString("| Key | Default | Environment variable | Meaning |\n")
	b.WriteString("|-----|---------|----------------------|---------|\n")
	for _, d := range Reference(envPrefix) {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.Key, d.Default, d.Env, d.Meaning)
	}
	return b.String()
}

// keyDoc is what Reference says of a key besides its name: its default,
// a note after its environment variable, and its meaning, in Markdown.
type keyDoc struct{ def, env, doc string }

// keyDocs documents every key of keys.
var keyDocs = map[string]keyDoc{
	keyRoleEnabled: {def: "`true`",
		doc: "Elect a master. When false, no role key is written, IsMaster reports false, and master-only jobs never run."},
	keyRoleInterval: {def: "`15000`",
		doc: "How often the master renews the role key and a slave looks for a free one. Must be less than half of the expiration, so the role survives one lost renewal."},
	keyRoleExpiration: {def: "`45`",
		doc: "Time to live of the role key: how long a crashed master keeps the role. At most `31536000` (365 days)."},
	keyRoleMargin: {def: "a tenth of the expiration, at most half of the interval (`4500` with the defaults)",
		doc: "How long before the server could expire the role key a master whose renewals fail stops calling itself master. Must be less than the interval."},
	keyLockEnabled: {def: "`true`",
		doc: "Enable cross-instance locks. When false, every lock call fails with `synclock.ErrDisabled` instead of running unlocked."},
	keyLockRetry: {def: "`1000`",
		doc: "Longest a waiter sleeps before trying again when no release wakes it."},
	keyLockHold: {def: "`45`",
		doc: "Longest one holder keeps a lock, so a crashed holder cannot dead-lock the others. At most `31536000` (365 days)."},
	keyLockMaxRetries: {def: "`0`",
		doc: "How many times a waiter tries again after its first attempt; `0` means until it gets the lock or its context ends. Times the retry interval, at most 365 days."},
	keyLockClaim: {def: "`10000`, at most the hold duration",
		doc: "How long a lock is first granted for; a holder whose section runs a third of it extends the lease to the hold duration. An instance that dies just after it was granted or handed a lock blocks the others this long, not the whole hold duration."},
	keyJobLockAtMost: {def: "none",
		doc: "Lease of a job lock whose job gives `lockAtMostFor` 0 — ShedLock's `defaultLockAtMostFor` (`cfg.JobLock` among the job's schedlock options). A duration with its unit: `PT10M` or `10m`; 1 ms to 365 days."},
	keyJobLockAtLeast: {def: "`0s`",
		doc: "How long after its start a run keeps a job lock whose job gives `lockAtLeastFor` 0 — ShedLock's `defaultLockAtLeastFor`. At most the default `lockAtMostFor`."},
	keyInstanceApp: {def: "none",
		doc: "Application (service) name, part of the instance ID. Required by `instanceid.Detect` (not by `Load`, so it can be set in code)."},
	keyInstanceTenant: {def: "`default`",
		doc: "Tenant the instance serves, part of the instance ID."},
	keyInstancePort: {def: "none",
		doc: "Service port, 1..65535, part of the instance ID. Required by `instanceid.Detect` (not by `Load`)."},
	keyInstanceIP: {def: "detected",
		doc: "IP address the instance advertises, part of the instance ID. Wins over every detected address."},
	keyInstanceAdvAddr: {def: "none",
		doc: "Address learnt from the environment, such as a Consul agent's advertise address; its IP is used when `instance.ip` is not set."},
	keyRedisAddrs: {def: "`127.0.0.1:6379`", env: "(comma-separated)",
		doc: "`host:port` of the Redis server, of the cluster's seed nodes, or of the Sentinels. More than one address without `redis.master-name` selects Redis Cluster. No credentials in it: the password goes in `redis.password`."},
	keyRedisCluster: {def: "`false`",
		doc: "Use Redis Cluster even with a single seed address."},
	keyRedisMasterName: {def: "none",
		doc: "Sentinel master set name; setting it selects Sentinel."},
	keyRedisUsername: {def: "none",
		doc: "ACL user name for the Redis servers."},
	keyRedisPassword: {def: "none",
		doc: "Password for the Redis servers. Redacted in messages and logs."},
	keyRedisSentinelUser: {def: "none",
		doc: "ACL user name for the Sentinels."},
	keyRedisSentinelPass: {def: "none",
		doc: "Password for the Sentinels. Redacted in messages and logs."},
	keyRedisDB: {def: "`0`",
		doc: "Database number; must be 0 with Redis Cluster."},
	keyRedisTLS: {def: "`false`",
		doc: "Connect with TLS 1.2 or later, verifying the server's certificate against the system roots."},
	keyRedisKeyPrefix: {def: "`baton`",
		doc: "First part of every Redis key baton writes, as in `baton:{tenant:app}:role`. Letters, digits and `- _ . : /` only (no glob characters, braces or spaces)."},
	keyRedisTLSCAFile: {def: "the system's roots",
		doc: "PEM file of the CAs that sign the servers' certificates. Implies `redis.tls`."},
	keyRedisTLSCertFile: {def: "none",
		doc: "Client certificate (PEM), for servers that verify clients; with `redis.tls-key-file`. Implies `redis.tls`."},
	keyRedisTLSKeyFile: {def: "none",
		doc: "Key of the client certificate (PEM)."},
	keyRedisTLSServer: {def: "the host dialled",
		doc: "Name the servers' certificates must hold, when it is not the host of the address dialled (an IP, a proxy, a tunnel). Implies TLS."},
	keyRedisTLSInsecure: {def: "`false`",
		doc: "Accept any server certificate: encrypted, but anyone on the path can pose as the server. For tests only. Implies TLS."},
	keyRedisDialTimeout: {def: "`5000`",
		doc: "Longest wait for a connection to a server."},
	keyRedisReadTimeout: {def: "`5000`",
		doc: "Longest wait for a reply; a call's own deadline ends it sooner."},
	keyRedisWriteTimeout: {def: "`5000`",
		doc: "Longest wait to send a command."},
	keyRedisPoolSize: {def: "go-redis's: 10 per `GOMAXPROCS`",
		doc: "Most connections per server, at most `10000`."},
	keyRedisFailFast: {def: "`true`",
		doc: "`cfg.RedisStore(ctx)` pings the store and fails with `store unreachable at ADDR`, or `authentication failed at ADDR` for refused credentials. `false` starts without the store: a slave that waits for Redis."},
	keyRedisClientLog: {def: "`debug`",
		doc: "Where go-redis's own messages (dial retries, pool errors) go: `debug` to `slog.Default()` at debug level, `off` nowhere, `keep` to go-redis's logger (stderr). Process-wide: go-redis has one logger."},
	keyRedisFunctions: {def: "`false`",
		doc: "The store calls baton's Redis functions (`FCALL`) instead of sending Lua scripts, for an ACL user that may not send scripts (a tenant's, `redisbackend.TenantACLRules`); an administrator loads them first (`redisbackend.LoadFunctions`). Not with layout `spring`. See [Tenants](redis.md#redis-in-production)."},
	keyRedisLayout: {def: "`baton`",
		doc: "Key layout of the role and locks: `baton`, or `spring` for a fleet in which Java instances (the Spring framework, ShedLock's Redis provider) run beside Go ones during a migration; build that store with `cfg.SpringRedisStore(ctx)` (`cfg.RedisStore` refuses it). Not with Cluster. See [Mixed Java/Go fleets](mixed-fleets.md)."},
	keyRedisShedLockEnv: {def: "`default`",
		doc: "The Java side's ShedLock environment, in job-lock keys `job-lock:<environment>:<name>` (layout `spring`)."},
	keyRedisShedLockPfx: {def: "`job-lock`",
		doc: "The Java side's ShedLock key prefix (layout `spring`)."},
	keyConsulAddress: {def: "the Consul client's (`CONSUL_HTTP_ADDR` or `127.0.0.1:8500`)",
		doc: "Address of the Consul agent, `host:port` or a URL, without credentials (the token goes in `consul.token`)."},
	keyConsulToken: {def: "none",
		doc: "ACL token. Redacted in messages and logs."},
	keyConsulDatacenter: {def: "the agent's",
		doc: "Datacenter to use."},
	keyConsulTLS: {def: "`false`",
		doc: "HTTPS to the agent (implied by an `https://` address)."},
	keyConsulCAFile: {def: "the system's roots",
		doc: "PEM file of the CAs that sign the agent's certificate."},
	keyConsulCertFile: {def: "none",
		doc: "Client certificate, for agents that verify clients; with `consul.tls-key-file`."},
	keyConsulKeyFile: {def: "none",
		doc: "Key of the client certificate."},
	keyConsulKeyPrefix: {def: "`baton`",
		doc: "First part of every Consul KV key baton writes (`baton/lease/{tenant:app}:role`). Letters, digits and `- _ . : /` only, neither starting nor ending with `/`."},
	keyConsulTTLMin: {def: "`10`",
		doc: "The servers' `session_ttl_min`; `consulconfig.Store` refuses a role TTL or lock hold below it (or above a day, the longest Consul session)."},
	keyConsulLockDelay: {def: "`0`",
		doc: "How long Consul refuses a key after a session that held it ended without a release (at most 60000)."},
}
