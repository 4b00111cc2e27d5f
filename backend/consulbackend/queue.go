package consulbackend

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

// The waiting line.
//
// A waiter's place in the line of key K is the KV entry
// "<prefix>/line/K/<owner>" (the owner path-escaped), locked by a session
// of the waiter's own whose TTL is its patience, and holding the JSON
// record {"ttl_ms", "floor", "place_ms", "order", "session"}: the lease it
// asks for should the key be handed to it, its session's TTL, its order in
// the line, and the session (of TTL ttl_ms) that the waiter made for that
// lease. The order is the entry's CreateIndex, which Consul makes strictly
// increasing, carried in the record when a place moves to a session of
// another TTL (a waiter that asks again with another patience), so that it
// keeps its place. When the waiter's session runs out, Consul deletes the
// entry: the place lapsed.
//
// A Release with a live waiter in line hands the key over in one
// transaction: it deletes the lease, moves the fencing counter to the
// waiter's token, marks the waiter's place handed (handedLease: out of the
// line, with the lease in it) and locks the key with the waiter's lease
// session (or, if Consul ended it, a session of the releasing store's).
// AwaitHandover watches the waiter's place (the first in line: the lease
// key) with blocking queries until it says so; the holder's release
// deletes the handed place.

var _ backend.Handover = (*Store)(nil)

// LineKey returns the Consul KV prefix under which the waiters of key
// hold their places, one entry per waiter.
func (s *Store) LineKey(key string) string { return s.prefix + "/line/" + key + "/" }

func (s *Store) placeKey(key, owner string) string { return s.LineKey(key) + url.PathEscape(owner) }

// placeRecord is the JSON value of a place in line.
type placeRecord struct {
	TTLMillis   int64  `json:"ttl_ms"`
	Floor       uint64 `json:"floor"`
	PlaceMillis int64  `json:"place_ms"`
	// Order is the place's order in the line, when it moved from the
	// entry it was first written to; 0 means the entry's CreateIndex.
	Order uint64 `json:"order,omitempty"`
	// Session is the session, of TTL TTLMillis, that the waiter made for
	// its lease when it joined, and renews whenever it asks again: a
	// handover locks the key with it, so that no session is created
	// between a release and the next grant. Empty: the handover makes
	// one.
	Session string `json:"session,omitempty"`
	// Handed, once set, says that the key was handed to this waiter:
	// the place is out of the line (see handedLease).
	Handed *handedLease `json:"handed,omitempty"`
}

// handedLease is what a handover writes into the place of the waiter it
// hands the key to, in the same transaction as the lease, instead of
// deleting the place: the waiter, which waits on its place, learns its
// lease (and what known.go needs) from it without reading the lease key.
// The place is out of the line from then on; its holder's release deletes
// it, or its session's end does.
type handedLease struct {
	Token    uint64      `json:"token"`
	Session  string      `json:"session"` // the lease's
	Next     []nextPlace `json:"next,omitempty"`
	Released uint64      `json:"released,omitempty"`
}

// place is one waiter's place, as read.
type place struct {
	owner   string
	rec     placeRecord
	session string
	index   uint64 // ModifyIndex
	order   uint64
}

// placeTTL is the TTL of the session of a place kept for patience. Consul
// ends a session twice its TTL after the last renewal (it allows for
// clock drift between its servers), so half the patience keeps the place
// for the patience; never less than the servers' minimum.
func (s *Store) placeTTL(patience time.Duration) time.Duration {
	half := (backend.RoundUpMillis(patience)/2 + time.Millisecond - 1).Truncate(time.Millisecond)
	return min(max(half, s.ttlMin), MaxSessionTTL)
}

// state is what one read of a key finds: its lease (nil if free), its
// counter, the restart guard's markers and, when asked for, its line.
type state struct {
	leaseKV, fenceKV, bootedKV, recoveringKV *api.KVPair

	lease  *entry
	line   []place // the live places, first in line first
	handed []place // places whose waiter was handed the key (out of the line)
}

