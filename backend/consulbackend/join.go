package consulbackend

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

// Joining the waiting line: a waiter's place, written or kept, with the
// sessions made for it and for the lease it asks for.

// joinLine puts owner at the back of key's line for patience, or keeps its
// place mine and moves its end to patience from now, unless patience is
// 0. The write holds only if the key and the waiter first in line are as
// st read them, so that a release between the read and the write cannot
// pass the newcomer by unseen; retry reports that they were not. The place
// carries a session for the lease asked for (placeRecord.Session), made
// or renewed here.
func (s *Store) joinLine(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration, st *state, mine *place, j *joining) (retry bool, err error) {
	if patience <= 0 {
		return false, nil
	}
	rec := placeRecord{TTLMillis: ttl.Milliseconds(), Floor: floor, PlaceMillis: s.placeTTL(patience).Milliseconds()}
	if mine != nil && mine.rec.PlaceMillis == rec.PlaceMillis {
		return s.keepPlace(ctx, key, owner, ttl, rec, st, mine)
	}
	return s.writePlace(ctx, key, owner, ttl, rec, st, mine, j)
}

// keepPlace is joinLine for a waiter whose place mine has the patience
// asked for: it renews the place's session and rewrites the place only if
// the lease it asks for changed (another ttl or floor, or the session for
// the lease ended).
func (s *Store) keepPlace(ctx context.Context, key, owner string, ttl time.Duration, rec placeRecord, st *state, mine *place) (retry bool, err error) {
	entries, _, err := s.session.Renew(mine.session, s.writeOpts(ctx))
	if err != nil {
		return false, s.transport("acquire queued", key, ctx, fmt.Errorf("renew the session of the place in line: %w", err))
	}
	if entries == nil {
		return true, nil // the place lapsed meanwhile: join as a newcomer
	}
	rec.Order = mine.rec.Order
	made := ""
	if rec.Session, made, err = s.leaseSessionFor(ctx, key, ttl, mine); err != nil {
		return false, err
	}
	if rec == mine.rec {
		s.rememberJoin(key, owner, st, mine.index)
		return false, nil
	}
	// Asks for another lease should the key be handed to it, or
	// the session for it ended.
	k := s.placeKey(key, owner)
	ok, resp, _, err := s.txn.Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: k, Index: mine.index}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: k, Value: encodeJSON(rec), Session: mine.session}},
	}, s.queryOpts(ctx))
	retry, err = s.txnRetry("acquire queued", key, ctx, ok, resp, err)
	switch {
	case retry:
		s.putIdle(ttl, made)
	case err != nil:
		if made != "" {
			s.destroyLater(made) // the place may carry it now
		}
	default:
		s.rememberJoin(key, owner, st, placeIndex(k, resp))
	}
	if err == nil && !retry && mine.rec.Session != rec.Session {
		s.putIdle(millis(mine.rec.TTLMillis), mine.rec.Session)
	}
	return retry, err
}

// writePlace is joinLine for a newcomer (mine nil), or for a waiter that
// asks with another patience, whose place moves to a session of another
// TTL and keeps its order: it writes the place with a session j holds.
func (s *Store) writePlace(ctx context.Context, key, owner string, ttl time.Duration, rec placeRecord, st *state, mine *place, j *joining) (retry bool, err error) {
	if err := s.prepare(ctx, key, j, millis(rec.PlaceMillis), ttl, mine == nil); err != nil {
		return false, err
	}
	sess, made := j.place, ""
	if mine != nil {
		if rec.Session, made, err = s.leaseSessionFor(ctx, key, ttl, mine); err != nil {
			return false, err
		}
	} else {
		rec.Session = j.lease
	}
	ops := s.joinChecks(key, st, mine)
	if mine != nil {
		// Another patience: the place moves to a session of another
		// TTL and keeps its order.
		rec.Order = mine.order
		ops = append(ops, s.leave(key, mine)...)
	}
	k := s.placeKey(key, owner)
	ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: k, Value: encodeJSON(rec), Session: sess}})
	ok, resp, _, err := s.txn.Txn(ops, s.queryOpts(ctx))
	if retry, err := s.txnRetry("acquire queued", key, ctx, ok, resp, err); retry || err != nil {
		if err != nil {
			// The join may have been made: end the place, and the
			// session it carries if it is new.
			s.destroyLater(sess, made, j.lease)
			*j = joining{}
		} else {
			s.putIdle(ttl, made) // the next attempt uses j's sessions again
		}
		return retry, err
	}
	*j = joining{} // used
	if mine != nil {
		s.leftLine(mine, rec.Session)
	}
	s.rememberJoin(key, owner, st, placeIndex(k, resp))
	return false, nil
}

