package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

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
	res, err := s.grant(ctx, s.scripts.acquireQueued, s.scriptKeys(key),
		owner, ms, strconv.FormatUint(floor, 10), pms)
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
	case "ok":
		return r.lease, nil
	case "held", "queued":
		return backend.Lease{}, &backend.HeldError{Holder: r.lease, Next: r.next}
	case "recovering":
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
	if err := s.scripts.dequeue.Run(ctx, s.rdb, s.scriptKeys(key), owner).Err(); err != nil {
		return s.transport("dequeue", key, ctx, err)
	}
	return nil
}

// AwaitHandover implements backend.Handover: it reads the owner's mailbox
// (MailboxKey) with XREAD BLOCK. A client without ContextTimeoutEnabled
// does not stop a blocked read when ctx ends, so the read runs on its own
// goroutine and AwaitHandover returns as soon as ctx ends; the read ends
// by itself within max, and Close waits for it.
//
// A store made WithReplicaAck does not hand over (the releasing client
// could not wait for the grantee's replicas): AwaitHandover then fails
// with errors.ErrUnsupported.
func (s *Store) AwaitHandover(ctx context.Context, key, owner string, max time.Duration) (backend.Lease, bool, error) {
	if err := s.begin(ctx, "await handover", key); err != nil {
		return backend.Lease{}, false, err
	}
	if err := errors.Join(backend.ValidateOwner(owner), backend.ValidateMaxWait(max)); err != nil {
		return backend.Lease{}, false, fmt.Errorf("redisbackend: await handover: %w", err)
	}
	if s.replicas > 0 {
		return backend.Lease{}, false, fmt.Errorf("redisbackend: await handover %q: %w: a store that waits for replicas (WithReplicaAck) does not hand keys over; wait for releases instead", key, errors.ErrUnsupported)
	}
	box := s.MailboxKey(key, owner)
	args := &redis.XReadArgs{Streams: []string{box, "0"}, Count: 1, Block: backend.RoundUpMillis(max)}
	if ctx.Done() == nil {
		return s.handedOver(ctx, key, owner, s.rdb.XRead(ctx, args))
	}
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return backend.Lease{}, false, fmt.Errorf("redisbackend: await handover %q: %w", key, backend.ErrClosed)
	}
	s.awaits.Add(1)
	s.mu.Unlock()
	read := make(chan *redis.XStreamSliceCmd, 1)
	go func() {
		defer s.awaits.Done()
		read <- s.rdb.XRead(ctx, args)
	}()
	select {
	case cmd := <-read:
		return s.handedOver(ctx, key, owner, cmd)
	case <-ctx.Done():
		return backend.Lease{}, false, fmt.Errorf("redisbackend: await handover %q: %w", key, backend.ContextError(ctx))
	}
}

// handedOver reads the lease out of a mailbox entry.
func (s *Store) handedOver(ctx context.Context, key, owner string, cmd *redis.XStreamSliceCmd) (backend.Lease, bool, error) {
	streams, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		return backend.Lease{}, false, nil
	}
	if err != nil {
		return backend.Lease{}, false, s.transport("await handover", key, ctx, err)
	}
	if len(streams) == 0 || len(streams[0].Messages) == 0 {
		return backend.Lease{}, false, nil
	}
	bad := func(what string, v any) error {
		return fmt.Errorf("redisbackend: await handover %q: %w: mailbox %s holds %s %v; delete the key or use another prefix",
			key, backend.ErrCorrupt, s.MailboxKey(key, owner), what, v)
	}
	m := streams[0].Messages[0].Values
	tok, _ := m["token"].(string)
	token, err := strconv.ParseUint(tok, 10, 64)
	if err != nil || token == 0 {
		return backend.Lease{}, false, bad("token", m["token"])
	}
	ttl, _ := m["ttl"].(string)
	ms, err := strconv.ParseInt(ttl, 10, 64)
	if err != nil || ms <= 0 {
		return backend.Lease{}, false, bad("ttl", m["ttl"])
	}
	return backend.Lease{Key: key, Owner: owner, Token: token, TTL: time.Duration(ms) * time.Millisecond}, true, nil
}