// handedOf returns owner's place that a handover marked, or nil.
func (st *state) handedOf(owner string) *place {
	for i := range st.handed {
		if st.handed[i].owner == owner {
			return &st.handed[i]
		}
	}
	return nil
}

// look reads key's lease, counter and the restart guard's markers, and
// with line its waiting line, in one transaction.
func (s *Store) look(ctx context.Context, op, key string, line bool) (*state, error) {
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVGetOrEmpty, Key: s.LeaseKey(key)}},
		{KV: &api.KVTxnOp{Verb: api.KVGetOrEmpty, Key: s.FenceKey(key)}},
		{KV: &api.KVTxnOp{Verb: api.KVGetOrEmpty, Key: s.BootedKey(key)}},
		{KV: &api.KVTxnOp{Verb: api.KVGetOrEmpty, Key: s.RecoveringKey(key)}},
	}
	if line {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVGetTree, Key: s.LineKey(key)}})
	}
	ok, resp, _, err := s.txn.Txn(ops, s.queryOpts(ctx))
	if err != nil {
		return nil, s.transport(op, key, ctx, err)
	}
	if !ok || len(resp.Results) < 4 {
		return nil, s.txnFailed(op, key, resp)
	}
	r := resp.Results
	st := &state{leaseKV: present(r[0].KV), fenceKV: present(r[1].KV), bootedKV: present(r[2].KV), recoveringKV: present(r[3].KV)}
	if st.lease, err = s.entry(key, st.leaseKV); err != nil {
		return nil, err
	}
	if line {
		if st.line, st.handed, err = s.places(key, r[4:]); err != nil {
			return nil, err
		}
	}
	return st, nil
}

// places decodes the entries of key's line, skipping those of other keys
// below it and those whose session ended, and orders them; the places of
// waiters that were handed the key come apart, as handed.
func (s *Store) places(key string, results []*api.TxnResult) (line, handed []place, err error) {
	prefix := s.LineKey(key)
	for _, r := range results {
		p := r.KV
		if p == nil || p.Session == "" {
			continue
		}
		rest, ok := strings.CutPrefix(p.Key, prefix)
		if !ok || strings.Contains(rest, "/") {
			continue // the line of a longer key, such as K/x
		}
		owner, err := url.PathUnescape(rest)
		var rec placeRecord
		if err == nil {
			err = json.Unmarshal(p.Value, &rec)
		}
		if err == nil {
			err = errors.Join(backend.CheckStoredName("waiter", p.Key, owner), s.checkPlace(rec))
		}
		if err != nil {
			return nil, nil, fmt.Errorf("consulbackend: line of %q at %s: %w: %.60q is not a baton waiter's place: %s",
				key, backend.Printable(p.Key), backend.ErrCorrupt, p.Value, backend.Printable(err.Error()))
		}
		pl := place{owner: owner, rec: rec, session: p.Session, index: p.ModifyIndex, order: rec.Order}
		if pl.order == 0 {
			pl.order = p.CreateIndex
		}
		if rec.Handed != nil {
			handed = append(handed, pl)
			continue
		}
		line = append(line, pl)
	}
	slices.SortFunc(line, func(a, b place) int { return cmp.Compare(a.order, b.order) })
	return line, handed, nil
}

// checkPlace checks a place's record as read: a lease this store's
// sessions can hold (WithSessionTTLMin to MaxSessionTTL), a floor below
// the largest token, a place's session TTL Consul accepts, and for a
// place marked handed, a lease with a token and a session, and waiters
// behind it that pass checkNext. Whatever else is in a place would make
// a release that hands the key over fail half-way, or hand it to no
// waiter baton wrote.
func (s *Store) checkPlace(rec placeRecord) error {
	if err := errors.Join(s.checkLeaseTTL(rec.TTLMillis), backend.ValidateFloor(rec.Floor)); err != nil {
		return err
	}
	if rec.PlaceMillis <= 0 || millis(rec.PlaceMillis) > MaxSessionTTL {
		return fmt.Errorf("the place's session TTL %d ms is outside (0, %v]", rec.PlaceMillis, MaxSessionTTL)
	}
	if h := rec.Handed; h != nil {
		if h.Token == 0 || h.Token > backend.MaxToken || h.Session == "" {
			return fmt.Errorf("the lease handed to it, token %d on session %q, is not one baton grants", h.Token, h.Session)
		}
		return s.checkNext(h.Next)
	}
	return nil
}

