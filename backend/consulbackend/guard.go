package consulbackend

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

// The restart guard.
//
// A Consul that lost its KV store (a dev agent restarted, servers rebuilt
// without their Raft data) has lost every lease, while their holders may
// still act on them until their own deadlines. The store tells such a
// Consul, service by service, by a marker per {tenant:app} hash tag T of
// its keys, "<prefix>/booted/T", that the first grant of a key of T
// writes and nothing deletes: a grant of a key without a fencing counter
// that finds no marker writes it and, in the same transaction, locks
// "<prefix>/recovering/T" with a new session whose TTL is the guard.
// While that entry lives, keys of T without a counter are granted to
// nobody: the grant returns a *backend.HeldError with Recovering set.
// Keys whose counter survived cannot have been lost. A service that uses
// a Consul for the first time looks the same, and waits once.
//
// Each service has its own markers, so that a client whose ACL token may
// write one service's keys (the README's per-service policy) can hold up
// no other service's grants. Keys without a tag of their own share
// "<prefix>/booted" and "<prefix>/recovering".

const (
	bootedSuffix     = "booted"
	recoveringSuffix = "recovering"
)

// WithRestartGuard sets how long, after the store finds that Consul lost
// a service's data, it refuses that service's keys that lost their
// fencing counter, when that is longer than the ttl asked for (default 0:
// the ttl alone). Set it to the longest lease any holder of the store's
// keys keeps. config.Config.ConsulStore does.
func WithRestartGuard(d time.Duration) Option {
	return func(s *Store) error {
		if d < 0 || d > MaxSessionTTL {
			return fmt.Errorf("consulbackend: %w: restart guard %v must be in [0, %v]", backend.ErrInvalidArgument, d, MaxSessionTTL)
		}
		s.guard = backend.RoundUpMillis(d)
		return nil
	}
}

// WithoutRestartGuard turns the restart guard off: a key is granted as
// soon as it is free, also right after Consul lost its data, when the
// holder of a lease the loss took may still act on it. It is for tests on
// agents started for them. Fencing tokens keep increasing either way.
func WithoutRestartGuard() Option {
	return func(s *Store) error {
		s.guard = -1
		return nil
	}
}

// BootedKey returns the restart guard's marker for key: the Consul KV
// key "<prefix>/booted/{tenant:app}" for a key with a hash tag of its
// own, as every key of role, synclock and schedlock has, and
// "<prefix>/booted" for a key without one.
func (s *Store) BootedKey(key string) string { return s.guardKey(bootedSuffix, key) }

// RecoveringKey returns the Consul KV key that, while a session holds
// it, refuses key's service the keys without a counter:
// "<prefix>/recovering/{tenant:app}", or "<prefix>/recovering" for a key
// without a hash tag.
func (s *Store) RecoveringKey(key string) string { return s.guardKey(recoveringSuffix, key) }

// guardKey returns "<prefix>/<kind>/<tag>" for key's {tenant:app} hash
// tag, or "<prefix>/<kind>" for a key without one.
func (s *Store) guardKey(kind, key string) string {
	if tag := backend.HashTag(key); tag != "" {
		return s.guardPath(kind, tag)
	}
	return s.prefix + "/" + kind
}

// guardPath returns "<prefix>/<kind>/<tag>", the marker of kind of the
// keys with tag (or, for ACLPolicy, of the tags that begin with it).
func (s *Store) guardPath(kind, tag string) string { return s.prefix + "/" + kind + "/" + tag }

// guardFresh decides whether a key without a fencing counter may be
// granted, from the markers the grant read: nil if so, otherwise the
// Recovering refusal.
func (s *Store) guardFresh(ctx context.Context, key, owner string, ttl time.Duration, booted, recovering *api.KVPair) error {
	guard := max(ttl, s.guard, s.ttlMin)
	refuse := &backend.HeldError{Holder: backend.Lease{Key: key, TTL: guard}, Recovering: true}
	if recovering != nil && recovering.Session != "" {
		return refuse
	}
	if booted != nil {
		return nil
	}
	// The data is gone (or was never there): start the guard. A racing
	// grant may have started it already; either way, refuse.
	sess, err := s.createSession(ctx, "acquire", key, owner, guard)
	if err != nil {
		return err
	}
	ok, _, _, err := s.txn.Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.BootedKey(key), Value: []byte("1"), Index: 0}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: s.RecoveringKey(key), Value: []byte(guard.String()), Session: sess}},
	}, s.queryOpts(ctx))
	if err != nil || !ok {
		s.destroySession(ctx, sess)
		if err != nil {
			return s.transport("acquire", key, ctx, err)
		}
	}
	return refuse
}