// joinChecks are the operations that make a join hold only if a release
// that read the line before it cannot free the key without seeing it.
//
// With another waiter in line (not mine), they check the place of the
// last of them (anchor): unchanged at the join's write, it was in line
// for the whole time between the join's read and its write, so every
// release that read the line in that time saw a waiter and hands the key
// over instead of freeing it, and the newcomer stands behind it. A
// handover to the waiter first in line, another waiter's join or a
// renewal of the lease does not turn the newcomer away, and the counter is
// not written: joins behind others do not race each other or the
// handovers. The last in line is the place a handover reaches last.
//
// Alone in line (or only mine there), they check the key as st read it
// (joinKeyChecks).
func (s *Store) joinChecks(key string, st *state, mine *place) api.TxnOps {
	if anchor := st.lastBut(mine); anchor != nil {
		return api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.placeKey(key, anchor.owner), Index: anchor.index}}}
	}
	return s.joinKeyChecks(key, st)
}

// joinKeyChecks are joinChecks for a waiter that finds nobody else in
// line: the key must be as st read it.
func (s *Store) joinKeyChecks(key string, st *state) api.TxnOps {
	switch {
	case st.lease != nil:
		// Still the same lease: its session, which a renewal keeps and a
		// release or handover ends (its index changes with every
		// renewal, which must not turn waiters away). The counter, which
		// a release that frees the key checks, is then written again as
		// it is, so that a release that read the line before this join
		// fails its transaction, reads again and hands the key over
		// instead of freeing it with a waiter in line. Without a counter
		// (it ended while the key was held), the lease is written again
		// with its next mark instead, if it is as read, which wakes its
		// watchers.
		ops := api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: s.LeaseKey(key), Session: st.lease.session}}}
		if st.fenceKV != nil {
			return append(ops, s.touchCounter(key, st.fenceKV)...)
		}
		return append(ops,
			&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.LeaseKey(key), Index: st.lease.index}},
			&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: s.LeaseKey(key), Value: encodeJSON(st.lease.rec.marked()), Flags: st.leaseKV.Flags, Session: st.lease.session}})
	case st.leaseKV != nil:
		return api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.LeaseKey(key), Index: st.leaseKV.ModifyIndex}}}
	default:
		return api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCheckNotExists, Key: s.LeaseKey(key)}}}
	}
}

// joined is where a waiter's last join (or call that kept its place) left
// its place, for its AwaitHandover, which then need not read the line.
type joined struct {
	index  uint64 // the place's ModifyIndex after the join; 0 unknown
	behind bool   // another waiter was first in line
}

func joinedKey(key, owner string) string { return key + "\x00" + owner }

// rememberJoin keeps where owner's place in key's line, read or written at
// index, stands after a join on what st read.
func (s *Store) rememberJoin(key, owner string, st *state, index uint64) {
	if index == 0 {
		return
	}
	first := st.first()
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.joins[joinedKey(key, owner)] = joined{index: index, behind: first != nil && first.owner != owner}
	}
}

// takeJoin returns and forgets what owner's last join in key's line left.
func (s *Store) takeJoin(key, owner string) joined {
	s.mu.Lock()
	defer s.mu.Unlock()
	j := s.joins[joinedKey(key, owner)]
	delete(s.joins, joinedKey(key, owner))
	return j
}

// placeIndex returns the ModifyIndex a write transaction's results give
// the place k.
func placeIndex(k string, resp *api.TxnResponse) uint64 {
	if resp == nil {
		return 0
	}
	var index uint64
	for _, r := range resp.Results {
		if r.KV != nil && r.KV.Key == k {
			index = max(index, r.KV.ModifyIndex)
		}
	}
	return index
}

// joining holds the sessions that AcquireQueued made (or took idle) for a
// grant's lease, or a newcomer's place and lease, so that an attempt that
// lost a race and reads again does not make them again: the next write
// then follows its read at once. Those not used are kept idle at the end.
type joining struct {
	place, lease       string
	placeTTL, leaseTTL time.Duration
}