// checkLeaseTTL checks the ttl a waiter asked for, as read: one this
// store's sessions can hold.
func (s *Store) checkLeaseTTL(ms int64) error {
	if d := millis(ms); ms <= 0 || d < s.ttlMin || d > MaxSessionTTL {
		return fmt.Errorf("its lease's ttl %d ms is outside what a session holds, [%v, %v]", ms, s.ttlMin, MaxSessionTTL)
	}
	return nil
}

// first returns the waiter first in line, or nil.
func (st *state) first() *place {
	if len(st.line) == 0 {
		return nil
	}
	return &st.line[0]
}

// placeOf returns owner's place in line, or nil.
func (st *state) placeOf(owner string) *place {
	for i := range st.line {
		if st.line[i].owner == owner {
			return &st.line[i]
		}
	}
	return nil
}

// leave are the operations that take place p out of key's line, if it is
// still as it was read.
func (s *Store) leave(key string, p *place) api.TxnOps {
	k := s.placeKey(key, p.owner)
	return api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: k, Index: p.index}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: k}},
	}
}

// AcquireQueued implements backend.Queue.
//
// A waiter that joins the line creates the session of its place; one that
// calls again with the same patience renews it. A place thus lapses
// between patience and twice the servers' session minimum after the
// waiter's last call, whichever is longer.
func (s *Store) AcquireQueued(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
	if err := s.begin(ctx, "acquire queued", key); err != nil {
		return backend.Lease{}, err
	}
	if err := errors.Join(backend.ValidateOwner(owner), s.validateSessionTTL("ttl", ttl), backend.ValidateFloor(floor), backend.ValidatePatience(patience)); err != nil {
		return backend.Lease{}, fmt.Errorf("consulbackend: acquire queued: %w", err)
	}
	ttl = backend.RoundUpMillis(ttl)
	var last *state
	j := &joining{}
	defer s.unused(j)
	for attempt := range grantAttempts {
		// A grant and a join both need a session for the lease: take it
		// (renewing an idle one, or making one) while the key is read.
		var ready chan error
		if j.lease == "" {
			ready = make(chan error, 1)
			go func() { ready <- s.prepareLease(ctx, key, j, ttl) }()
		}
		st, err := s.look(ctx, "acquire queued", key, true)
		if ready != nil {
			if perr := <-ready; err == nil {
				err = perr
			}
		}
		if err != nil {
			return backend.Lease{}, err
		}
		last = st
		l, retry, err := s.queued(ctx, key, owner, ttl, floor, patience, st, j)
		if err == nil && !retry {
			s.takeJoin(key, owner) // granted: no wait follows
		}
		if !retry {
			return l, err
		}
		if !backoff(ctx, attempt) {
			return backend.Lease{}, fmt.Errorf("consulbackend: acquire queued %q: %w", key, backend.ContextError(ctx))
		}
	}
	// Every attempt lost a race with other clients' writes to the key
	// or its line: under contention, a refusal like any other, and the
	// caller asks again as it would after one.
	he := &backend.HeldError{Holder: backend.Lease{Key: key}}
	if last.lease != nil {
		he.Holder = last.lease.rec.lease(key)
	}
	if first := last.first(); first != nil {
		he.Next = first.owner
	}
	return backend.Lease{}, he
}

