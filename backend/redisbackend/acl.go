package redisbackend

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
)

// aclCommands are the commands a store sends or its scripts call: the
// scripts (EVALSHA, and EVAL when the server does not have them yet), the
// commands inside them, the handover mailbox's transaction, the replica
// acknowledgement, pub/sub, the key walk of Leases and LeasesUpTo (SCAN),
// the count of live members of MembersUpTo (ZCOUNT), and the
// connection's own (HELLO and PING; go-redis also sends CLIENT SETINFO,
// whose refusal it ignores).
var aclCommands = []string{
	"evalsha", "eval",
	"get", "set", "del", "exists", "append", "type", "pexpire", "pttl", "time", "info",
	"hget", "hset", "hdel",
	"zadd", "zrem", "zrange", "zrangebyscore", "zscore", "zpopmin", "zcount",
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
func ACLRules(prefix string) string {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	// A prefix New accepts has no glob characters; escaping them anyway
	// keeps a bad prefix from granting other prefixes.
	p := globEscaper.Replace(prefix)
	rules := []string{"resetkeys", "~" + p + ":*", "resetchannels", "&" + p + ":*", "-@all"}
	for _, c := range aclCommands {
		rules = append(rules, "+"+c)
	}
	return strings.Join(rules, " ")
}

// globEscaper escapes the characters a Redis glob pattern reads as
// wildcards.
var globEscaper = strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`, "]", `\]`)

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
	case strings.Contains(msg, "NOPERM"):
		return fmt.Errorf("%w: user %q may not do this (%s); grant it redisbackend.ACLRules(%q): %w", errACL, s.user, refused(msg), s.prefix, err)
	case strings.Contains(msg, "user executing the script can't"):
		// Redis 7.0 does not say which command or key of the script.
		return fmt.Errorf("%w: user %q may not run a command or touch a key that one of baton's scripts does; grant it redisbackend.ACLRules(%q): %w", errACL, s.user, s.prefix, err)
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
