package config

import (
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/instanceid"
)

// MaxPoolSize is the largest redis.pool-size: Redis's default maxclients.
// go-redis sets a pool of that many connections up when it makes the
// client, so an absurd size would exhaust the process's memory at once.
const MaxPoolSize = 10000

// Validate reports every rule c breaks, under the configuration keys, in
// one *Error that wraps ErrInvalid; nil if there is none. It is for a
// Config built or changed in Go: Load already validates what it returns.
// A zero field counts as not set, so it takes its default and is never
// reported; Load, which knows which keys a source set, also rejects an
// explicit zero where one is meaningless (a zero heartbeat interval, an
// empty tenant, port 0).
func (c Config) Validate() error {
	st := &state{set: map[string]bool{}, bad: map[string]bool{}, origin: map[string]string{}}
	for i := range keys {
		if v := reflect.ValueOf(keys[i].get(&c)); !v.IsZero() {
			st.set[keys[i].name] = true
		}
	}
	if problems := check(&c, st); len(problems) > 0 {
		return &Error{Problems: problems}
	}
	return nil
}

// state tells check what the sources said about each key.
type state struct {
	set    map[string]bool   // keys a source set (Load) or that are non-zero (Validate)
	bad    map[string]bool   // keys whose value did not convert; their rules are skipped
	origin map[string]string // where each key's value came from
}

// checker collects the problems of one Config.
type checker struct {
	c        *Config
	st       *state
	problems []Problem
}

// add records that key's current value breaks a rule.
func (ch *checker) add(name, reason string) {
	k := keyIndex[name]
	ch.problems = append(ch.problems, Problem{
		Key:    name,
		Value:  shortenShown(k, ch.c),
		Origin: ch.st.origin[name],
		Reason: reason,
	})
}

// shortenShown formats key k's value in c for a message.
func shortenShown(k *key, c *Config) string {
	s := shownValue(k, c)
	if s == "" {
		return `""`
	}
	return shorten(s)
}

// given reports whether key was set and converted, so its rules apply.
func (ch *checker) given(name string) bool {
	return ch.st.set[name] && !ch.st.bad[name]
}

// positive checks that a duration key, if given, is above zero, and
// reports whether its value can be used in rules between keys.
func (ch *checker) positive(name string, d time.Duration) bool {
	if ch.st.bad[name] {
		return false
	}
	if ch.st.set[name] && d <= 0 {
		ch.add(name, "must be positive")
		return false
	}
	return true
}

// atMost checks that a duration key, if given, is at most limit, and
// reports whether it is. why follows the limit in the message.
func (ch *checker) atMost(name string, d, limit time.Duration, why string) bool {
	if !ch.given(name) || d <= limit {
		return true
	}
	ch.add(name, "must be at most "+limitText(name, limit)+why)
	return false
}

// lease checks a key that sets the length of a lease with
// backend.ValidateLease, the check role.NewElector, synclock.NewLocker
// and schedlock apply to the same durations, and reports whether the
// value can be used in rules between keys. A value that is not positive
// is left to positive.
func (ch *checker) lease(name string, d time.Duration) bool {
	if !ch.given(name) || d <= 0 || backend.ValidateLease(name, d) == nil {
		return true
	}
	if d < backend.MinTTL {
		ch.add(name, "must be at least "+limitText(name, backend.MinTTL)+": stores count whole milliseconds")
		return false
	}
	ch.add(name, "must be at most "+limitText(name, backend.MaxTTL)+": no store holds a longer lease")
	return false
}

// limitText writes a limit of key name in the key's unit, with the
// duration it stands for: "31536000 (365 days)" for a key in seconds,
// "365 days" for a key with its own unit.
func limitText(name string, limit time.Duration) string {
	if unit := keyIndex[name].kind.unit(); unit != 0 {
		return inUnit(limit, unit) + " (" + backend.FormatDuration(limit) + ")"
	}
	return backend.FormatDuration(limit)
}

// longest is the reason after the limit of a duration that is not a
// lease.
const longest = ", the longest duration baton takes"

