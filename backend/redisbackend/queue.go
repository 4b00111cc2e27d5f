package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/baton-go/baton/backend"
)

// AcquireQueued implements backend.Queue. The line lives beside the lease
// key (LineKeys), in its Cluster slot; places are timed by the server's
// clock.
func (s *Store) AcquireQueued(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
	if err := s.begin(ctx, "acquire", key); err != nil {
		return backend.Lease{}, err
	}
	if err := errors.Join(backend.ValidateOwner(owner), backend.ValidateTTL("ttl", ttl), backend.ValidateFloor(floor), backend.ValidatePatience(patience)); err != nil {
		return backend.Lease{}, fmt.Errorf("redisbackend: acquire queued: %w", err)
	}
	ms := backend.RoundUpMillis(ttl).Milliseconds()
	var pms int64
	if patience > 0 {
		pms = backend.RoundUpMillis(patience).Milliseconds()
	}
	res, err := s.grant(ctx, s.scripts.acquireQueued, key, owner, ms, strconv.FormatUint(floor, 10), pms)
	if errors.Is(err, ErrNotReplicated) {
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
		s.taken(key, r.lease.Token)
		return r.lease, nil
	case statusHeld, statusQueued:
		return backend.Lease{}, &backend.HeldError{Holder: r.lease, Next: r.next}
	case statusRecovering:
		return backend.Lease{}, &backend.HeldError{Holder: r.lease, Recovering: true}
	}
	return backend.Lease{}, r.unexpected("acquire", key)
}

// Dequeue implements backend.Queue.
func (s *Store) Dequeue(ctx context.Context, key, owner string) error {
	if err := s.begin(ctx, "dequeue", key); err != nil {
		return err
	}
	if err := backend.ValidateOwner(owner); err != nil {
		return fmt.Errorf("redisbackend: dequeue: %w", err)
	}
	res, err := s.run(ctx, s.scripts.dequeue, key, owner).Result()
	if err != nil {
		return s.transport("dequeue", key, ctx, err)
	}
	r, err := parseReply("dequeue", key, res, backend.Lease{Key: key})
	if err != nil {
		return err
	}
	if r.status != statusFree {
		return r.unexpected("dequeue", key)
	}
	return nil
}