// queued makes one attempt of AcquireQueued on what st read. retry
// reports that something it read changed before its write.
func (s *Store) queued(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration, st *state, j *joining) (backend.Lease, bool, error) {
	mine := st.placeOf(owner)
	if cur := st.lease; cur != nil {
		if cur.rec.Owner == owner && !cur.rec.Kept {
			// The key was handed to owner (or owner holds it already).
			return s.collect(ctx, key, cur)
		}
		if retry, err := s.joinLine(ctx, key, owner, ttl, floor, patience, st, mine, j); retry || err != nil {
			return backend.Lease{}, retry, err
		}
		return backend.Lease{}, false, &backend.HeldError{Holder: cur.rec.lease(key), Next: st.next(owner, patience)}
	}
	if first := st.first(); first != nil && first.owner != owner {
		// Free, but kept for the waiter first in line.
		if retry, err := s.joinLine(ctx, key, owner, ttl, floor, patience, st, mine, j); retry || err != nil {
			return backend.Lease{}, retry, err
		}
		return backend.Lease{}, false, &backend.HeldError{Holder: backend.Lease{Key: key}, Next: first.owner}
	}
	var out api.TxnOps
	sess, made := j.lease, ""
	if mine != nil {
		out = s.leave(key, mine)
		// The session made for the lease when owner joined, renewed so
		// that it lasts ttl from now.
		var err error
		if sess, made, err = s.leaseSessionFor(ctx, key, ttl, mine); err != nil {
			return backend.Lease{}, false, err
		}
	}
	l, w, retry, err := s.take(ctx, "acquire queued", key, st, owner, ttl, floor, out, sess, record{}, nil)
	switch {
	case err == nil && !retry:
		if sess == j.lease {
			j.lease = "" // used
		}
		if mine != nil {
			s.leftLine(mine, sess)
		}
		if len(st.line) == 0 || (len(st.line) == 1 && mine != nil) {
			s.remember(key, w) // nobody else in line
		}
	case retry:
		s.putIdle(ttl, made)
	case sess != "":
		// The grant may have been made with it: end it.
		s.destroyLater(sess)
		if sess == j.lease {
			j.lease = ""
		}
	}
	return l, retry, err
}

// leftLine keeps idle the sessions of place p, which left the line, but
// for used, which now holds the key.
func (s *Store) leftLine(p *place, used string) {
	s.putIdle(millis(p.rec.PlaceMillis), p.session)
	if p.rec.Session != used {
		s.putIdle(millis(p.rec.TTLMillis), p.rec.Session)
	}
}

// next names the waiter first in line once owner, refused, has joined
// with patience.
func (st *state) next(owner string, patience time.Duration) string {
	if first := st.first(); first != nil {
		return first.owner
	}
	if patience > 0 {
		return owner
	}
	return ""
}

// collect returns owner's lease cur after renewing its session: a lease
// handed over a while ago then lasts its ttl from now, as the caller
// counts it, although Consul cannot say how much of it was left.
func (s *Store) collect(ctx context.Context, key string, cur *entry) (backend.Lease, bool, error) {
	entries, _, err := s.session.Renew(cur.session, s.writeOpts(ctx))
	if err != nil {
		return backend.Lease{}, false, s.transport("acquire queued", key, ctx, fmt.Errorf("renew session: %w", err))
	}
	if entries == nil {
		return backend.Lease{}, true, nil // it ended meanwhile: look again
	}
	s.remember(key, handedTo(cur))
	return cur.rec.lease(key), false, nil
}

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
	k := s.placeKey(key, owner)
	if mine != nil && mine.rec.PlaceMillis == rec.PlaceMillis {
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
		ok, resp, _, err := s.txn.Txn(api.TxnOps{
			{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: k, Index: mine.index}},
			{KV: &api.KVTxnOp{Verb: api.KVLock, Key: k, Value: encodeJSON(rec), Session: mine.session}},
		}, s.queryOpts(ctx))
		retry, err := s.txnRetry("acquire queued", key, ctx, ok, resp, err)
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
	placeTTL := millis(rec.PlaceMillis)
	if err := s.prepare(ctx, key, j, placeTTL, ttl, mine == nil); err != nil {
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
	var ops api.TxnOps
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
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: s.LeaseKey(key), Session: st.lease.session}})
		if st.fenceKV != nil {
			ops = append(ops, s.touchCounter(key, st.fenceKV)...)
		} else {
			ops = append(ops,
				&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.LeaseKey(key), Index: st.lease.index}},
				&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: s.LeaseKey(key), Value: encodeJSON(st.lease.rec.marked()), Flags: st.leaseKV.Flags, Session: st.lease.session}})
		}
	case st.leaseKV != nil:
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.LeaseKey(key), Index: st.leaseKV.ModifyIndex}})
	default:
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckNotExists, Key: s.LeaseKey(key)}})
	}
	if first := st.first(); first != nil && first != mine {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.placeKey(key, first.owner), Index: first.index}})
	}
	if mine != nil {
		// Another patience: the place moves to a session of another
		// TTL and keeps its order.
		rec.Order = mine.order
		ops = append(ops, s.leave(key, mine)...)
	}
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

