package consulbackend

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

// Fencing counters that end.
//
// A counter is locked by a keeper session of the store that last granted
// its key, so that per-entity keys (invoice:42) do not leave a counter
// each behind for ever: Consul deletes it when that session ends. A store
// makes one keeper session per length (see keeperTTL) when it first needs
// it and renews it, at most every keeperRefresh, when it grants with it,
// so a counter lives at least its keep time (WithCounterKeep, default an
// hour; longer for a lease that is longer) after its key's last grant,
// and Consul ends it at most about twice that later. Close leaves the
// keeper sessions to their TTL, so that counters do not end when a
// process stops. A key whose counter ended is granted like a new one:
// its token is max(floor, the clock in µs) + 1, still above every token
// the counter gave, which came from the clock too. A counter that floors
// pushed further ahead of the clock than its life (backend.CounterLife)
// is written with no keeper and kept for ever, as on the other stores.

// DefaultCounterKeep is how long, at least, a fencing counter outlives its
// key's last grant unless WithCounterKeep says otherwise.
const DefaultCounterKeep = backend.CounterKeep

// WithCounterKeep sets how long, at least, a key's fencing counter
// outlives the key's last grant (default an hour; for a lease longer than
// that, the lease's ttl). Consul ends it at most about twice as late.
func WithCounterKeep(d time.Duration) Option {
	return func(s *Store) error {
		if d < time.Millisecond || d > MaxSessionTTL/2 {
			return fmt.Errorf("consulbackend: %w: counter keep %v must be in [1ms, %v]", backend.ErrInvalidArgument, d, MaxSessionTTL/2)
		}
		s.counterKeep = backend.RoundUpMillis(d)
		return nil
	}
}

// keeperSession is one keeper session of the store.
type keeperSession struct {
	id      string
	renewed time.Time // when it was created or last renewed, by this process's clock
}

// keepers are the store's keeper sessions, by TTL.
type keepers struct {
	mu sync.Mutex
	by map[time.Duration]*keeperSession
}

// keeperRefresh is how long a keeper of the keep time d goes without a
// renewal while the store grants with it.
func keeperRefresh(d time.Duration) time.Duration { return min(time.Minute, d/4) }

// keeperTTL is the TTL of the keeper session that keeps the counter of a
// key granted for ttl: the keep time, or the ttl if longer, rounded up to
// a whole keep time so that a store needs few keepers, plus the longest a
// keeper goes without renewal.
func (s *Store) keeperTTL(ttl time.Duration) time.Duration {
	n := (ttl + s.counterKeep - 1) / s.counterKeep
	d := max(n, 1) * s.counterKeep
	return min(max(d+keeperRefresh(s.counterKeep), s.ttlMin), MaxSessionTTL)
}

// keeper returns the keeper session that locks the counter of key,
// granted for ttl: made if the store has none of that length, renewed if
// it was not renewed for keeperRefresh.
func (s *Store) keeper(ctx context.Context, op, key string, ttl time.Duration) (string, error) {
	d := s.keeperTTL(ttl)
	s.keep.mu.Lock()
	k := s.keep.by[d]
	s.keep.mu.Unlock()
	now := time.Now()
	if k != nil && now.Sub(k.renewed) < keeperRefresh(s.counterKeep) {
		return k.id, nil
	}
	if k != nil {
		entries, _, err := s.session.Renew(k.id, s.writeOpts(ctx))
		if err != nil {
			return "", s.transport(op, key, ctx, fmt.Errorf("renew the session that keeps fencing counters: %w", err))
		}
		if entries != nil {
			s.keep.mu.Lock()
			if s.keep.by[d] == k {
				k.renewed = now
			}
			s.keep.mu.Unlock()
			return k.id, nil
		}
		// It ended (Consul lost its data, or an operator destroyed it).
	}
	// No lock-delay: a counter whose keeper ended is free to be written
	// again at once.
	id, err := s.newSession(ctx, op, key, "fencing counters", d, 0)
	if err != nil {
		return "", err
	}
	s.keep.mu.Lock()
	if s.keep.by == nil {
		s.keep.by = make(map[time.Duration]*keeperSession)
	}
	if cur := s.keep.by[d]; cur != nil && cur != k {
		// A racing grant made one first: use it, and end this one.
		s.keep.mu.Unlock()
		s.destroyLater(id)
		return cur.id, nil
	}
	s.keep.by[d] = &keeperSession{id: id, renewed: now}
	s.keep.mu.Unlock()
	return id, nil
}

