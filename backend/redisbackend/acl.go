package redisbackend

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
)

// aclCommands are the commands a store sends or its scripts call: the
// scripts (EVALSHA, and EVAL when the server does not have them yet; a
// store WithFunctions calls FCALL instead), the
// commands inside them, the handover look's transaction, the replica
// acknowledgement, pub/sub, the key walk of Leases and LeasesUpTo (SCAN),
// the count of live members of MembersUpTo (ZCOUNT), and the
// connection's own (HELLO and PING; go-redis also sends CLIENT SETINFO,
// whose refusal it ignores).
var aclCommands = []string{
	"evalsha", "eval", "fcall",
	"get", "set", "del", "exists", "append", "type", "pexpire", "pttl", "time", "info",
	"hget", "hmget", "hset", "hdel",
	"zadd", "zrem", "zrange", "zrangebyscore", "zscore", "zcount", "zpopmin",
	"multi", "exec", "wait", "scan",
	"publish", "spublish", "subscribe", "ssubscribe", "unsubscribe", "sunsubscribe",
	"hello", "ping",
}

// ACLRules returns the rules of a least-privilege Redis ACL user for
// stores with the key prefix prefix (DefaultPrefix if empty): only keys
// and pub/sub channels under the prefix, and only the commands the store
// uses, for
//
//	ACL SETUSER <user> on ><password> <ACLRules(prefix)>
//
// INFO is among them: the restart guard reads the server's uptime with
// it. A user refused INFO is refused the grants the guard checks (those
// that find no fencing counter), with an error that says to grant these
// rules, rather than granted them unguarded. A Registry, a
// waiting line and WithReplicaAck need nothing more.
//
// SCAN is among them too, for Leases (batonctl locks, the status page's
// lock list): Redis does not confine SCAN to a user's key patterns, so
// this user sees the name of every key of the server. For a user shared
// by the tenants of one server, or any user that must not see other
// keys, use TenantACLRules.
func ACLRules(prefix string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	// A prefix New accepts has no glob characters; escaping them anyway
	// keeps a bad prefix from granting other prefixes.
	return aclRules(globEscape(prefix)+":*", aclCommands)
}

// TenantACLRules returns the rules of a Redis ACL user for one tenant of
// a server that several tenants share, for stores WithFunctions: only
// the keys and pub/sub channels of the tenant's apps
// ("<prefix>:{<tenant>:*", every app's {tenant:app} hash tag), and the
// commands of ACLRules but three. Without EVAL and EVALSHA the user runs
// no Lua but baton's functions (FCALL), which an administrator loaded
// (LoadFunctions): a script of its own could loop, and the server serves
// nobody while a script runs. Without SCAN, which Redis does not confine
// to key patterns, it cannot list the key names of the server (lock
// names carry entity IDs).
//
// Such a user runs everything role, synclock and schedlock need: leases,
// fencing, watches and wake-ups, waiting lines and handover, the member
// registry, the restart guard and Break. Leases, which lists keys with
// SCAN, is refused to it: list leases (batonctl locks, the status page's
// lock list) as an operator's user of ACLRules. What tenants still share
// (memory, connections, the server's time) is said in the README
// (Tenants). The tenant must be a name instanceid accepts (no ':',
// braces, spaces or control characters); glob characters in it or in
// prefix are escaped.
func TenantACLRules(prefix, tenant string) (string, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := backend.ValidateTagName("tenant", tenant); err != nil {
		return "", fmt.Errorf("redisbackend: tenant acl rules: %w", err)
	}
	commands := slices.DeleteFunc(slices.Clone(aclCommands), func(c string) bool { return c == "scan" || c == "eval" || c == "evalsha" })
	return aclRules(globEscape(prefix+":{"+tenant+":")+"*", commands), nil
}

// aclRules returns the rules of a user confined to the keys and channels
// matching pattern and allowed commands.
func aclRules(pattern string, commands []string) string {
	rules := []string{"resetkeys", "~" + pattern, "resetchannels", "&" + pattern, "-@all"}
	for _, c := range commands {
		rules = append(rules, "+"+c)
	}
	return strings.Join(rules, " ")
}

// username returns the ACL user rdb logs in as, or "default".
func username(rdb redis.UniversalClient) string {
	var user string
	switch c := rdb.(type) {
	case *redis.Client:
		user = c.Options().Username
	case *redis.ClusterClient:
		user = c.Options().Username
	case *redis.Ring:
		user = c.Options().Username
	}
	if user == "" {
		return "default"
	}
	return user
}

// errACL is what an error from Redis that refused the store's user wraps.
var errACL = errors.New("refused by Redis's ACL")

// aclError explains a NOPERM, WRONGPASS or NOAUTH reply: which user, what
// was refused, and what to do. A refused login wraps backend.ErrAuth, a
// refused command or key errACL. Other errors are returned as they are.
func (s *Store) aclError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "WRONGPASS"):
		return fmt.Errorf("%w: user %q: wrong password, or no such user (check the client's Username and Password: config keys redis.username and redis.password): %w",
			backend.ErrAuth, s.user, err)
	case strings.Contains(msg, "NOAUTH"), strings.Contains(msg, "Protocol error: unauthenticated"):
		// The second is how Redis refuses a long command (a script call)
		// from a client that has not logged in.
		return fmt.Errorf("%w: the server needs a password and the client gave none (the client's Password: config key redis.password): %w", backend.ErrAuth, err)
	case strings.Contains(msg, "Function not found"):
		return fmt.Errorf("baton's Redis functions (library %s) are not loaded on this server: an administrator loads them with redisbackend.LoadFunctions "+
			"(a server that restarted without its data has lost them): %w", libraryName(), err)
	case strings.Contains(msg, "NOPERM") && (refused(msg) == "command eval" || refused(msg) == "command evalsha"):
		return fmt.Errorf("%w: user %q may not send scripts; a store of a tenant's user (TenantACLRules) needs redisbackend.WithFunctions: %w", errACL, s.user, err)
	case strings.Contains(msg, "NOPERM") && refused(msg) == "command scan":
		return fmt.Errorf("%w: user %q may not list keys (SCAN would show it every key of the server, so TenantACLRules leaves it out); list leases as a user with redisbackend.ACLRules(%q): %w", errACL, s.user, s.prefix, err)
	case strings.Contains(msg, "NOPERM"):
		return fmt.Errorf("%w: user %q may not do this (%s); grant it redisbackend.ACLRules(%q) (a tenant's user: TenantACLRules, for its own tenant's keys only): %w", errACL, s.user, refused(msg), s.prefix, err)
	case strings.Contains(msg, "user executing the script can't"):
		// Redis 7.0 does not say which command or key of the script.
		return fmt.Errorf("%w: user %q may not run a command or touch a key that one of baton's scripts does; grant it redisbackend.ACLRules(%q) (a tenant's user: TenantACLRules, for its own tenant's keys only): %w", errACL, s.user, s.prefix, err)
	}
	return err
}

// refused picks what a NOPERM reply says was refused: a command, a key
// or a channel.
func refused(msg string) string {
	for _, what := range []string{"command", "key", "channel"} {
		if i := strings.Index(msg, "the '"); i >= 0 && strings.Contains(msg, what) {
			rest := msg[i+len("the '"):]
			if j := strings.IndexByte(rest, '\''); j >= 0 {
				return what + " " + rest[:j]
			}
		}
		if strings.Contains(msg, "access a "+what) || strings.Contains(msg, "one of the "+what+"s") {
			return "a " + what + " outside its pattern"
		}
	}
	return "see the reply"
}
