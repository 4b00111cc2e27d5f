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
	if err := errors.Join(backend.ValidateArgs(key, owner, ttl), backend.ValidateFloor(floor), backend.ValidatePatience(patience)); err != nil {
		return backend.Lease{}, fmt.Errorf("redisbackend: acquire queued: %w", err)
	}
	ms := backend.RoundUpMillis(ttl).Milliseconds()
	var pms int64
	if patience > 0 {
		pms = backend.RoundUpMillis(patience).Milliseconds()
	}
	line, deadlines := s.LineKeys(key)
	res, err := s.grant(ctx, acquireQueuedScript, []string{s.LeaseKey(key), s.FenceKey(key), line, deadlines},
		owner, ms, strconv.FormatUint(floor, 10), pms)
	if errors.Is(err, ErrNotReplicated) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.replicaWait)
		_ = releaseScript.Run(rctx, s.rdb, s.releaseKeys(key), owner, 0, s.publish()).Err()
		cancel()
	}
	if err != nil {
		return backend.Lease{}, s.transport("acquire", key, ctx, err)
	}
	r, err := parseReply("acquire", key, res)
	if err != nil {
		return backend.Lease{}, err
	}
	switch r.status {
	case "ok":
		return r.lease, nil
	case "held", "queued":
		return backend.Lease{}, &backend.HeldError{Holder: r.lease, Next: r.next}
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
	if err := dequeueScript.Run(ctx, s.rdb, s.releaseKeys(key), owner, s.publish()).Err(); err != nil {
		return s.transport("dequeue", key, ctx, err)
	}
	return nil
}