// check applies every rule of the package documentation to c.
func check(c *Config, st *state) []Problem {
	ch := &checker{c: c, st: st}
	n := len(ch.problems)
	ch.role()
	// The role and synclock packages' own rules, should they ever grow
	// beyond the ones above, so that Load never returns a Config their
	// constructors reject.
	if len(ch.problems) == n && !ch.anyBad("scheduler-lock.") {
		if err := c.Role.Validate(); err != nil {
			ch.problems = append(ch.problems, Problem{Key: "scheduler-lock", Value: "...", Reason: oneLine(err)})
		}
	}
	n = len(ch.problems)
	ch.syncLock()
	if len(ch.problems) == n && !ch.anyBad("synchronized-lock.") {
		if err := c.SyncLock.Validate(); err != nil {
			ch.problems = append(ch.problems, Problem{Key: "synchronized-lock", Value: "...", Reason: oneLine(err)})
		}
	}
	ch.jobLock()
	ch.instance()
	ch.redis()
	ch.consul()
	// Report in the order of the reference table; a section's own
	// problems follow its keys.
	rank := func(name string) int {
		for i := range keys {
			if keys[i].name == name || strings.HasPrefix(keys[i].name, name+".") && (i+1 == len(keys) || !strings.HasPrefix(keys[i+1].name, name+".")) {
				return i
			}
		}
		return len(keys)
	}
	sort.SliceStable(ch.problems, func(i, j int) bool { return rank(ch.problems[i].Key) < rank(ch.problems[j].Key) })
	return ch.problems
}

