package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
)

// Spring reads src, a Spring Boot application.properties or
// application.yml, as it is, and asks Load to ignore the keys baton has
// no use for:
//
//	cfg, err := config.Load(config.Spring(config.File("application.properties")), config.Env("BATON_"))
//
// It reads
//
//   - the framework's own keys where the framework has them, at the top
//     level: scheduler-lock.* and synchronized-lock.*;
//   - baton's keys under "baton." (baton.redis.key-prefix,
//     baton.job-lock.default-lock-at-most-for, ...), as Sub("baton", src)
//     reads them;
//   - the Spring keys that say what baton needs to know (the table in the
//     package documentation): spring.application.name is instance.app,
//     server.port instance.port, multiple-tenant.tenant instance.tenant,
//     eureka.instance.ip-address instance.ip, and spring.redis.* (Spring
//     Boot 2) or spring.data.redis.* (Spring Boot 3) the redis.* keys.
//
// Every other key of the file (server.servlet.*, management.*, logging.*,
// spring.datasource.*, ...) is ignored and listed by Config.Ignored; Load
// logs them once at debug level. Unknown keys under baton. and under the
// framework's sections are still errors, as in any source.
//
// Where a baton key and a Spring key set one value, baton's key wins (in
// this source as in any later one): baton.redis.addrs over
// spring.redis.host and spring.redis.port, baton.instance.app over
// spring.application.name. The Spring keys it overrode are listed by
// Ignored. Spring's placeholders, ${NAME} and ${NAME:default}, are
// resolved in the Spring keys baton reads and in the framework's keys,
// from the file's own keys and then the environment, as Spring resolves
// them; one that is not set and has no default is an error naming the key.
func Spring(src Source) Source {
	return Source{read: func() (sourceData, error) {
		if src.read == nil {
			return sourceData{}, errors.New("config: Spring of the zero Source; make sources with File, Bytes or Map")
		}
		d, err := src.read()
		if err != nil {
			return sourceData{}, err
		}
		return readSpring(d), nil
	}}
}

// springKey is one key of a Spring file: its name as written, and its
// value.
type springKey struct {
	name string
	val  any
}

// springReader sorts the keys of one Spring file into baton's keys and
// the ignored ones.
type springReader struct {
	d       sourceData
	flat    map[string]any      // every key of the file, dotted, as written
	out     map[string]any      // baton's key -> value
	from    map[string][]string // baton's key -> the file's keys it was read from
	groups  map[string][]springKey
	ignored []string
}

// readSpring reads the source data d of a Spring file.
func readSpring(d sourceData) sourceData {
	r := &springReader{d: d, flat: map[string]any{}, out: map[string]any{}, from: map[string][]string{},
		groups: map[string][]springKey{}}
	flattenAll(d.values, "", r.flat, func(name string) {
		r.problem(name, r.flat[name], "is set twice in one source (as a nested and a dotted key)")
	})
	names := make([]string, 0, len(r.flat))
	for name := range r.flat {
		names = append(names, name)
	}
	sort.Strings(names)
	var own []springKey // baton.*: applied last, so that they win
	for _, name := range names {
		seg, rest, _ := strings.Cut(name, ".")
		switch relaxedName(seg) {
		case "baton":
			own = append(own, springKey{rest, r.flat[name]})
		case "schedulerlock", "synchronizedlock":
			r.framework(name)
		default:
			r.sort(name)
		}
	}
	r.mapSpring()
	for _, k := range own {
		r.own(k)
	}
	origin := d.origin
	return sourceData{values: r.out, problems: r.d.problems, ignored: r.ignored,
		origin: func(key string) string {
			if from, ok := r.from[key]; ok && (len(from) > 1 || from[0] != key) {
				return r.at(from...)
			}
			return origin(key)
		}}
}

// at names where the file's keys were read: "spring.redis.host,
// spring.redis.port in file application.properties".
func (r *springReader) at(names ...string) string {
	o := r.d.origin(names[0])
	if o == "" {
		return strings.Join(names, ", ")
	}
	return strings.Join(names, ", ") + " in " + o
}

