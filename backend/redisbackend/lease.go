package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
	res, err := s.grant(ctx, s.scripts.acquire, key, owner, ms, strconv.FormatUint(floor, 10))
	if errors.Is(err, ErrNotReplicated) {
		// Undo the grant that only the master has; a failover could
		// lose it while we believed in it.
		s.undo(ctx, key, owner)
	}
	if err != nil {
		return backend.Lease{}, s.transport("acquire", key, ctx, err)
	}
	r, err := parseReply("acquire", key, res, asked(key, owner, ms))
	if err != nil {
		return backend.Lease{}, err
	}
	switch r.status {
	case statusOK:
		return r.lease, nil
	case statusHeld:
		return backend.Lease{}, &backend.HeldError{Holder: r.lease}
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
	res, err := s.run(ctx, s.scripts.renew, key, owner, ms).Result()
	if err != nil {
		return backend.Lease{}, s.transport("renew", key, ctx, err)
	}
	r, err := parseReply("renew", key, res, asked(key, owner, ms))
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
	res, err := s.run(ctx, s.scripts.release, key, owner, ms).Result()
	if err != nil {
		return s.transport("release", key, ctx, err)
	}
	r, err := parseReply("release", key, res, asked(key, owner, ms))
	if err != nil {
		return err
	}
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
	res, err := s.run(ctx, s.scripts.get, key).Result()
	if err != nil {
		return backend.Lease{}, s.transport("get", key, ctx, err)
	}
	r, err := parseReply("get", key, res, backend.Lease{Key: key})
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