// anyBad reports whether a key in the section prefix did not convert.
func (ch *checker) anyBad(prefix string) bool {
	for name := range ch.st.bad {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

func (ch *checker) role() {
	r := ch.c.Role
	okInterval := ch.positive(keyRoleInterval, r.HeartbeatInterval)
	okExpiration := ch.positive(keyRoleExpiration, r.HeartbeatExpiration) && ch.lease(keyRoleExpiration, r.HeartbeatExpiration)
	okMargin := ch.positive(keyRoleMargin, r.SafetyMargin)
	eff := r.WithDefaults()
	iv, ex := eff.HeartbeatInterval, eff.HeartbeatExpiration
	// 2*iv >= ex, without overflow.
	if okInterval && okExpiration && iv >= ex-ex/2 {
		const why = " so one lost renewal is survivable"
		if ch.st.set[keyRoleInterval] {
			ch.add(keyRoleInterval, fmt.Sprintf("must be less than half of %s (%s s)"+why,
				keyRoleExpiration, inUnit(ex, time.Second)))
		} else {
			ch.add(keyRoleExpiration, fmt.Sprintf("must be more than twice %s (%s ms)"+why,
				keyRoleInterval, inUnit(iv, time.Millisecond)))
		}
	}
	if okInterval && okMargin && ch.st.set[keyRoleMargin] && eff.SafetyMargin >= iv {
		ch.add(keyRoleMargin, fmt.Sprintf("must be less than %s (%s ms)",
			keyRoleInterval, inUnit(iv, time.Millisecond)))
	}
}

func (ch *checker) syncLock() {
	s := ch.c.SyncLock
	okRetry := ch.positive(keyLockRetry, s.RetryInterval) && ch.atMost(keyLockRetry, s.RetryInterval, backend.MaxTTL, longest)
	okHold := ch.positive(keyLockHold, s.HoldDuration) && ch.lease(keyLockHold, s.HoldDuration)
	if ch.given(keyLockMaxRetries) && s.MaxRetries < 0 {
		ch.add(keyLockMaxRetries, "must not be negative (0 retries until the lock is acquired)")
	}
	// The longest a waiter waits, MaxRetries x RetryInterval, is bounded
	// as synclock.Config.Validate bounds it.
	if retry := s.WithDefaults().RetryInterval; okRetry && ch.given(keyLockMaxRetries) && int64(s.MaxRetries) > int64(backend.MaxTTL/retry) {
		ch.add(keyLockMaxRetries, fmt.Sprintf("must be at most %d: %s x %s (%s ms) is the longest a waiter waits, and must be at most %s (0 retries until the lock is acquired)",
			int64(backend.MaxTTL/retry), keyLockMaxRetries, keyLockRetry, inUnit(retry, time.Millisecond), backend.FormatDuration(backend.MaxTTL)))
	}
	if ch.positive(keyLockClaim, s.ClaimWindow) && okHold && ch.st.set[keyLockClaim] {
		if hold := s.WithDefaults().HoldDuration; s.ClaimWindow > hold {
			ch.add(keyLockClaim, fmt.Sprintf("must not exceed %s (%s ms)", keyLockHold, inUnit(hold, time.Millisecond)))
		}
	}
}

func (ch *checker) instance() {
	in := ch.c.Instance
	if ch.given(keyInstanceApp) && in.App == "" {
		ch.add(keyInstanceApp, "must not be empty")
	}
	if ch.given(keyInstanceTenant) && in.Tenant == "" {
		ch.add(keyInstanceTenant, fmt.Sprintf("must not be empty (leave it out for %q)", DefaultTenant))
	}
	if ch.given(keyInstancePort) && (in.Port < 1 || in.Port > 65535) {
		ch.add(keyInstancePort, "must be in 1..65535")
	}
	if ch.given(keyInstanceIP) && in.IP != "" {
		text := strings.TrimSuffix(strings.TrimPrefix(in.IP, "["), "]")
		if _, err := netip.ParseAddr(text); err != nil {
			ch.add(keyInstanceIP, "is not an IP address")
		}
	}
	// The rest of instanceid's rules, which Detect would apply later:
	// each key on its own, so that the message names it.
	for _, part := range []struct {
		name string
		opts instanceid.Options
	}{
		{keyInstanceApp, instanceid.Options{App: in.App}},
		{keyInstanceTenant, instanceid.Options{Tenant: in.Tenant}},
		{keyInstanceIP, instanceid.Options{IP: in.IP}},
		{keyInstanceAdvAddr, instanceid.Options{AdvertiseAddr: in.AdvertiseAddr}},
	} {
		if !ch.given(part.name) || ch.reported(part.name) {
			continue
		}
		if err := part.opts.Validate(); err != nil {
			ch.add(part.name, strings.TrimPrefix(err.Error(), "instanceid: "))
		}
	}
}

// reported reports whether a problem of key was already added.
func (ch *checker) reported(name string) bool {
	for _, p := range ch.problems {
		if p.Key == name {
			return true
		}
	}
	return false
}

func (ch *checker) jobLock() {
	j := ch.c.JobLock
	if ch.given(keyJobLockAtMost) && j.LockAtMostFor <= 0 {
		ch.add(keyJobLockAtMost, "must be positive (leave it out to make every job give its own)")
	}
	ch.lease(keyJobLockAtMost, j.LockAtMostFor)
	if ch.given(keyJobLockAtLeast) && j.LockAtLeastFor < 0 {
		ch.add(keyJobLockAtLeast, "must not be negative")
	}
	if j.LockAtMostFor <= 0 {
		ch.atMost(keyJobLockAtLeast, j.LockAtLeastFor, backend.MaxTTL, ": no store keeps a lock longer")
	}
	if j.LockAtMostFor > 0 && j.LockAtLeastFor > j.LockAtMostFor {
		ch.add(keyJobLockAtLeast, fmt.Sprintf("must not exceed %s (%v): a lock cannot be kept longer than its lease", keyJobLockAtMost, j.LockAtMostFor))
	}
}

func (ch *checker) redis() {
	r := ch.c.Redis
	if ch.given(keyRedisAddrs) {
		ch.redisAddrs(r)
	}
	ch.redisTopology(r)
	if ch.given(keyRedisKeyPrefix) {
		ch.keyPrefix(keyRedisKeyPrefix, r.KeyPrefix)
	}
	ch.redisClient(r)
	ch.redisTLS(r)
}

// redisAddrs checks redis.addrs: host:port addresses without credentials.
func (ch *checker) redisAddrs(r Redis) {
	if len(r.Addrs) == 0 {
		ch.add(keyRedisAddrs, "must list at least one address")
	}
	var bad []string
	for _, a := range r.Addrs {
		if backend.HasUserinfo(a) {
			pass := keyRedisPassword + " (the user name in " + keyRedisUsername + ")"
			if r.MasterName != "" {
				pass += ", or " + keyRedisSentinelPass + " for the Sentinels"
			}
			bad = append(bad, strconv.Quote(backend.HideUserinfo(a))+" holds credentials: write it as host:port and put the password in "+pass)
			continue
		}
		if reason := checkHostPort(a); reason != "" {
			bad = append(bad, strconv.Quote(a)+" "+reason)
		}
	}
	if len(bad) > 0 {
		ch.add(keyRedisAddrs, strings.Join(bad, "; "))
	}
}

// redisTopology checks the keys that depend on the topology: the
// database, Sentinel against Cluster, and the key layout.
func (ch *checker) redisTopology(r Redis) {
	if ch.given(keyRedisDB) && r.DB < 0 {
		ch.add(keyRedisDB, "must not be negative")
	}
	if ch.given(keyRedisCluster) && r.Cluster && r.MasterName != "" {
		ch.add(keyRedisCluster, "cannot be combined with "+keyRedisMasterName+", which selects Sentinel")
	}
	cluster := r.MasterName == "" && (r.Cluster || len(r.Addrs) > 1)
	if ch.given(keyRedisDB) && r.DB > 0 && cluster {
		ch.add(keyRedisDB, "must be 0 with Redis Cluster ("+keyRedisCluster+"=true or more than one address in "+
			keyRedisAddrs+" without "+keyRedisMasterName+"), which has only database 0")
	}
	ch.redisLayout(r, cluster)
}

// redisLayout checks redis.layout and the Java side's ShedLock settings.
func (ch *checker) redisLayout(r Redis, cluster bool) {
	if ch.given(keyRedisLayout) && r.Layout != LayoutBaton && r.Layout != LayoutSpring {
		ch.add(keyRedisLayout, fmt.Sprintf("must be %q (baton's keys) or %q (the Spring framework's and ShedLock's, shared with Java instances)", LayoutBaton, LayoutSpring))
	}
	if r.Layout == LayoutSpring && r.Functions {
		ch.add(keyRedisFunctions, "cannot be true with "+keyRedisLayout+" "+LayoutSpring+": the Spring layout's scripts are not among baton's Redis functions")
	}
	if r.Layout == LayoutSpring && cluster {
		ch.add(keyRedisLayout, "cannot be "+LayoutSpring+" with Redis Cluster: the Java side's keys carry no hash tag")
	}
	for _, k := range []struct{ name, v string }{{keyRedisShedLockEnv, r.ShedLockEnvironment}, {keyRedisShedLockPfx, r.ShedLockKeyPrefix}} {
		if ch.given(k.name) && (k.v == "" || strings.ContainsAny(k.v, " \t\r\n")) {
			ch.add(k.name, "must be non-empty, without spaces (as the Java side's ShedLock provider is set up)")
		}
	}
}

// redisClient checks the client's timeouts and pool size.
func (ch *checker) redisClient(r Redis) {
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{keyRedisDialTimeout, r.DialTimeout}, {keyRedisReadTimeout, r.ReadTimeout}, {keyRedisWriteTimeout, r.WriteTimeout}} {
		if ch.positive(t.name, t.d) {
			ch.atMost(t.name, t.d, backend.MaxTTL, longest)
		}
	}
	if ch.given(keyRedisPoolSize) && (r.PoolSize < 0 || r.PoolSize > MaxPoolSize) {
		ch.add(keyRedisPoolSize, fmt.Sprintf("must be in 0..%d (0 for go-redis's default, 10 per GOMAXPROCS; %d is Redis's default maxclients, and go-redis sets the whole pool up at once)",
			MaxPoolSize, MaxPoolSize))
	}
	switch r.ClientLog {
	case "", ClientLogDebug, ClientLogOff, ClientLogKeep:
	default:
		ch.add(keyRedisClientLog, fmt.Sprintf("must be %q (go-redis's messages at slog's debug level), %q (dropped) or %q (go-redis's own logger, stderr unless the program set one)",
			ClientLogDebug, ClientLogOff, ClientLogKeep))
	}
}

// redisTLS checks that the TLS files go together and load.
func (ch *checker) redisTLS(r Redis) {
	if (r.CertFile == "") != (r.KeyFile == "") {
		name, other := keyRedisTLSCertFile, keyRedisTLSKeyFile
		if r.CertFile != "" {
			name, other = other, name
		}
		ch.add(name, "must be set together with "+other)
	} else if r.CAFile != "" || r.CertFile != "" {
		if _, err := r.TLSConfig(); err != nil {
			name := keyRedisTLSCAFile
			if !strings.Contains(err.Error(), keyRedisTLSCAFile) {
				name = keyRedisTLSCertFile
			}
			ch.add(name, strings.TrimPrefix(err.Error(), "config: "))
		}
	}
}

// checkHostPort says what is wrong with a host:port address, or "".
func checkHostPort(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return "is not host:port"
	}
	if host == "" {
		return "has no host"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "has a port that is not in 1..65535"
	}
	return ""
}