// problem reports a problem of the file's key name.
func (r *springReader) problem(name string, val any, reason string) {
	value := show(val)
	if looksSecret(name) {
		value = redact(value)
	}
	r.d.problems = append(r.d.problems, Problem{Key: name, Value: value, Origin: r.d.origin(name), Reason: reason})
}

// set stores val as baton's key, read from the file's keys from.
func (r *springReader) set(key string, val any, from ...string) {
	if val == nil {
		return
	}
	r.out[key], r.from[key] = val, from
}

// framework stores the framework's key name, read at the top level.
func (r *springReader) framework(name string) {
	key := canonical(name)
	if prev, dup := r.from[key]; dup {
		r.problem(name, r.flat[name], "is set twice in one source (also as "+prev[0]+")")
		return
	}
	r.set(key, r.resolve(name), name)
}

// own stores k, one of baton's keys under baton.; it wins over the
// Spring keys that set the same key, which are then ignored.
func (r *springReader) own(k springKey) {
	name := "baton." + k.name
	if k.name == "" {
		r.problem("baton", k.val, "is a value, but baton's keys are expected under it")
		return
	}
	key := canonical(k.name)
	if prev, ok := r.from[key]; ok {
		r.ignored = append(r.ignored, prev...)
	}
	r.set(key, k.val, name)
}

// flattenAll stores every value of the nested map v under its dotted
// name in out; dup is called for a name met twice.
func flattenAll(v any, path string, out map[string]any, dup func(string)) {
	m, ok := asMap(v)
	if !ok {
		return
	}
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks) // nested before dotted, whatever the map's order
	for _, k := range ks {
		val := m[k]
		name := k
		if len(k) > 2 && k[0] == '[' && k[len(k)-1] == ']' {
			name = k[1 : len(k)-1] // Spring's [a.b]: one key with dots in it
		}
		if path != "" {
			name = path + "." + name
		}
		if val == nil {
			continue
		}
		if reflect.ValueOf(val).Kind() == reflect.Map {
			flattenAll(val, name, out, dup)
			continue
		}
		if _, seen := out[name]; seen {
			dup(name)
			continue
		}
		out[name] = val
	}
}

// springKeys maps the Spring keys baton reads one to one, in their
// relaxed form, to baton's keys.
var springKeys = map[string]string{
	"spring.application.name":   keyInstanceApp,
	"server.port":               keyInstancePort,
	"multipletenant.tenant":     keyInstanceTenant,
	"eureka.instance.ipaddress": keyInstanceIP,
	"eureka.instance.hostname":  keyInstanceIP, // only an IP, and only without ip-address
}

// The prefixes of the Redis keys of Spring Boot 3 and 2, relaxed.
const (
	springDataRedis = "spring.data.redis."
	springRedis     = "spring.redis."
)

// sort files one key of the file that is neither baton's nor the
// framework's: a Spring key baton reads, or an ignored one.
func (r *springReader) sort(name string) {
	rn := relaxedName(name)
	for _, p := range []string{springDataRedis, springRedis} {
		if strings.HasPrefix(rn, p) {
			r.groups[p] = append(r.groups[p], springKey{name, r.flat[name]})
			return
		}
	}
	if _, ok := springKeys[rn]; ok {
		r.groups[""] = append(r.groups[""], springKey{name, r.flat[name]})
		return
	}
	r.ignored = append(r.ignored, name)
}

