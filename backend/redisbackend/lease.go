package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/baton-go/baton/backend"
)

// Acquire implements backend.Store.
func (s *Store) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	if err := s.begin(ctx, "acquire", key); err != nil {
		return backend.Lease{}, err
	}
	if err := errors.Join(backend.ValidateOwner(owner), backend.ValidateTTL("ttl", ttl), backend.ValidateFloor(floor)); err != nil {
		return backend.Lease{}, fmt.Errorf("redisbackend: acquire: %w", err)
	}
	ms := backend.RoundUpMillis(ttl).Milliseconds()
	return s.acquire(ctx, s.scripts.acquire, key, asked(key, owner, ms), owner, ms, floor)
}

// acquire runs script, the grant of Acquire or AcquireQueued of lease
// want (asked), with args: owner, ttl in ms, floor and the script's
// further args. It reads the script's reply. A grant that too few
// replicas acknowledged is undone: a failover could lose it while its
// holder believed in it.
func (s *Store) acquire(ctx context.Context, script *script, key string, want backend.Lease, args ...any) (backend.Lease, error) {
	res, err := s.grant(ctx, script, key, args...)
	if errors.Is(err, ErrNotReplicated) {
		s.undo(ctx, key, want.Owner)
	}
	if err != nil {
		return backend.Lease{}, s.transport("acquire", key, ctx, err)
	}
	r, err := parseReply("acquire", key, res, want)
	if err != nil {
		return backend.Lease{}, err
	}
	switch r.status {
	case statusOK:
		s.taken(key, r.lease.Token)
		return r.lease, nil
	case statusHeld, statusQueued:
		return backend.Lease{}, &backend.HeldError{Holder: r.lease, Next: r.next}
	case statusRecovering:
		return backend.Lease{}, &backend.HeldError{Holder: r.lease, Recovering: true}
	}
	return backend.Lease{}, r.unexpected("acquire", key)
}

// Renew implements backend.Store.
func (s *Store) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	if err := s.begin(ctx, "renew", key); err != nil {
		return backend.Lease{}, err
	}
	if err := errors.Join(backend.ValidateOwner(owner), backend.ValidateTTL("ttl", ttl)); err != nil {
		return backend.Lease{}, fmt.Errorf("redisbackend: renew: %w", err)
	}
	ms := backend.RoundUpMillis(ttl).Milliseconds()
	r, err := s.call(ctx, "renew", s.scripts.renew, key, asked(key, owner, ms), owner, ms)
	if err != nil {
		return backend.Lease{}, err
	}
	switch r.status {
	case statusOK:
		return r.lease, nil
	case statusHeld, statusFree:
		return backend.Lease{}, &backend.NotHeldError{Key: key, Owner: owner, Holder: r.lease}
	}
	return backend.Lease{}, r.unexpected("renew", key)
}

// Release implements backend.Store.
func (s *Store) Release(ctx context.Context, key, owner string, keepFor time.Duration) error {
	if err := s.begin(ctx, "release", key); err != nil {
		return err
	}
	if err := backend.ValidateOwner(owner); err != nil {
		return fmt.Errorf("redisbackend: release: %w", err)
	}
	if err := backend.ValidateKeepFor(keepFor); err != nil {
		return fmt.Errorf("redisbackend: release: %w", err)
	}
	var ms int64
	if keepFor > 0 {
		ms = backend.RoundUpMillis(keepFor).Milliseconds()
	}
	r, err := s.call(ctx, "release", s.scripts.release, key, asked(key, owner, ms), owner, ms)
	if err != nil {
		return err
	}
	return released(r, key, owner)
}

// released reads the reply of a release of owner's lease on key that put
// nobody in line: nil when it released the lease, a NotHeldError when
// owner did not hold it.
func released(r reply, key, owner string) error {
	switch r.status {
	case statusOK:
		return nil
	case statusHeld, statusFree:
		return &backend.NotHeldError{Key: key, Owner: owner, Holder: r.lease}
	}
	return r.unexpected("release", key)
}

// Get implements backend.Store.
func (s *Store) Get(ctx context.Context, key string) (backend.Lease, error) {
	if err := s.begin(ctx, "get", key); err != nil {
		return backend.Lease{}, err
	}
	r, err := s.call(ctx, "get", s.scripts.get, key, backend.Lease{Key: key})
	if err != nil {
		return backend.Lease{}, err
	}
	switch r.status {
	case statusHeld:
		return r.lease, nil
	case statusFree:
		return backend.Lease{}, fmt.Errorf("redisbackend: get %q: %w", key, backend.ErrNotFound)
	}
	return backend.Lease{}, r.unexpected("get", key)
}

// call runs script on key with args and reads its reply (parseReply,
// with asked) for the call op.
func (s *Store) call(ctx context.Context, op string, script *script, key string, asked backend.Lease, args ...any) (reply, error) {
	res, err := s.run(ctx, script, key, args...).Result()
	if err != nil {
		return reply{}, s.transport(op, key, ctx, err)
	}
	return parseReply(op, key, res, asked)
}

// undo releases a grant that too few replicas acknowledged, even when
// ctx has ended.
func (s *Store) undo(ctx context.Context, key, owner string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.replicaWait)
	defer cancel()
	_ = s.run(rctx, s.scripts.release, key, owner, 0).Err()
}

// transport wraps an error from the client. When ctx ended, the context's
// error is joined so errors.Is finds it.
func (s *Store) transport(op, key string, ctx context.Context, err error) error {
	return s.transportOn(op, key, s.lockKeyNames(key), ctx, err)
}

// transportOn is transport for a call whose script touches the Redis keys
// named in keys (for an error to point at).
func (s *Store) transportOn(op, key, keys string, ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		err = errors.Join(err, backend.ContextError(ctx))
	}
	if strings.Contains(err.Error(), "WRONGTYPE") {
		// A script met a key that holds another type than baton keeps
		// there: not baton's data.
		return fmt.Errorf("redisbackend: %s %q: %w: one of the Redis keys %s holds a value of another type than baton keeps there; delete the foreign one: %w",
			op, key, backend.ErrCorrupt, keys, err)
	}
	return fmt.Errorf("redisbackend: %s %q: %w", op, key, s.aclError(err))
}

// lockKeyNames names the Redis keys of lock key, for errors.
func (s *Store) lockKeyNames(key string) string {
	k := s.LeaseKey(key)
	return fmt.Sprintf("of %s (the lease, %s, %s, %s, %s, %s)", k, fenceSuffix, lineSuffix, requestSuffix, watchedSuffix, mailboxSuffix)
}
