package consulbackend

import (
	"context"
	"errors"
	"fmt"
	"net/url"
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
// entry: the place lapsed. Handing the key to the waiter first in line
// is handover.go.

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
	if l, done, err := s.afterOwnRelease(ctx, key, owner, ttl, floor, patience, j); done {
		return l, err
	}
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

// afterOwnRelease is AcquireQueued's first attempt when this store
// released key a moment ago (lineHint): a grant of the key it freed with
// nobody in line (grantKnown), or a join behind the waiters it handed the
// key over to (joinKnown), without a read. done false: the caller reads.
func (s *Store) afterOwnRelease(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration, j *joining) (l backend.Lease, done bool, err error) {
	h, ok := s.takeLineHint(key)
	switch {
	case !ok:
		return backend.Lease{}, false, nil
	case h.fence != nil:
		return s.grantKnown(ctx, key, owner, ttl, floor, h.fence, j)
	}
	return s.joinKnown(ctx, key, owner, ttl, floor, patience, h, j)
}

// grantKnown grants key, which this store freed with nobody in line a
// moment ago, leaving its counter as fence, to owner without reading it
// first. The grant's transaction checks the counter, which every grant,
// break and first join of a line since would have written (take,
// joinKeyChecks), and locks the lease key, which fails if anyone holds
// it; so it holds only while the key is free with nobody in line, as a
// read would have found it. done false: it did not hold, and the caller
// reads.
func (s *Store) grantKnown(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, fence *api.KVPair, j *joining) (l backend.Lease, done bool, err error) {
	if err := s.prepareLease(ctx, key, j, ttl); err != nil {
		return backend.Lease{}, true, err
	}
	l, retry, err := s.grantQueued(ctx, key, owner, ttl, floor, &state{fenceKV: fence}, nil, j)
	if retry {
		return backend.Lease{}, false, nil
	}
	if err == nil {
		s.takeJoin(key, owner) // granted: no wait follows
	}
	return l, true, err
}

// queued makes one attempt of AcquireQueued on what st read. retry
// reports that something it read changed before its write.
func (s *Store) queued(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration, st *state, j *joining) (backend.Lease, bool, error) {
	mine := st.placeOf(owner)
	if cur := st.lease; cur.heldBy(owner) {
		// The key was handed to owner (or owner holds it already).
		return s.collect(ctx, key, cur, st)
	}
	if he := st.refusal(key, owner, patience); he != nil {
		if retry, err := s.joinLine(ctx, key, owner, ttl, floor, patience, st, mine, j); retry || err != nil {
			return backend.Lease{}, retry, err
		}
		return backend.Lease{}, false, he
	}
	return s.grantQueued(ctx, key, owner, ttl, floor, st, mine, j)
}

// refusal returns why owner, which asks with patience, is not granted
// the key as st read it: held by another owner (or released with a keep
// time), or free but kept for the waiter first in line; nil if it may be
// granted.
func (st *state) refusal(key, owner string, patience time.Duration) *backend.HeldError {
	if cur := st.lease; cur != nil {
		return &backend.HeldError{Holder: cur.rec.lease(key), Next: st.next(owner, patience)}
	}
	if first := st.first(); first != nil && first.owner != owner {
		// Free, but kept for the waiter first in line.
		return &backend.HeldError{Holder: backend.Lease{Key: key}, Next: first.owner}
	}
	return nil
}

// grantQueued grants the free key to owner, in line at mine (nil: not in
// line), taking it out of the line in the same transaction, with the
// session made for its lease when it joined or the one j holds.
func (s *Store) grantQueued(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, st *state, mine *place, j *joining) (backend.Lease, bool, error) {
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
		s.grantedQueued(key, st, mine, j, w, sess)
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

// grantedQueued settles the sessions after grantQueued granted the key on
// sess: j's is used, the place mine left the line, and with nobody else
// in line the store remembers the lease w it wrote.
func (s *Store) grantedQueued(key string, st *state, mine *place, j *joining, w *known, sess string) {
	if sess == j.lease {
		j.lease = "" // used
	}
	if mine != nil {
		s.leftLine(mine, sess)
	}
	if len(st.line) == 0 || (len(st.line) == 1 && mine != nil) {
		s.remember(key, w) // nobody else in line
	}
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

// collect returns owner's lease cur, as st read it, after renewing its
// session: a lease
// handed over a while ago then lasts its ttl from now, as the caller
// counts it, although Consul cannot say how much of it was left.
func (s *Store) collect(ctx context.Context, key string, cur *entry, st *state) (backend.Lease, bool, error) {
	entries, _, err := s.session.Renew(cur.session, s.writeOpts(ctx))
	if err != nil {
		return backend.Lease{}, false, s.transport("acquire queued", key, ctx, fmt.Errorf("renew session: %w", err))
	}
	if entries == nil {
		return backend.Lease{}, true, nil // it ended meanwhile: look again
	}
	s.rememberRead(key, cur, st)
	return cur.rec.lease(key), false, nil
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
		if retry, err := s.dequeueOnce(ctx, key, owner); !retry {
			return err
		}
	}
	return fmt.Errorf("consulbackend: dequeue %q: the key or its line changed under %d attempts in a row; try again", key, grantAttempts)
}

// dequeueOnce makes one attempt of Dequeue; retry reports that the key or
// its line changed between the read and the write.
func (s *Store) dequeueOnce(ctx context.Context, key, owner string) (retry bool, err error) {
	st, err := s.look(ctx, "dequeue", key, true)
	if err != nil {
		return false, err
	}
	if st.lease.heldBy(owner) {
		// The key was handed to owner, who gave up before it knew:
		// pass it on.
		err := s.release(ctx, key, owner, 1)
		return errors.Is(err, backend.ErrNotHeld), err
	}
	mine := st.placeOf(owner)
	if mine == nil {
		return false, nil
	}
	if s.afterLook != nil {
		s.afterLook()
	}
	if st.lease == nil && mine == st.first() && len(st.line) > 1 {
		// The key is free and was kept for owner: it goes to the next.
		if retry, done, err := s.passOver(ctx, key, st, mine); retry || done {
			return retry, err
		}
	}
	ok, resp, _, err := s.txn.Txn(s.leave(key, mine), s.queryOpts(ctx))
	if retry, err := s.txnRetry("dequeue", key, ctx, ok, resp, err); err != nil || retry {
		return retry, err
	}
	s.leftLine(mine, "")
	return false, nil
}

// passOver hands the free key, kept for the waiter mine that leaves the
// line, to the next in line. retry: nothing was handed over (something
// changed since st was read); done: Dequeue is over, with err. Neither:
// the next waiter cannot be granted the key now (the store is
// recovering), and it asks again as the first in line once mine has left
// it.
func (s *Store) passOver(ctx context.Context, key string, st *state, mine *place) (retry, done bool, err error) {
	retry, err = s.handOver(ctx, "dequeue", key, st, &st.line[1], mine, nil)
	switch {
	case retry:
		return true, false, nil // nothing was handed over: look again
	case err == nil:
		s.leftLine(mine, "")
		return false, true, nil
	case !errors.Is(err, backend.ErrHeld) && !errors.Is(err, backend.ErrCorrupt):
		return false, true, err
	}
	return false, false, nil
}