// mapSpring sets baton's keys from the Spring keys sort kept.
func (r *springReader) mapSpring() {
	var hostname *springKey
	ip := false
	for _, k := range r.groups[""] {
		rn := relaxedName(k.name)
		switch rn {
		case "eureka.instance.hostname":
			hostname = &k
			continue
		case "eureka.instance.ipaddress":
			ip = true
		}
		r.set(springKeys[rn], r.resolve(k.name), k.name)
	}
	if hostname != nil {
		v, _ := r.resolve(hostname.name).(string)
		if ip || net.ParseIP(strings.Trim(v, "[]")) == nil {
			r.ignored = append(r.ignored, hostname.name) // a host name cannot be in an instance ID
		} else {
			r.set(keyInstanceIP, v, hostname.name)
		}
	}
	redis := r.groups[springDataRedis]
	if len(redis) == 0 {
		redis = r.groups[springRedis]
	} else {
		for _, k := range r.groups[springRedis] { // Boot 3 reads only spring.data.redis.*
			r.ignored = append(r.ignored, k.name)
		}
	}
	r.mapRedis(redis)
}

// springRedisKeys maps the keys under spring.redis. or spring.data.redis.
// that have one baton key each, relaxed, to baton's keys.
var springRedisKeys = map[string]string{
	"password":          keyRedisPassword,
	"username":          keyRedisUsername,
	"database":          keyRedisDB,
	"ssl":               keyRedisTLS, // Boot 2
	"ssl.enabled":       keyRedisTLS, // Boot 3
	"sentinel.master":   keyRedisMasterName,
	"sentinel.password": keyRedisSentinelPass,
	"sentinel.username": keyRedisSentinelUser,
}

// mapRedis sets the redis.* keys from one group of Spring's Redis keys.
// The topology follows Spring's order: Sentinel, else Cluster, else the
// URL, else host and port.
func (r *springReader) mapRedis(group []springKey) {
	addr := map[string]springKey{} // host, port, url, sentinel.nodes, cluster.nodes
	sentinel := false
	for _, k := range group {
		_, sub, _ := strings.Cut(strings.TrimPrefix(relaxedName(k.name), "spring."), "redis.")
		if key, ok := springRedisKeys[sub]; ok {
			r.set(key, r.resolve(k.name), k.name)
			sentinel = sentinel || key == keyRedisMasterName
			continue
		}
		switch sub {
		case "host", "port", "url", "sentinel.nodes", "cluster.nodes":
			addr[sub] = k
		default:
			r.ignored = append(r.ignored, k.name)
		}
	}
	use := func(subs ...string) {
		for _, s := range subs {
			delete(addr, s)
		}
	}
	switch n, ok := addr["sentinel.nodes"]; {
	case ok && !sentinel:
		r.problem(n.name, n.val, "names Sentinels but "+strings.TrimSuffix(n.name, "nodes")+"master is not set; set it to the master set's name")
		use("sentinel.nodes")
	case ok:
		r.set(keyRedisAddrs, r.resolve(n.name), n.name)
		use("sentinel.nodes")
	case addr["cluster.nodes"].name != "":
		n := addr["cluster.nodes"]
		r.set(keyRedisAddrs, r.resolve(n.name), n.name)
		r.set(keyRedisCluster, true, n.name)
		use("cluster.nodes")
	case addr["url"].name != "":
		r.redisURL(addr["url"])
		use("url")
	case addr["host"].name != "" || addr["port"].name != "":
		r.hostPort(addr["host"], addr["port"])
		use("host", "port")
	}
	for _, k := range addr {
		r.ignored = append(r.ignored, k.name)
	}
}

// hostPort sets redis.addrs from spring.redis.host and spring.redis.port,
// with Spring's defaults (localhost, 6379) for the one not given.
func (r *springReader) hostPort(host, port springKey) {
	h, p := "localhost", "6379"
	var from []string
	if host.name != "" {
		h = fmt.Sprint(r.resolve(host.name))
		from = append(from, host.name)
	}
	if port.name != "" {
		p = fmt.Sprint(r.resolve(port.name))
		from = append(from, port.name)
	}
	r.set(keyRedisAddrs, []string{net.JoinHostPort(strings.Trim(h, "[]"), p)}, from...)
}