// txnRetry sorts out the answer to a write transaction: an error, a
// refusal because what it checked changed (retry), or success.
func (s *Store) txnRetry(op, key string, ctx context.Context, ok bool, resp *api.TxnResponse, err error) (retry bool, _ error) {
	switch {
	case err != nil:
		return false, s.transport(op, key, ctx, err)
	case ok:
		return false, nil
	case resp == nil || len(resp.Errors) == 0:
		return false, s.txnFailed(op, key, resp)
	}
	return true, nil
}

// handOver grants key, free or released by its holder as st read it, to
// the waiter first in line, w, with the ttl and floor it asked for, and
// takes w (and out, a waiter that leaves the line, if not nil) out of the
// line, in one transaction. The lease names the waiters behind w (see
// known.go). Watchers see the key held by w (EventRenewed), and w's
// AwaitHandover returns its lease.
func (s *Store) handOver(ctx context.Context, op, key string, st *state, w *place, out *place, extra api.TxnOps) (retry bool, err error) {
	ttl := millis(w.rec.TTLMillis)
	if out != nil {
		extra = append(s.leave(key, out), extra...)
	}
	carry := record{Next: nextPlaces(st, w, out)}
	if st.fenceKV != nil {
		carry.Released = st.fenceKV.Flags
	}
	// w's place is marked handed, not deleted (handedLease): its session
	// stays with it.
	_, _, retry, err = s.take(ctx, op, key, st, w.owner, ttl, w.rec.Floor, extra, w.rec.Session, carry, w)
	return retry, err
}

// handPlace are the operations that mark the place of the waiter to
// (as read at index, with the place session place) handed: the key goes
// to it with token on session sess, and carry's Next and Released.
func (s *Store) handPlace(key, owner string, index uint64, rec placeRecord, place string, token uint64, sess string, carry record) api.TxnOps {
	k := s.placeKey(key, owner)
	rec.Handed = &handedLease{Token: token, Session: sess, Next: carry.Next, Released: carry.Released}
	return api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: k, Index: index}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: k, Value: encodeJSON(rec), Session: place}},
	}
}

// dropHanded are the operations that delete owner's handed place, if st
// found one (its holder releases the key).
func (s *Store) dropHanded(key, owner string, st *state) api.TxnOps {
	if st.handedOf(owner) == nil {
		return nil
	}
	return api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.placeKey(key, owner)}}}
}

// droppedHanded keeps idle the session of owner's handed place, which
// dropHanded's operations deleted.
func (s *Store) droppedHanded(owner string, st *state) {
	if h := st.handedOf(owner); h != nil {
		s.putIdle(millis(h.rec.PlaceMillis), h.session)
	}
}