func (ch *checker) consul() {
	c := ch.c.Consul
	if ch.given(keyConsulAddress) {
		ch.consulAddress(c.Address)
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		name := keyConsulCertFile
		if c.CertFile != "" {
			name = keyConsulKeyFile
		}
		ch.add(name, "must be set together with "+map[string]string{keyConsulCertFile: keyConsulKeyFile, keyConsulKeyFile: keyConsulCertFile}[name])
	}
	if ch.given(keyConsulKeyPrefix) && ch.keyPrefix(keyConsulKeyPrefix, c.KeyPrefix) &&
		(strings.HasPrefix(c.KeyPrefix, "/") || strings.HasSuffix(c.KeyPrefix, "/")) {
		ch.add(keyConsulKeyPrefix, "must not start or end with '/'")
	}
	if ch.given(keyConsulTTLMin) && (c.SessionTTLMin <= 0 || c.SessionTTLMin > ConsulMaxSessionTTL) {
		ch.add(keyConsulTTLMin, fmt.Sprintf("must be in 1..%d (seconds; Consul's default is 10)", int(ConsulMaxSessionTTL/time.Second)))
	}
	if ch.given(keyConsulLockDelay) && (c.LockDelay < 0 || c.LockDelay > time.Minute) {
		ch.add(keyConsulLockDelay, "must be in 0..60000 (milliseconds; Consul caps it at 60 s)")
	}
}

