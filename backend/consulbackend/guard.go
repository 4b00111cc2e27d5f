package consulbackend

import (
	"context"
	"fmt"
	"strings"
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
// Keys whose counter survived cannot have been lost.
//
// Each tenant T has a marker too, "<prefix>/booted/{T:}", with its
// recovering entry "<prefix>/recovering/{T:}": a service whose marker is
// missing while its tenant's is there is new to this Consul, not lost
// (a loss would have taken the tenant's marker too), and is granted at
// once, unless the tenant's recovering entry is locked (the tenant's data
// went a moment ago). A grant that finds neither (a new Consul, or one
// that lost its data) writes and locks the service's and the tenant's
// entries in one transaction; a token of a per-service policy, which may
// only read the tenant's, writes the service's alone (with such tokens
// each service waits once, unless batonctl init or a tenant's token wrote
// the tenant's marker). So a tenant's first service on a Consul waits
// once, and its next services do not, and DeclareIntact (batonctl init)
// spares the first one too.
//
// Each service has its own markers, so that a client whose ACL token may
// write one service's keys (the README's per-service policy) can hold up
// no other service's grants; the tenant's it may read only. Keys without
// a tag of their own share "<prefix>/booted" and "<prefix>/recovering".

const (
	bootedSuffix     = "booted"
	recoveringSuffix = "recovering"
)

// WithRestartGuard sets how long, after the store finds that Consul lost
// a service's data, it refuses that service's keys that lost their
// fencing counter, when that is longer than the ttl asked for (default 0:
// the ttl alone). Set it to the longest lease any holder of the store's
// keeps. consulconfig.Store (config/consulconfig) does.
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

// TenantBootedKey returns the marker that says the data of all of key's
// tenant's services is whole: "<prefix>/booted/{T:}" for a key whose hash
// tag is {T:app} (no app is named ""), "" for any other key. Its
// recovering entry is "<prefix>/recovering/{T:}".
func (s *Store) TenantBootedKey(key string) string { return s.tenantGuardKey(bootedSuffix, key) }

// tenantGuardKey returns "<prefix>/<kind>/{T:}" for a key whose hash tag
// is {T:app}, or "".
func (s *Store) tenantGuardKey(kind, key string) string {
	tag := backend.HashTag(key)
	i := strings.IndexByte(tag, ':')
	if i <= 0 {
		return ""
	}
	return s.guardPath(kind, tag[:i+1]+"}")
}

// guardFresh decides whether a key without a fencing counter may be
// granted, from the markers the grant read: nil if so, with the
// operations the grant's transaction must add (for a service new to a
// Consul its tenant already uses: create its marker, if the tenant's is
// still as read), otherwise the Recovering refusal.
func (s *Store) guardFresh(ctx context.Context, key, owner string, ttl time.Duration, booted, recovering *api.KVPair) (api.TxnOps, error) {
	guard := max(ttl, s.guard, s.ttlMin)
	refuse := &backend.HeldError{Holder: backend.Lease{Key: key, TTL: guard}, Recovering: true}
	if recovering != nil && recovering.Session != "" {
		return nil, refuse
	}
	if booted != nil {
		return nil, nil
	}
	tenant, tenantLocked, err := s.readTenantMarkers(ctx, key)
	if err != nil {
		return nil, err
	}
	switch {
	case tenant != nil && tenantLocked:
		return nil, refuse // the tenant's data went a moment ago
	case tenant != nil:
		// A service new to a Consul its tenant uses: had Consul lost
		// the service's data, the tenant's marker would have gone too.
		return api.TxnOps{
			{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: tenant.Key, Index: tenant.ModifyIndex}},
			{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.BootedKey(key), Value: []byte("1"), Index: 0}},
		}, nil
	}
	return nil, s.startGuard(ctx, key, owner, guard, refuse)
}

