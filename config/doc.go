// Package config reads baton's configuration from files, the environment
// and maps, checks all of it, and returns it typed for the packages that
// use it: instanceid.Options, role.Config, synclock.Config, and the
// settings of the Redis and Consul clients. It parses YAML with
// go.yaml.in/yaml/v3 and TOML with go-toml, and needs no other
// configuration library; it builds without the Consul client, so a
// service that uses Redis only pulls none of it.
//
//	cfg, err := config.Load(config.File("baton.yaml"), config.Env("BATON_"))
//	if err != nil {
//		log.Fatal(err) // every problem, one per line
//	}
//	id, err := cfg.InstanceID()         // instance.* keys, after Load: the environment counts
//	store, err := cfg.RedisStore(ctx)   // client + store from the redis.* keys
//	defer store.Close()
//
// RedisStore makes the go-redis client (Redis.UniversalOptions: topology,
// credentials, timeouts, pool size, TLS, ContextTimeoutEnabled) and the
// store with RedisStoreOptions: the key prefix and a restart guard as
// long as the longest lease the configuration keeps (see redisbackend's
// "Restart guard"). It pings the store first and fails when the store
// does not answer or refuses the credentials, unless redis.fail-fast is
// false; go-redis's own messages go to slog's debug level
// (redis.client-log).
// For Consul, consulconfig.Store (github.com/baton-go/baton/config/consulconfig,
// a module of its own beside the Consul store's) makes the store from the
// consul.* keys after CheckConsul.
//
// The keys are the seed framework's (scheduler-lock.*, synchronized-lock.*)
// plus baton's own. Load merges its sources in order, later over earlier,
// and uses the default of every key none sets; Default returns those
// defaults.
//
// # Sources
//
// File picks the format from the extension (.yaml, .yml, .json, .toml,
// .properties); Bytes takes it as an argument; Map takes a Go map. In all
// three a key may be nested (redis: {db: 1}) or written with dots
// (redis.db: 1), as in Spring property files. A null value sets nothing.
//
// # Spring files
//
// Spring reads a Spring Boot service's application.properties or
// application.yml as it is:
//
//	config.Load(config.Spring(config.File("application.properties")), config.Env("BATON_"))
//
// It reads the framework's keys where the framework has them
// (scheduler-lock.*, synchronized-lock.*), baton's keys under "baton.",
// and these Spring keys:
//
//	spring.application.name                    instance.app
//	server.port                                instance.port
//	multiple-tenant.tenant                     instance.tenant
//	eureka.instance.ip-address                 instance.ip (also eureka.instance.hostname
//	                                           when it is an IP and ip-address is not set)
//	spring.redis.host, .port                   redis.addrs (host:port; Spring's defaults
//	                                           localhost and 6379 for the one not given)
//	spring.redis.url                           redis.addrs, redis.username, redis.password,
//	                                           redis.db, and redis.tls for rediss://
//	spring.redis.username, .password           redis.username, redis.password
//	spring.redis.database                      redis.db
//	spring.redis.ssl, .ssl.enabled             redis.tls
//	spring.redis.sentinel.master, .nodes       redis.master-name, redis.addrs
//	spring.redis.sentinel.username, .password  redis.sentinel-username, redis.sentinel-password
//	spring.redis.cluster.nodes                 redis.addrs and redis.cluster
//
// Spring Boot 3's spring.data.redis.* are read the same way; a file with
// both is read as Boot 3 reads it, from spring.data.redis.*. As in Spring,
// Sentinel wins over Cluster, Cluster over the URL, and the URL over host
// and port. Placeholders (${NAME}, ${NAME:default}) in these keys and the
// framework's are resolved from the file's keys and the environment; one
// that is not set and has no default is an error.
//
// Every other key of the file is ignored, and only there: Config.Ignored
// lists them (names only) and Load logs them once with slog.Default at
// debug level. Without Spring, a Spring key is an unknown key like any
// other. Where baton's key and a Spring key set one value, baton's key
// wins: baton.redis.addrs over spring.redis.host, and any later source
// (Env) over the file; the overridden Spring key is listed as ignored.
// Secrets stay redacted: spring.redis.password is redis.password.
//
// Sub reads baton's keys from one part of a larger file and ignores the
// rest, so a Spring service's application.yml or application.properties
// can hold them beside everything else:
//
//	config.Load(config.Sub("baton", config.File("application.yml")), config.Env("BATON_"))
//
// Sub reports the framework's keys at the top level of the file
// (scheduler-lock.*, synchronized-lock.*) rather than drop them: move
// them under the path, or read the file with Spring.
//
// Properties files follow java.util.Properties ('=', ':' or a blank
// between key and value, '#' and '!' comments, a trailing backslash
// continues a line, \uXXXX escapes) and Spring's key[0]=... lists.
// Booleans are read as Spring reads them: true/false, yes/no, on/off, 1/0,
// in any case. In every file and map, names may be spelled as Spring's
// relaxed binding allows: redis.keyPrefix, redis.key_prefix and
// redis.key-prefix are one key (messages use the kebab-case name). Multi-document YAML files (Spring profiles split by ---)
// are not supported: only the first document is read.
//
// Env reads the variables that start with a prefix. A key's variable is
// the prefix followed by the key upper-cased with '.' and '-' replaced by
// '_'; with the prefix "BATON_",
// BATON_SCHEDULER_LOCK_HEARTBEAT_EXPIRATION_DURATION_IN_SECONDS sets
// scheduler-lock.heartbeat-expiration-duration-in-seconds. Because '_'
// stands for three characters, names are resolved by looking them up in
// the table of keys, never by guessing. A variable with the prefix that
// names no key is reported; one set to the empty string is ignored.
//
// # Values
//
// Every source may give any value as a string, converted the same way, so
// the environment can set everything:
//
//   - true or false: a boolean, or a string Spring accepts ("true",
//     "false", "yes", "no", "on", "off", "1", "0", in any case; also "t"
//     and "f").
//   - Whole numbers: an integer, a number without a fraction, or a string
//     of decimal digits. Durations are whole numbers in the unit the key
//     names (-in-milliseconds, -in-seconds), as in the seed framework; a
//     string such as "15s" is rejected with the number to write instead.
//   - Strings must be strings: in YAML write password: "123456", not
//     password: 123456.
//   - Lists (redis.addrs): a list of strings, or one string of
//     comma-separated items ("10.0.0.1:6379,10.0.0.2:6379").
//   - Job-lock durations (job-lock.*) are text with a unit, in Go's form
//     ("30s", "10m") or ISO-8601 ("PT30S", "PT10M"), as ShedLock writes
//     them.
//
// # Rules
//
// Load returns a *Error, which wraps ErrInvalid, listing every problem at
// once, each as "config: key=value (from origin): reason":
//
//   - a key no table entry has, in any source (with the closest key if
//     there is a likely one), and a key set twice in one source;
//   - a value of the wrong type: "abc" for a number, "maybe" for a bool;
//   - a duration key that is zero or negative, or longer than 365 days
//     (backend.MaxTTL: no store holds a longer lease; role.NewElector,
//     synclock.NewLocker and schedlock refuse the same durations with the
//     same check, backend.ValidateLease); a job-lock duration below 1 ms,
//     which a store would round up;
//   - scheduler-lock.touch-heartbeat-interval-in-milliseconds must be less
//     than half of scheduler-lock.heartbeat-expiration-duration-in-seconds,
//     so that the role key survives one lost renewal;
//   - scheduler-lock.safety-margin-in-milliseconds, if set, must be less
//     than the heartbeat interval;
//   - synchronized-lock.max-retries must not be negative, and times the
//     retry interval (the longest a waiter waits) at most 365 days;
//   - job-lock.default-lock-at-most-for, if set, must be positive, and
//     job-lock.default-lock-at-least-for must not exceed it;
//   - instance.port, if set, must be in 1..65535; instance.app and
//     instance.tenant, if set, must be usable in an instance ID (not empty,
//     at most 64 bytes, no ':', braces or spaces); instance.ip, if set, must
//     be an IP address an instance can advertise, and
//     instance.advertise-address must hold one;
//   - redis.addrs must hold at least one host:port, without credentials
//     (redis://:pw@host is refused, with the password redacted: it goes
//     in redis.password); redis.db must not be negative, and must be 0
//     with Redis Cluster; redis.cluster cannot be combined with
//     redis.master-name; redis.pool-size must be in 0..10000
//     (MaxPoolSize); redis.client-log is debug, off or keep;
//     redis.tls-cert-file and redis.tls-key-file go
//     together, and the TLS files must load;
//   - redis.key-prefix and consul.key-prefix hold only letters, digits
//     and - _ . : / (backend.ValidateKeyPrefix, the stores' own check): no
//     glob characters, which would make key listings and ACL patterns
//     match other prefixes, no braces, no spaces; consul.key-prefix
//     neither starts nor ends with '/';
//   - consul.address must be host:port or an http(s) URL, without
//     credentials (the ACL token goes in consul.token).
//
// Config.RedisStore, SpringRedisStore and CheckConsul apply the rules of
// their section again, so a Config built in Go cannot hand go-redis an
// absurd pool or a store a bad prefix. A store that answers but refuses
// the credentials fails RedisStore.Ping (and so RedisStore, by default) with
// "authentication failed at ADDR ... check redis.username and
// redis.password", wrapping backend.ErrAuth rather than ErrUnreachable.
//
// Load does not require instance.app and instance.port: programs often
// set them in code (a constant app name, the port of their listener).
// Config.InstanceID (instanceid.Detect) requires them, naming the key
// that is missing.
// Passwords and tokens are never shown in messages, String, logs or
// JSON (Redis and Consul marshal with them redacted), nor is the password
// of an address's userinfo.
//
// Config.Validate applies the same rules to a Config built in Go, where a
// zero field means its default.
//
// # The Redis client
//
// Redis.UniversalOptions sets ContextTimeoutEnabled, so that the deadline
// of a call's context ends it, reads included; go-redis's own default
// leaves reads to ReadTimeout (5 s). After a run of failed dials (PoolSize
// of them) go-redis stops dialling and probes the server about once a
// second, so a client may need up to about a second to reconnect after
// the server is back; no option changes that interval.
//
// go-redis logs its own messages (dial retries, pool errors) through one
// logger per process, by default to stderr. RedisStore and
// SpringRedisStore send them to slog.Default() at debug level instead,
// for every go-redis client of the process, unless redis.client-log says
// off (dropped) or keep (go-redis's logger left as it is, for a program
// that sets its own with redis.SetLogger). A client made from
// UniversalOptions alone leaves the logger alone.
//
// # Durations
//
// ParseDuration reads durations in Go's form ("30s", "1h30m") and in
// ISO-8601 ("PT30S", "P1D"), for job-lock settings such as ShedLock's
// lockAtMostFor; Duration is a time.Duration that decodes itself with it.
//
// # Keys
//
// The environment variable names assume Env("BATON_").
//
//	scheduler-lock.enabled
//	    default true; BATON_SCHEDULER_LOCK_ENABLED
//	    Elect a master. When false, no role key is written, IsMaster
//	    reports false, and master-only jobs never run.
//	scheduler-lock.touch-heartbeat-interval-in-milliseconds
//	    default 15000; BATON_SCHEDULER_LOCK_TOUCH_HEARTBEAT_INTERVAL_IN_MILLISECONDS
//	    How often the master renews the role key and a slave looks for a
//	    free one. Less than half of the expiration.
//	scheduler-lock.heartbeat-expiration-duration-in-seconds
//	    default 45; BATON_SCHEDULER_LOCK_HEARTBEAT_EXPIRATION_DURATION_IN_SECONDS
//	    Time to live of the role key: how long a crashed master keeps the
//	    role. At most 31536000 (365 days).
//	scheduler-lock.safety-margin-in-milliseconds
//	    default a tenth of the expiration, at most half of the interval
//	    (4500 with the defaults); BATON_SCHEDULER_LOCK_SAFETY_MARGIN_IN_MILLISECONDS
//	    How long before the server could expire the role key a master whose
//	    renewals fail stops calling itself master. Less than the interval.
//	synchronized-lock.enabled
//	    default true; BATON_SYNCHRONIZED_LOCK_ENABLED
//	    Enable cross-instance locks. When false, every lock call fails with
//	    synclock.ErrDisabled instead of running unlocked.
//	synchronized-lock.retry-interval-in-milliseconds
//	    default 1000; BATON_SYNCHRONIZED_LOCK_RETRY_INTERVAL_IN_MILLISECONDS
//	    Longest a waiter sleeps before trying again when no release wakes
//	    it.
//	synchronized-lock.hold-duration-in-seconds
//	    default 45; BATON_SYNCHRONIZED_LOCK_HOLD_DURATION_IN_SECONDS
//	    Longest one holder keeps a lock, so a crashed holder cannot
//	    dead-lock the others. At most 31536000 (365 days).
//	synchronized-lock.max-retries
//	    default 0; BATON_SYNCHRONIZED_LOCK_MAX_RETRIES
//	    How many times a waiter tries again after its first attempt; 0
//	    means until it gets the lock or its context ends. Times the retry
//	    interval, at most 365 days.
//	synchronized-lock.claim-window-in-milliseconds
//	    default 10000, at most the hold duration;
//	    BATON_SYNCHRONIZED_LOCK_CLAIM_WINDOW_IN_MILLISECONDS
//	    How long a lock is first granted for; a holder whose section runs
//	    a third of it extends the lease to the hold duration. An instance
//	    that dies just after it was granted or handed a lock blocks the
//	    others this long, not the whole hold duration.
//	job-lock.default-lock-at-most-for
//	    no default; BATON_JOB_LOCK_DEFAULT_LOCK_AT_MOST_FOR
//	    Lease of a job lock whose job gives lockAtMostFor 0, as ShedLock's
//	    defaultLockAtMostFor (cfg.JobLock among the job's schedlock options). "PT10M"
//	    or "10m"; 1 ms to 365 days.
//	job-lock.default-lock-at-least-for
//	    default 0s; BATON_JOB_LOCK_DEFAULT_LOCK_AT_LEAST_FOR
//	    How long after its start a run keeps a job lock whose job gives
//	    lockAtLeastFor 0, as ShedLock's defaultLockAtLeastFor.
//	instance.app
//	    no default; BATON_INSTANCE_APP
//	    Application (service) name, part of the instance ID. Required by
//	    instanceid.Detect.
//	instance.tenant
//	    default "default"; BATON_INSTANCE_TENANT
//	    Tenant the instance serves, part of the instance ID.
//	instance.port
//	    no default; BATON_INSTANCE_PORT
//	    Service port, 1..65535, part of the instance ID. Required by
//	    instanceid.Detect.
//	instance.ip
//	    default detected; BATON_INSTANCE_IP
//	    IP address the instance advertises, part of the instance ID. Wins
//	    over every detected address.
//	instance.advertise-address
//	    no default; BATON_INSTANCE_ADVERTISE_ADDRESS
//	    Address learnt from the environment, such as a Consul agent's
//	    advertise address; its IP is used when instance.ip is not set.
//	redis.addrs
//	    default 127.0.0.1:6379; BATON_REDIS_ADDRS (comma-separated)
//	    host:port of the Redis server, of the cluster's seed nodes, or of
//	    the Sentinels. More than one address without redis.master-name
//	    selects Redis Cluster. No credentials: use redis.password.
//	redis.cluster
//	    default false; BATON_REDIS_CLUSTER
//	    Use Redis Cluster even with a single seed address.
//	redis.master-name
//	    no default; BATON_REDIS_MASTER_NAME
//	    Sentinel master set name; setting it selects Sentinel.
//	redis.username
//	    no default; BATON_REDIS_USERNAME
//	    ACL user name for the Redis servers.
//	redis.password
//	    no default; BATON_REDIS_PASSWORD
//	    Password for the Redis servers. Redacted in messages and logs.
//	redis.sentinel-username
//	    no default; BATON_REDIS_SENTINEL_USERNAME
//	    ACL user name for the Sentinels.
//	redis.sentinel-password
//	    no default; BATON_REDIS_SENTINEL_PASSWORD
//	    Password for the Sentinels. Redacted in messages and logs.
//	redis.db
//	    default 0; BATON_REDIS_DB
//	    Database number; must be 0 with Redis Cluster.
//	redis.tls
//	    default false; BATON_REDIS_TLS
//	    Connect with TLS 1.2 or later, verifying the server's certificate
//	    against the system roots.
//	redis.key-prefix
//	    default baton; BATON_REDIS_KEY_PREFIX
//	    First part of every Redis key baton writes, as in
//	    baton:{tenant:app}:role. Letters, digits and - _ . : / only.
//	redis.tls-ca-file
//	    no default (the system's roots); BATON_REDIS_TLS_CA_FILE
//	    PEM file of the CAs that sign the servers' certificates. Implies
//	    redis.tls.
//	redis.tls-cert-file, redis.tls-key-file
//	    no default; BATON_REDIS_TLS_CERT_FILE, BATON_REDIS_TLS_KEY_FILE
//	    Client certificate and key (PEM), for servers that verify
//	    clients. Both or neither; they imply redis.tls.
//	redis.tls-server-name
//	    no default (the host dialled); BATON_REDIS_TLS_SERVER_NAME
//	    Name the servers' certificates must hold, when it is not the
//	    host of the address dialled. Implies redis.tls.
//	redis.tls-insecure-skip-verify
//	    default false; BATON_REDIS_TLS_INSECURE_SKIP_VERIFY
//	    Accept any server certificate: encrypted, but anyone on the path
//	    can pose as the server. For tests only. Implies redis.tls.
//	redis.dial-timeout-in-milliseconds
//	    default 5000; BATON_REDIS_DIAL_TIMEOUT_IN_MILLISECONDS
//	    Longest wait for a connection to a server.
//	redis.read-timeout-in-milliseconds
//	    default 5000; BATON_REDIS_READ_TIMEOUT_IN_MILLISECONDS
//	    Longest wait for a reply; a call's own deadline ends it sooner.
//	redis.write-timeout-in-milliseconds
//	    default 5000; BATON_REDIS_WRITE_TIMEOUT_IN_MILLISECONDS
//	    Longest wait to send a command.
//	redis.pool-size
//	    default 0 (go-redis's: 10 per GOMAXPROCS); BATON_REDIS_POOL_SIZE
//	    Most connections per server, at most 10000.
//	redis.fail-fast
//	    default true; BATON_REDIS_FAIL_FAST
//	    Config.RedisStore pings the store and fails with "store
//	    unreachable at ADDR", or "authentication failed at ADDR" when the
//	    server refuses the credentials. false (Redis.NoFailFast) returns
//	    the store unpinged: the service starts as a slave that waits for
//	    Redis.
//	redis.client-log
//	    default debug; BATON_REDIS_CLIENT_LOG
//	    Where go-redis's own messages (dial retries, pool errors) go:
//	    debug sends them to slog.Default() at debug level, off drops
//	    them, keep leaves go-redis's logger (stderr, or the program's
//	    redis.SetLogger). Process-wide, as go-redis has one logger; see
//	    ClientLogDebug.
//	redis.functions
//	    default false; BATON_REDIS_FUNCTIONS
//	    The store calls baton's Redis functions (FCALL) instead of
//	    sending Lua scripts, for an ACL user that may not send scripts (a
//	    tenant's, redisbackend.TenantACLRules); an administrator loads them
//	    first (redisbackend.LoadFunctions). Not with layout spring.
//	redis.layout
//	    default baton; BATON_REDIS_LAYOUT
//	    Key layout of the role and locks: baton, or spring for a fleet in
//	    which Java instances of the service (the Spring framework,
//	    ShedLock's Redis provider) run beside Go ones during a migration;
//	    build that store with Config.SpringRedisStore. Not with Cluster.
//	redis.shedlock-environment
//	    default default; BATON_REDIS_SHEDLOCK_ENVIRONMENT
//	    The Java side's ShedLock environment, in job-lock keys
//	    (job-lock:<environment>:<name>), with redis.layout spring.
//	redis.shedlock-key-prefix
//	    default job-lock; BATON_REDIS_SHEDLOCK_KEY_PREFIX
//	    The Java side's ShedLock key prefix, with redis.layout spring.
//	consul.address
//	    no default (the Consul client's: CONSUL_HTTP_ADDR or
//	    127.0.0.1:8500); BATON_CONSUL_ADDRESS
//	    Address of the Consul agent, host:port or a URL, without
//	    credentials (use consul.token).
//	consul.token
//	    no default; BATON_CONSUL_TOKEN
//	    ACL token. Redacted in messages and logs.
//	consul.datacenter
//	    no default (the agent's); BATON_CONSUL_DATACENTER
//	    Datacenter to use.
//	consul.tls
//	    default false; BATON_CONSUL_TLS
//	    Talk HTTPS to the agent (implied by an https:// address).
//	consul.tls-ca-file
//	    no default (the system's roots); BATON_CONSUL_TLS_CA_FILE
//	    PEM file of the CAs that sign the agent's certificate.
//	consul.tls-cert-file, consul.tls-key-file
//	    no default; BATON_CONSUL_TLS_CERT_FILE, BATON_CONSUL_TLS_KEY_FILE
//	    Client certificate and key, for agents that verify clients. Both
//	    or neither.
//	consul.key-prefix
//	    default baton; BATON_CONSUL_KEY_PREFIX
//	    First part of every Consul KV key baton writes, as in
//	    baton/lease/{tenant:app}:role. Letters, digits and - _ . : / only,
//	    neither starting nor ending with '/'.
//	consul.session-ttl-min-in-seconds
//	    default 10; BATON_CONSUL_SESSION_TTL_MIN_IN_SECONDS
//	    The servers' session_ttl_min: the shortest lease Consul holds.
//	    consulconfig.Store refuses a role TTL or lock hold below it (or
//	    above a day, the longest Consul session).
//	consul.lock-delay-in-milliseconds
//	    default 0; BATON_CONSUL_LOCK_DELAY_IN_MILLISECONDS
//	    How long Consul refuses a key after a session holding it ended
//	    without a release (at most 60000).
package config
