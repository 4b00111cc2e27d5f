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
// Consul by a marker, "<prefix>/booted", that the first grant writes and
// nothing deletes: a grant of a key without a fencing counter that finds
// no marker writes it and, in the same transaction, locks
// "<prefix>/recovering" with a new session whose TTL is the guard. While
// that entry lives, keys without a counter are granted to nobody: the
// grant returns a *backend.HeldError with Recovering set. Keys whose
// counter survived cannot have been lost. A Consul used by baton for the
// first time looks the same, and waits once.

const (
	bootedSuffix     = "booted"
	recoveringSuffix = "recovering"
)

// WithRestartGuard sets how long, after the store finds that Consul lost
// its data, it refuses keys that lost their fencing counter, when that is
// longer than the ttl asked for (default 0: the ttl alone). Set it to the
// longest lease any holder of the store's keys keeps.
// config.Config.ConsulStore does.
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

func (s *Store) bootedKey() string     { return s.prefix + "/" + bootedSuffix }
func (s *Store) recoveringKey() string { return s.prefix + "/" + recoveringSuffix }

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
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.bootedKey(), Value: []byte("1"), Index: 0}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: s.recoveringKey(), Value: []byte(guard.String()), Session: sess}},
	}, s.queryOpts(ctx))
	if err != nil || !ok {
		s.destroySession(ctx, sess)
		if err != nil {
			return s.transport("acquire", key, ctx, err)
		}
	}
	return refuse
}