// redisURL sets the redis.* keys from spring.redis.url:
// redis://[user:password@]host[:port][/database], rediss:// for TLS.
func (r *springReader) redisURL(k springKey) {
	s, _ := r.resolve(k.name).(string)
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		r.d.problems = append(r.d.problems, Problem{Key: k.name, Value: redacted, Origin: r.d.origin(k.name),
			Reason: "must be redis://[user:password@]host[:port][/database] (rediss:// for TLS)"})
		return
	}
	port := cmpOr(u.Port(), "6379")
	r.set(keyRedisAddrs, []string{net.JoinHostPort(u.Hostname(), port)}, k.name)
	if u.Scheme == "rediss" {
		r.set(keyRedisTLS, true, k.name)
	}
	if u.User != nil {
		if name := u.User.Username(); name != "" {
			r.set(keyRedisUsername, name, k.name)
		}
		if pw, ok := u.User.Password(); ok {
			r.set(keyRedisPassword, pw, k.name)
		}
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		r.set(keyRedisDB, db, k.name)
	}
}

// cmpOr returns s, or def if s is empty.
func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// resolve returns the value of the file's key name with Spring's
// placeholders resolved, or nil after reporting one that is not set.
func (r *springReader) resolve(name string) any {
	v := r.flat[name]
	s, ok := v.(string)
	if !ok || !strings.Contains(s, "${") {
		return v
	}
	out, missing := expand(s, r.lookup)
	if missing != "" {
		r.problem(name, v, "holds the placeholder ${"+missing+"}, which neither the file nor the environment sets; "+
			"set it, give it a default (${"+missing+":value}), or set baton's key instead")
		return nil
	}
	return out
}

// lookup finds a placeholder's value among the file's keys, in any
// relaxed spelling, then in the environment, as written and in the form
// Spring gives environment variables (SPRING_APPLICATION_NAME).
func (r *springReader) lookup(name string) (string, bool) {
	if v, ok := r.flat[name]; ok {
		return fmt.Sprint(v), true
	}
	rn := relaxedName(name)
	for k, v := range r.flat {
		if relaxedName(k) == rn {
			return fmt.Sprint(v), true
		}
	}
	if v, ok := os.LookupEnv(name); ok {
		return v, true
	}
	return os.LookupEnv(envSuffix(name))
}

// expand resolves the placeholders ${name} and ${name:default} in s, not
// nested, with lookup. It returns the name of the first placeholder that
// is neither found nor has a default.
func expand(s string, lookup func(string) (string, bool)) (string, string) {
	var b strings.Builder
	for {
		start := strings.Index(s, "${")
		if start < 0 {
			return b.String() + s, ""
		}
		end := strings.IndexByte(s[start:], '}')
		if end < 0 {
			return b.String() + s, ""
		}
		b.WriteString(s[:start])
		name, def, hasDef := strings.Cut(s[start+2:start+end], ":")
		switch v, ok := lookup(name); {
		case ok:
			b.WriteString(v)
		case hasDef:
			b.WriteString(def)
		default:
			return "", name
		}
		s = s[start+end+1:]
	}
}

// Ignored returns the keys of the Spring sources (Spring) that Load did
// not use, sorted: the keys baton has no use for, and the Spring keys a
// baton key overrode. Only names, never values. Nil when no source was
// read with Spring.
func (c Config) Ignored() []string {
	return slices.Clone(c.ignored)
}

// sortedUnique sorts names and drops repeats; nil for none.
func sortedUnique(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	out := slices.Clone(names)
	sort.Strings(out)
	return slices.Compact(out)
}

// logIgnored logs, once per Load, which keys Spring sources ignored, at
// debug level, with slog's default logger.
func logIgnored(ignored []string) {
	if len(ignored) == 0 {
		return
	}
	slog.Debug("config: keys of a Spring file that baton does not use (Config.Ignored)",
		"count", len(ignored), "keys", strings.Join(ignored, ","))
}

// looksSpring reports whether an unknown key is one of Spring Boot's own,
// to point at Spring.
func looksSpring(name string) bool {
	seg, _, _ := strings.Cut(relaxedName(name), ".")
	switch seg {
	case "spring", "server", "management", "logging", "eureka", "multipletenant":
		return true
	}
	return false
}
