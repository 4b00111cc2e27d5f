package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
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

// AwaitHandover implements backend.Handover. It waits on the store's
// pub/sub connection, never on a connection of the client's pool: the
// release that hands a key over publishes "renewed <token> <ttl> <owner>"
// on the key's channel, and the store's subscriber passes it to the
// owner's waiter. The channel stays subscribed for a while after the wait
// (channelLinger), and a handover it sees while the owner is not waiting
// is kept for the owner's next wait. A handover published before the
// subscription held is found by one look in the key's mailbox
// (MailboxKey: GET and PTTL in one MULTI) once the server has confirmed the
// subscription, and again after every re-subscription.
//
// max is measured by a timer of the client: the wait ends at max even
// when the pub/sub connection is broken or the server stalls; the caller
// then asks again with AcquireQueued, which returns a lease handed to it
// meanwhile. A look that the server does not answer in time is
// abandoned (Close waits for it).
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
	timer := time.NewTimer(max)
	defer timer.Stop()
	name := s.LeaseKey(key)
	sub, err := s.subscriber(name)
	if err != nil {
		return backend.Lease{}, false, fmt.Errorf("redisbackend: await handover %q: %w", key, err)
	}
	w, h, ok, err := sub.await(name, owner)
	if err != nil {
		return backend.Lease{}, false, fmt.Errorf("redisbackend: await handover %q: %w", key, err)
	}
	if ok {
		return h.lease(key, time.Now()), true, nil
	}
	var took uint64 // the token of the lease returned, if one
	defer func() { w.leave(took) }()
	var looking chan lookResult // the look in flight, if any
	again := false              // look again once it is back
	for {
		select {
		case h := <-w.found:
			took = h.token
			return h.lease(key, time.Now()), true, nil
		case <-w.look:
			if looking != nil {
				again = true
				continue
			}
			looking, err = s.look(ctx, key, owner)
			if err != nil {
				return backend.Lease{}, false, fmt.Errorf("redisbackend: await handover %q: %w", key, err)
			}
		case r := <-looking:
			looking = nil
			if r.err != nil {
				return backend.Lease{}, false, s.transport("await handover", key, ctx, r.err)
			}
			if r.ok {
				took = r.lease.Token
				return r.lease, true, nil
			}
			if again {
				again = false
				if looking, err = s.look(ctx, key, owner); err != nil {
					return backend.Lease{}, false, fmt.Errorf("redisbackend: await handover %q: %w", key, err)
				}
			}
		case <-timer.C:
			return backend.Lease{}, false, nil
		case <-ctx.Done():
			return backend.Lease{}, false, fmt.Errorf("redisbackend: await handover %q: %w", key, backend.ContextError(ctx))
		case <-sub.ctx.Done():
			return backend.Lease{}, false, fmt.Errorf("redisbackend: await handover %q: %w", key, backend.ErrClosed)
		}
	}
}

// taken notes that a caller of s now knows of the lease of key with
// token: a handover announced with that token or an older one, seen on
// key's channel, is not returned by a later AwaitHandover (its owner may
// have released it since, before the release's message arrived).
func (s *Store) taken(key string, token uint64) {
	name := s.LeaseKey(key)
	shard := ""
	if s.sharded {
		shard = strconv.Itoa(hashSlot(name))
	}
	s.mu.Lock()
	sub := s.subs[shard]
	s.mu.Unlock()
	if sub != nil {
		sub.taken(name, token)
	}
}

// lease is the lease h announced, on key, with the TTL left of it at now
// (as a Lease's TTL is everywhere: what was left when the store
// answered). A remembered handover has aged since it arrived.
func (h handover) lease(key string, now time.Time) backend.Lease {
	return backend.Lease{Key: key, Owner: h.owner, Token: h.token, TTL: h.ttl - now.Sub(h.at)}
}

type lookResult struct {
	lease backend.Lease
	ok    bool
	err   error
}

// look reads key's mailbox once, on a goroutine that Close waits for,
// and delivers the lease it holds for owner, if any, on the returned
// channel (capacity 1, so an abandoned look does not leak).
func (s *Store) look(ctx context.Context, key, owner string) (chan lookResult, error) {
	res := make(chan lookResult, 1)
	err := s.spawn(func() {
		box := s.MailboxKey(key)
		var get *redis.StringCmd
		var pttl *redis.DurationCmd
		_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			get, pttl = p.Get(ctx, box), p.PTTL(ctx, box)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			res <- lookResult{err: err}
			return
		}
		l, ok, err := handedOver(key, owner, box, get, pttl)
		res <- lookResult{l, ok, err}
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// handedOver reads the lease of owner out of the mailbox box of key, as
// GET and PTTL read it in one transaction: the lease's TTL is what was
// left of it then.
func handedOver(key, owner, box string, get *redis.StringCmd, pttl *redis.DurationCmd) (backend.Lease, bool, error) {
	v, err := get.Result()
	if errors.Is(err, redis.Nil) {
		return backend.Lease{}, false, nil
	}
	if err != nil {
		return backend.Lease{}, false, err
	}
	bad := func(what string) error {
		return fmt.Errorf("%w: mailbox %s %s; delete the key or use another prefix", backend.ErrCorrupt, box, what)
	}
	tok, who, ok := strings.Cut(v, " ")
	token, tokOK := parseToken(tok)
	if !ok || !tokOK || backend.ValidateOwner(who) != nil {
		return backend.Lease{}, false, bad(fmt.Sprintf("holds %.40q, not a lease \"<token> <owner>\"", v))
	}
	left, err := pttl.Result()
	if err != nil {
		return backend.Lease{}, false, err
	}
	if left == -1 {
		return backend.Lease{}, false, bad("has no expiry")
	}
	if who != owner || left <= 0 {
		return backend.Lease{}, false, nil // another's, or gone since
	}
	return backend.Lease{Key: key, Owner: owner, Token: token, TTL: left}, true, nil
}