// consulAddress checks consul.address: host:port or an http(s) URL,
// without credentials.
func (ch *checker) consulAddress(a string) {
	if backend.HasUserinfo(a) {
		ch.add(keyConsulAddress, "holds credentials: write the address without them (host:port, or a URL http://host:port or https://host:port) and put the ACL token in "+keyConsulToken)
		return
	}
	if a == "" {
		return
	}
	if rest, ok := strings.CutPrefix(a, "https://"); ok {
		a = rest
	} else if rest, ok := strings.CutPrefix(a, "http://"); ok {
		a = rest
	}
	if reason := checkHostPort(a); reason != "" {
		ch.add(keyConsulAddress, reason+" (want host:port, or a URL http://host:port or https://host:port)")
	}
}

// keyPrefix checks a key prefix with backend.ValidateKeyPrefix, the check
// the stores apply, and reports whether it passed.
func (ch *checker) keyPrefix(name, prefix string) bool {
	err := backend.ValidateKeyPrefix(prefix)
	switch {
	case prefix == "":
		ch.add(name, fmt.Sprintf("must not be empty (leave it out for %q)", DefaultKeyPrefix))
	case err == nil:
		return true
	case len(prefix) > backend.MaxKeyPrefixLen:
		ch.add(name, fmt.Sprintf("must be at most %d bytes", backend.MaxKeyPrefixLen))
	default:
		ch.add(name, prefixReason(prefix))
	}
	return false
}

// prefixReason says why backend.ValidateKeyPrefix refuses prefix, naming
// its first bad character.
func prefixReason(prefix string) string {
	const use = "; use only " + backend.KeyPrefixChars
	if strings.ContainsAny(prefix, "{}") {
		return "must not contain '{' or '}', which would break the {tenant:app} hash tag of baton's keys" + use
	}
	for _, r := range prefix {
		if backend.ValidateKeyPrefix(string(r)) == nil {
			continue
		}
		if strings.ContainsRune(`*?[]\^`, r) {
			return "holds " + strconv.QuoteRune(r) + ", a glob character, which would make key listings and ACL patterns match other prefixes" + use
		}
		return "holds " + strconv.QuoteRune(r) + use
	}
	return "is not a usable key prefix" + use
}

// oneLine is err's message on one line, for a Problem's reason: the
// lines of an errors.Join are separated by "; ".
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}