// prepare fills j with a session for a place of placeTTL and, with lease,
// one for a lease of leaseTTL.
func (s *Store) prepare(ctx context.Context, key string, j *joining, placeTTL, leaseTTL time.Duration, lease bool) error {
	if j.place != "" && j.placeTTL != placeTTL {
		s.putIdle(j.placeTTL, j.place)
		j.place = ""
	}
	if j.place == "" {
		id, err := s.sessionFor(ctx, "acquire queued", key, placeTTL)
		if err != nil {
			return err
		}
		j.place, j.placeTTL = id, placeTTL
	}
	if j.lease != "" && (!lease || j.leaseTTL != leaseTTL) {
		s.putIdle(j.leaseTTL, j.lease)
		j.lease = ""
	}
	if lease && j.lease == "" {
		id, err := s.sessionFor(ctx, "acquire queued", key, leaseTTL)
		if err != nil {
			return err
		}
		j.lease, j.leaseTTL = id, leaseTTL
	}
	return nil
}

// prepareLease fills j with a session for a lease of ttl, unless it has
// one.
func (s *Store) prepareLease(ctx context.Context, key string, j *joining, ttl time.Duration) error {
	if j.lease != "" {
		return nil
	}
	id, err := s.sessionFor(ctx, "acquire queued", key, ttl)
	if err != nil {
		return err
	}
	j.lease, j.leaseTTL = id, ttl
	return nil
}

// unused keeps idle the sessions j holds that no grant or join used.
func (s *Store) unused(j *joining) {
	s.putIdle(j.placeTTL, j.place)
	s.putIdle(j.leaseTTL, j.lease)
}

// leaseSessionFor returns the session for the lease of ttl that a waiter,
// in line at mine (nil: joining), asks for: mine's, renewed, if it was
// made for that ttl and Consul has not ended it, or else one of the
// store's (sessionFor), which it also returns as made.
func (s *Store) leaseSessionFor(ctx context.Context, key string, ttl time.Duration, mine *place) (sess, made string, err error) {
	if mine != nil && mine.rec.Session != "" && mine.rec.TTLMillis == ttl.Milliseconds() {
		entries, _, err := s.session.Renew(mine.rec.Session, s.writeOpts(ctx))
		if err != nil {
			return "", "", s.transport("acquire queued", key, ctx, fmt.Errorf("renew the session made for the lease: %w", err))
		}
		if entries != nil {
			return mine.rec.Session, "", nil
		}
	}
	made, err = s.sessionFor(ctx, "acquire queued", key, ttl)
	return made, made, err
}

// Joining without a read.
//
// A store that hands a key over knows, from its read of the line (or the
// waiters its lease named next, see known.go), who waits behind the
// waiter it handed the key to. Its next AcquireQueued of that key, which
// comes right after when a process locks the key in a loop, joins the line
// behind the last of them without reading the key and its line first: the
// join's transaction checks that place (joinChecks), which, unchanged
// since the handover's read, stood in line all that time, so the join
// holds as if it had read the line then. If that waiter has left or was
// handed the key since, the join fails and AcquireQueued reads as usual.

// joinKnown is AcquireQueued's first attempt when the store handed key
// over a moment ago (h, see lineHint): a join behind the last waiter it
// knew of, without a read. done false: nothing was decided (no waiter
// known, owner among them, or the line changed since), and the caller
// reads.
func (s *Store) joinKnown(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration, h lineHint, j *joining) (l backend.Lease, done bool, err error) {
	if len(h.next) == 0 || patience <= 0 || h.holder.Owner == owner || slices.ContainsFunc(h.next, func(n nextPlace) bool { return n.Owner == owner }) {
		return backend.Lease{}, false, nil
	}
	st := &state{lease: &entry{rec: record{Owner: h.holder.Owner, Token: h.holder.Token, TTLMillis: h.holder.TTL.Milliseconds()}}}
	for i, n := range h.next {
		st.line = append(st.line, place{owner: n.Owner, index: n.Index, session: n.Place, order: uint64(i + 1),
			rec: placeRecord{TTLMillis: n.TTLMillis, Floor: n.Floor, PlaceMillis: n.PlaceMillis, Session: n.Session}})
	}
	retry, err := s.joinLine(ctx, key, owner, ttl, floor, patience, st, nil, j)
	if retry || err != nil {
		return backend.Lease{}, err != nil, err
	}
	return backend.Lease{}, true, st.refusal(key, owner, patience)
}