// counterKeeper returns the keeper session that is to lock key's counter
// once a grant (or a break) for ttl moves it to token, or "" when the
// counter must outlive every keeper: a floor put it further ahead of the
// clock than its life (backend.CounterLife), and the clock alone would
// not give larger tokens should it end.
func (s *Store) counterKeeper(ctx context.Context, op, key string, token uint64, ttl time.Duration) (string, error) {
	if backend.CounterLife(token, s.now().UnixMicro(), ttl, s.counterKeep) == 0 {
		return "", nil
	}
	return s.keeper(ctx, op, key, ttl)
}

// keeperEnded reports whether a transaction's error what says that the
// keeper session (if any) ended, and then forgets it, so that the next
// grant makes another.
func (s *Store) keeperEnded(keeper, what string) {
	if keeper != "" && strings.Contains(what, keeper) {
		s.forgetKeeper(keeper)
	}
}

// forgetKeeper drops the keeper session id, which Consul refused as
// ended, so that the next grant makes another.
func (s *Store) forgetKeeper(id string) {
	s.keep.mu.Lock()
	defer s.keep.mu.Unlock()
	for d, k := range s.keep.by {
		if k.id == id {
			delete(s.keep.by, d)
		}
	}
}

// setCounter are the operations that move key's counter, read as fence
// (nil if absent), to token and lock it with the keeper session (with
// none, "", the counter is kept for ever: see counterKeeper), keeping
// the release mark in its flags. With check, they hold only if the counter
// is as it was read; a handover, which checks that the lease it replaces
// is as it was read, needs no more: nobody grants a held key, and what a
// waiter's join writes (touchCounter) leaves the value and the flags as
// they were. The counter is deleted and written again because another
// store's keeper may hold it.
func (s *Store) setCounter(key string, fence *api.KVPair, token uint64, keeper string, check bool) api.TxnOps {
	k := s.FenceKey(key)
	set := &api.KVTxnOp{Verb: api.KVLock, Key: k, Value: []byte(strconv.FormatUint(token, 10)), Session: keeper}
	if keeper == "" {
		set.Verb = api.KVSet
	}
	if fence == nil {
		return api.TxnOps{
			{KV: &api.KVTxnOp{Verb: api.KVCheckNotExists, Key: k}},
			{KV: set},
		}
	}
	set.Flags = fence.Flags
	var ops api.TxnOps
	if check {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: k, Index: fence.ModifyIndex}})
	}
	return append(ops,
		&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: k}},
		&api.TxnOp{KV: set})
}

// touchCounter are the operations that write key's counter, read as fence,
// again as it was (value, flags, keeper), if it is still as read, so that
// only its index changes. A waiter's join with nobody else in line does
// (joinKeyChecks), so that a release that read the line before the join
// finds the counter changed and reads again. Watches block on the lease key, not on the counter, so this wakes
// none of them (a rewrite of the lease would wake them all).
func (s *Store) touchCounter(key string, fence *api.KVPair) api.TxnOps {
	k := s.FenceKey(key)
	verb := api.KVSet
	if fence.Session != "" {
		verb = api.KVLock
	}
	return api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: k, Index: fence.ModifyIndex}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: k}},
		{KV: &api.KVTxnOp{Verb: verb, Key: k, Value: fence.Value, Flags: fence.Flags, Session: fence.Session}},
	}
}
