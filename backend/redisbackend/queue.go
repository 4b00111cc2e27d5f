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
	// A key the store waits on or watched lately is likely held: the
	// script then skips the free key's fast path (its EXISTS).
	busy := "0"
	if s.asking(key, owner) {
		busy = "1"
	}
	l, err := s.acquire(ctx, s.scripts.acquireQueued, key, asked(key, owner, ms), owner, ms, floor, pms, busy)
	if !errors.Is(err, backend.ErrHeld) || pms == 0 {
		s.forgetAsk(key, owner) // no wait follows
	}
	return l, err
}

// Dequeue implements backend.Queue.
func (s *Store) Dequeue(ctx context.Context, key, owner string) error {
	if err := s.begin(ctx, "dequeue", key); err != nil {
		return err
	}
	if err := backend.ValidateOwner(owner); err != nil {
		return fmt.Errorf("redisbackend: dequeue: %w", err)
	}
	r, err := s.call(ctx, "dequeue", s.scripts.dequeue, key, backend.Lease{Key: key}, owner)
	if err != nil {
		return err
	}
	if r.status != statusFree {
		return r.unexpected("dequeue", key)
	}
	return nil
}

var _ backend.Rejoin = (*Store)(nil)

// ReleaseAndJoin implements backend.Rejoin: the release script, when it
// hands the key over, puts next in line as acquire_queued would.
func (s *Store) ReleaseAndJoin(ctx context.Context, key, owner, next string, ttl time.Duration, floor uint64, patience time.Duration) (bool, error) {
	if err := s.begin(ctx, "release", key); err != nil {
		return false, err
	}
	if err := backend.ValidateRejoin(owner, next, ttl, floor, patience); err != nil {
		return false, fmt.Errorf("redisbackend: release and join: %w", err)
	}
	ms, pms := backend.RoundUpMillis(ttl).Milliseconds(), backend.RoundUpMillis(patience).Milliseconds()
	s.asking(key, next) // a handover to next may follow this call (see AcquireQueued)
	r, err := s.call(ctx, "release", s.scripts.release, key, asked(key, owner, 0), owner, 0, next, ms, strconv.FormatUint(floor, 10), pms)
	if err == nil && r.status == statusJoined {
		return true, nil
	}
	s.forgetAsk(key, next) // next did not join: no wait follows
	if err != nil {
		return false, err
	}
	return false, released(r, key, owner)
}