// readTenantMarkers reads the marker of key's tenant and reports whether
// its recovering entry is locked; nil for a key without a tenant.
func (s *Store) readTenantMarkers(ctx context.Context, key string) (*api.KVPair, bool, error) {
	tb := s.TenantBootedKey(key)
	if tb == "" {
		return nil, false, nil
	}
	ok, resp, _, err := s.txn.Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVGetOrEmpty, Key: tb}},
		{KV: &api.KVTxnOp{Verb: api.KVGetOrEmpty, Key: s.tenantGuardKey(recoveringSuffix, key)}},
	}, s.queryOpts(ctx))
	if err != nil {
		return nil, false, s.transport("acquire", key, ctx, err)
	}
	if !ok || len(resp.Results) < 2 {
		return nil, false, s.txnFailed("acquire", key, resp)
	}
	rec := present(resp.Results[1].KV)
	return present(resp.Results[0].KV), rec != nil && rec.Session != "", nil
}

// startGuard starts the guard for key's service, and for its tenant when
// the tenant's marker is missing too (a new Consul, or one that lost its
// data): it writes the markers and locks the recovering entries with a
// new session whose TTL is guard, then returns refuse. A token whose
// policy covers one service (ACLPolicy with an app) may not write the
// tenant's entries: the service's are written alone.
func (s *Store) startGuard(ctx context.Context, key, owner string, guard time.Duration, refuse error) error {
	sess, err := s.createSession(ctx, "acquire", key, owner, guard)
	if err != nil {
		return err
	}
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.BootedKey(key), Value: []byte("1"), Index: 0}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: s.RecoveringKey(key), Value: []byte(guard.String()), Session: sess}},
	}
	if tb := s.TenantBootedKey(key); tb != "" {
		ops = append(ops,
			&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: tb, Value: []byte("1"), Index: 0}},
			&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: s.tenantGuardKey(recoveringSuffix, key), Value: []byte(guard.String()), Session: sess}})
	}
	ok, resp, _, err := s.txn.Txn(ops, s.queryOpts(ctx))
	if err == nil && !ok && len(ops) > 2 && denied(resp) {
		ok, _, _, err = s.txn.Txn(ops[:2], s.queryOpts(ctx))
	}
	if err != nil || !ok {
		s.destroySession(ctx, sess)
		if err != nil {
			return s.transport("acquire", key, ctx, err)
		}
	}
	return refuse
}

// denied reports whether Consul refused a transaction for its ACL token.
func denied(resp *api.TxnResponse) bool {
	if resp == nil {
		return false
	}
	for _, e := range resp.Errors {
		if strings.Contains(strings.ToLower(e.What), "permission denied") {
			return true
		}
	}
	return false
}

// DeclareIntact declares the Consul data of the services of keys whole,
// for a Consul that an operator knows holds no live lease of them (a new
// agent, or one whose every holder has stopped): it writes the markers of
// each key's service and tenant (BootedKey, TenantBootedKey) and deletes
// their recovering entries, so that grants of the tenant's services wait
// for no restart guard until Consul loses its data. batonctl init calls
// it with the service's backend.AppKey(tenant, app).
func (s *Store) DeclareIntact(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return fmt.Errorf("consulbackend: declare intact: %w: no key: name the services, as backend.AppKey(tenant, app)", backend.ErrInvalidArgument)
	}
	for _, key := range keys {
		if err := backend.ValidateKey(key); err != nil {
			return fmt.Errorf("consulbackend: declare intact: %w", err)
		}
		ops := api.TxnOps{
			{KV: &api.KVTxnOp{Verb: api.KVSet, Key: s.BootedKey(key), Value: []byte("1")}},
			{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.RecoveringKey(key)}},
		}
		if tb := s.TenantBootedKey(key); tb != "" {
			ops = append(ops,
				&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVSet, Key: tb, Value: []byte("1")}},
				&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.tenantGuardKey(recoveringSuffix, key)}})
		}
		ok, resp, _, err := s.txn.Txn(ops, s.queryOpts(ctx))
		if err != nil {
			return s.transport("declare intact", key, ctx, err)
		}
		if !ok {
			return s.txnFailed("declare intact", key, resp)
		}
	}
	return nil
}