// Dequeue implements backend.Queue.
func (s *Store) Dequeue(ctx context.Context, key, owner string) error {
	if err := s.begin(ctx, "dequeue", key); err != nil {
		return err
	}
	if err := backend.ValidateOwner(owner); err != nil {
		return fmt.Errorf("consulbackend: dequeue: %w", err)
	}
	s.takeJoin(key, owner)
	for range grantAttempts {
		st, err := s.look(ctx, "dequeue", key, true)
		if err != nil {
			return err
		}
		if cur := st.lease; cur != nil && cur.rec.Owner == owner && !cur.rec.Kept {
			// The key was handed to owner, who gave up before it knew:
			// pass it on.
			err := s.release(ctx, key, owner, 1)
			if errors.Is(err, backend.ErrNotHeld) {
				continue
			}
			return err
		}
		mine := st.placeOf(owner)
		if mine == nil {
			return nil
		}
		if s.afterLook != nil {
			s.afterLook()
		}
		if st.lease == nil && mine == st.first() && len(st.line) > 1 {
			// The key is free and was kept for owner: it goes to the next.
			retry, err := s.handOver(ctx, "dequeue", key, st, &st.line[1], mine, nil)
			if retry {
				continue // nothing was handed over: look again
			}
			if err == nil {
				s.leftLine(mine, "")
				return nil
			}
			if !errors.Is(err, backend.ErrHeld) && !errors.Is(err, backend.ErrCorrupt) {
				return err
			}
			// The next waiter cannot be granted the key now (the store
			// is recovering); it asks again, as the first in line.
		}
		ok, resp, _, err := s.txn.Txn(s.leave(key, mine), s.queryOpts(ctx))
		if retry, err := s.txnRetry("dequeue", key, ctx, ok, resp, err); err != nil {
			return err
		} else if retry {
			continue
		}
		s.leftLine(mine, "")
		return nil
	}
	return fmt.Errorf("consulbackend: dequeue %q: the key or its line changed under %d attempts in a row; try again", key, grantAttempts)
}

// freeLook is how long AwaitHandover waits on a key it finds free at its
// first look before it lets the caller ask again.
const freeLook = 20 * time.Millisecond

// AwaitHandover implements backend.Handover with blocking queries: on the
// waiter's own place when another waiter is ahead of it (awaitInLine),
// otherwise on the lease key. The lease it returns has the TTL its waiter
// asked for: Consul cannot say how much of it is left, and the caller
// counts it from before the handover.
//
// A free key is not handed to anyone: when a waiter first in line (or not
// in line) finds the key free at the first look (after a short wait for a
// release in flight) or sees it fall free while it waits (a release that
// found owner not yet in line, or an expiry), AwaitHandover returns ok
// false at once, so that the caller asks again instead of waiting for max.
func (s *Store) AwaitHandover(ctx context.Context, key, owner string, max time.Duration) (backend.Lease, bool, error) {
	if err := s.begin(ctx, "await handover", key); err != nil {
		return backend.Lease{}, false, err
	}
	if err := errors.Join(backend.ValidateOwner(owner), backend.ValidateMaxWait(max)); err != nil {
		return backend.Lease{}, false, fmt.Errorf("consulbackend: await handover: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, max)
	defer cancel()
	if j := s.takeJoin(key, owner); j.behind {
		// Behind another waiter when it joined, as this store wrote:
		// wait on the place from there, without reading the line.
		return s.awaitPlace(ctx, wctx, key, owner, j.index, max)
	}
	if l, ok, done, err := s.awaitInLine(ctx, wctx, key, owner, max); done {
		return l, ok, err
	}
	var index uint64
	freeAtFirst := false
	for {
		wait := max
		if freeAtFirst {
			wait = min(max, freeLook)
		}
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: wait}).WithContext(wctx)
		p, meta, err := s.lookLease(key, q)
		if stop, err := s.awaitEnded(ctx, wctx, key, err); stop {
			return backend.Lease{}, false, err
		}
		cur, err := s.entry(key, p)
		if err != nil {
			return backend.Lease{}, false, err
		}
		switch {
		case cur != nil && cur.rec.Owner == owner && !cur.rec.Kept:
			s.remember(key, handedTo(cur))
			return cur.rec.lease(key), true, nil
		case cur == nil && index != 0:
			return backend.Lease{}, false, nil // free after a look: ask again
		case cur == nil:
			freeAtFirst = true
		}
		if meta.LastIndex < index {
			index = 0 // the agent lost its data: start over
			freeAtFirst = false
		} else {
			index = meta.LastIndex
		}
	}
}

// awaitInLine is AwaitHandover for a waiter behind another in line. It
// blocks on the waiter's own place, which only a handover to it, a
// Dequeue or a lapse removes, instead of on the lease key, which every
// handover and renewal changes: a handover then wakes the waiter it is
// for, not the whole line. Only the waiter first in line, for whom the key
// is kept should it fall free, watches the lease key. done false: owner
// is first in line or not in line, and the caller watches the lease key.
//
// A waiter behind another does not see the key fall free by an expiry
// while it waits: it asks again after max, as it does after any wait.
func (s *Store) awaitInLine(ctx, wctx context.Context, key, owner string, max time.Duration) (l backend.Lease, ok, done bool, err error) {
	st, err := s.look(ctx, "await handover", key, true)
	if err != nil {
		return backend.Lease{}, false, true, err
	}
	if cur := st.lease; cur != nil && cur.rec.Owner == owner && !cur.rec.Kept {
		s.remember(key, handedTo(cur))
		return cur.rec.lease(key), true, true, nil
	}
	mine := st.placeOf(owner)
	if mine == nil || mine == st.first() {
		return backend.Lease{}, false, false, nil
	}
	l, ok, err = s.awaitPlace(ctx, wctx, key, owner, mine.index, max)
	return l, ok, true, err
}

// awaitPlace waits until owner's place in key's line, as it stood at
// index, is gone, and returns the lease if it went because the key was
// handed to owner; ok false when max passed or the place went otherwise.
func (s *Store) awaitPlace(ctx, wctx context.Context, key, owner string, index uint64, max time.Duration) (l backend.Lease, ok bool, err error) {
	name := s.placeKey(key, owner)
	for {
		q := (&api.QueryOptions{WaitIndex: index, WaitTime: max}).WithContext(wctx)
		pairs, meta, err := s.kv.List(name, q)
		if stop, err := s.awaitEnded(ctx, wctx, key, err); stop {
			return backend.Lease{}, false, err
		}
		i := slices.IndexFunc(pairs, func(p *api.KVPair) bool { return p.Key == name && p.Session != "" })
		if i >= 0 {
			var rec placeRecord
			err := json.Unmarshal(pairs[i].Value, &rec)
			if err == nil {
				err = s.checkPlace(rec)
			}
			if err != nil {
				return backend.Lease{}, false, fmt.Errorf("consulbackend: await handover %q: line at %s: %w: %.60q is not a baton waiter's place: %s",
					key, backend.Printable(name), backend.ErrCorrupt, pairs[i].Value, backend.Printable(err.Error()))
			}
			if rec.Handed != nil {
				// Handed the key: the place says so, with the lease.
				if now := s.now().UnixMicro(); backend.TokenAhead(rec.Handed.Token, now) {
					return backend.Lease{}, false, fmt.Errorf("consulbackend: await handover %q: %w: place %s was handed token %d, more than %v ahead of the clock (%d µs): no grant made it; delete the place",
						key, backend.ErrCorrupt, name, rec.Handed.Token, backend.MaxTokenLead, now)
				}
				l, k := handedPlace(key, owner, pairs[i], rec)
				s.remember(key, k)
				return l, true, nil
			}
		}
		if i < 0 {
			// Handed the key, or out of the line otherwise.
			p, _, err := s.lookLease(key, s.queryOpts(ctx))
			if err != nil {
				return backend.Lease{}, false, s.transport("await handover", key, ctx, err)
			}
			cur, err := s.entry(key, p)
			if err != nil || cur == nil || cur.rec.Owner != owner || cur.rec.Kept {
				return backend.Lease{}, false, err
			}
			s.remember(key, handedTo(cur))
			return cur.rec.lease(key), true, nil
		}
		if meta.LastIndex < index {
			index = 0 // the agent lost its data: start over
		} else {
			index = meta.LastIndex
		}
	}
}

// awaitEnded tells whether a blocking read of AwaitHandover, which ended
// with err, ends the wait: the caller's context ended (an error), max
// passed (no error: not handed over), or the read failed.
func (s *Store) awaitEnded(ctx, wctx context.Context, key string, err error) (bool, error) {
	switch {
	case ctx.Err() != nil:
		return true, fmt.Errorf("consulbackend: await handover %q: %w", key, backend.ContextError(ctx))
	case wctx.Err() != nil:
		return true, nil // max passed
	case err != nil:
		return true, s.transport("await handover", key, ctx, err)
	}
	return false, nil
}
