package consulbackend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

// Releasing without reading first.
//
// A release reads the key and its line, then writes. The read can be left
// out when the store knows what the line holds, from how the lease came
// to it:
//
//   - A grant that took the key with nobody else in line remembers what it
//     wrote: the lease's session and index, and the fencing counter's
//     index. A waiter that joins the line while the key is held writes the
//     counter again (joinLine), and a renewal rewrites the lease (Renew
//     forgets what the store knew), so while both are as remembered the
//     lease is as granted and nobody is in line: the release deletes the
//     key and marks the release on the counter in one transaction that
//     holds only if that is still so. An uncontended lock cycle is thus
//     one read and two writes.
//
//   - A handover writes into the place it marks handed the waiters that
//     were next in line behind its waiter, as it read them (handedLease's
//     Next, at most handOnMax of them), and the counter's release mark.
//     The waiter learns them with its lease (AwaitHandover), and its
//     release hands the key on to the first of them in one transaction
//     that also checks that this waiter's place is as read, passing the
//     others on in the place it marks. Waiters that joined since stand
//     behind them. A holder named fewer than two reads the line while it
//     holds the key (see "Reading the line while the key is held" below),
//     so a contended key passes from holder to holder without a read on
//     the way. (The list cannot tell that the line ends after it: a join
//     between the handover's read and its write, which does not check the
//     counter, would go unseen.)
//
// If the transaction fails, the release reads and goes the usual way.
// Every such transaction also checks the lease's session, which Consul
// would not know after losing its data, so that an index that happens to
// be reused after such a loss cannot pass for the lease.

// handOnMax is how many waiters a handover writes into the lease it
// grants.
const handOnMax = 4

// nextPlace is a waiter in line as a handover read it (see place).
type nextPlace struct {
	Owner       string `json:"owner"`
	Index       uint64 `json:"index"` // the place's ModifyIndex
	TTLMillis   int64  `json:"ttl_ms"`
	Floor       uint64 `json:"floor,omitempty"`
	PlaceMillis int64  `json:"place_ms"`
	Place       string `json:"place"`             // the place's session
	Session     string `json:"session,omitempty"` // the one made for its lease
}

// nextPlaces are the waiters behind w in line, as st read them, but out,
// at most handOnMax.
func nextPlaces(st *state, w, out *place) []nextPlace {
	var next []nextPlace
	for i := range st.line {
		p := &st.line[i]
		if p.order <= w.order || (out != nil && p.owner == out.owner) {
			continue
		}
		if len(next) == handOnMax {
			break
		}
		next = append(next, nextPlace{Owner: p.owner, Index: p.index, TTLMillis: p.rec.TTLMillis, Floor: p.rec.Floor,
			PlaceMillis: p.rec.PlaceMillis, Place: p.session, Session: p.rec.Session})
	}
	return next
}

// checkNext checks the waiters a lease or a handed place names as next
// in line (at most handOnMax), as read: each must be a waiter's place as
// checkPlace would pass it, so that a release that hands the key on to
// the first of them without reading cannot fail half-way or hand it to
// a name baton never wrote.
func (s *Store) checkNext(next []nextPlace) error {
	if len(next) > handOnMax {
		return fmt.Errorf("it names %d waiters next in line, more than %d", len(next), handOnMax)
	}
	for _, n := range next {
		err := errors.Join(backend.CheckStoredName("waiter next in line", "the lease's record", n.Owner),
			s.checkLeaseTTL(n.TTLMillis), backend.ValidateFloor(n.Floor))
		if err == nil && (n.PlaceMillis <= 0 || millis(n.PlaceMillis) > MaxSessionTTL || n.Index == 0) {
			err = fmt.Errorf("waiter %q next in line has place TTL %d ms and index %d", n.Owner, n.PlaceMillis, n.Index)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// lineHint is what this store's last release of a key left: handed over,
// the lease it granted and the waiters next in line behind it (see
// joinKnown); freed with nobody in line, the fencing counter as written
// (see grantKnown).
type lineHint struct {
	holder backend.Lease
	next   []nextPlace
	fence  *api.KVPair
	at     time.Time // when the release was made, by this process's clock
}

// lineHintLife is how long after a release its lineHint is used: what it
// saw is likely gone by a much later call.
const lineHintLife = time.Second

// lineHintMax bounds how many keys a store keeps a lineHint for.
const lineHintMax = 64

// hintLine keeps what a release of key left, h, if it knows a waiter or
// the counter.
func (s *Store) hintLine(key string, h lineHint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, had := s.lines[key]
	if (len(h.next) == 0 && h.fence == nil) || s.done || (len(s.lines) >= lineHintMax && !had) {
		return
	}
	h.at = time.Now()
	s.lines[key] = h
}

// freedCounter is the counter key as a release that freed it wrote it,
// with value and flags as sent, from the transaction's results; nil if
// they do not name it.
func (s *Store) freedCounter(key string, value []byte, flags uint64, resp *api.TxnResponse) *api.KVPair {
	if resp == nil {
		return nil
	}
	for _, r := range resp.Results {
		if r.KV != nil && r.KV.Key == s.FenceKey(key) && r.KV.ModifyIndex != 0 {
			p := *r.KV
			p.Value, p.Flags = value, flags
			return &p
		}
	}
	return nil
}

// takeLineHint returns and forgets the lineHint of key, if it is recent.
func (s *Store) takeLineHint(key string) (lineHint, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.lines[key]
	delete(s.lines, key)
	return h, ok && time.Since(h.at) < lineHintLife
}

// known is what the store knows of a lease it holds.
type known struct {
	owner, session string
	token          uint64
	ttl            time.Duration
	leaseIndex     uint64
	fenceIndex     uint64      // the counter's, which holds token
	next           []nextPlace // the waiters behind the holder, first in line first
	released       uint64      // the counter's release mark
	place          string      // the session of the holder's handed place, if known
	placeTTL       time.Duration
	handed         bool   // handed over: the holder's place, marked handed, may be there
	ahead          *ahead // the read of the line ahead of the release, if any
}

// written picks out of a grant's transaction results what it wrote to
// key's lease and counter.
func (s *Store) written(key string, rec record, session string, results []*api.TxnResult) *known {
	k := &known{owner: rec.Owner, session: session, token: rec.Token, ttl: millis(rec.TTLMillis)}
	for _, r := range results {
		switch {
		case r.KV == nil:
		case r.KV.Key == s.LeaseKey(key) && r.KV.Session == session:
			k.leaseIndex = r.KV.ModifyIndex
		case r.KV.Key == s.FenceKey(key):
			k.fenceIndex = max(k.fenceIndex, r.KV.ModifyIndex) // the write, not the check before it
		}
	}
	if k.leaseIndex == 0 || k.fenceIndex == 0 {
		return nil
	}
	return k
}

// handedTo is what the lease cur, handed over to its holder, tells of the
// line.
func handedTo(cur *entry) *known {
	return &known{owner: cur.rec.Owner, session: cur.session, token: cur.rec.Token, ttl: millis(cur.rec.TTLMillis),
		leaseIndex: cur.index, next: cur.rec.Next, released: cur.rec.Released, handed: true}
}

// remember keeps k, what the store knows of its lease on key.
func (s *Store) remember(key string, k *known) {
	if k == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.known[key] = k
	}
}

// forget drops what the store knew of its lease on key, and returns it.
func (s *Store) forget(key string) *known {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.known[key]
	delete(s.known, key)
	return k
}

// releaseKnown releases owner's lease on key without reading it first, if
// the store knows the line and nothing changed since. done false: the
// caller releases the usual way.
func (s *Store) releaseKnown(ctx context.Context, key, owner string) (done bool, err error) {
	k := s.forget(key)
	if k != nil && k.owner == owner && k.ahead != nil {
		k = s.lookedAhead(ctx, k)
	}
	switch {
	case k == nil || k.owner != owner:
		return false, nil
	case len(k.next) > 0:
		return s.handOn(ctx, key, k)
	case k.fenceIndex == 0:
		return false, nil // handed over with nobody known behind
	}
	value := []byte(strconv.FormatUint(k.token, 10))
	ops := append(s.dropKnown(key, k),
		&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.FenceKey(key), Value: value, Flags: k.token, Index: k.fenceIndex}})
	if k.handed {
		ops = append(ops, s.dropOwnPlace(key, k)...)
	}
	ok, resp, _, err := s.txn.Txn(ops, s.queryOpts(ctx))
	if err != nil {
		return true, s.transport("release", key, ctx, err)
	}
	if !ok {
		return false, nil
	}
	s.putIdle(k.ttl, k.session)
	s.putIdle(k.placeTTL, k.place)
	s.hintLine(key, lineHint{fence: s.freedCounter(key, value, k.token, resp)})
	return true, nil
}

// dropKnown are the operations that delete the lease k on key, if it is
// as the store knows it: its session, and its index (a check-and-delete).
func (s *Store) dropKnown(key string, k *known) api.TxnOps {
	return api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: s.LeaseKey(key), Session: k.session}},
		{KV: &api.KVTxnOp{Verb: api.KVDeleteCAS, Key: s.LeaseKey(key), Index: k.leaseIndex}},
	}
}

// handedPlace is what owner's place p, marked handed, tells: the lease
// (granted in the same transaction as the mark, so at p's index) and who
// waits behind it.
func handedPlace(key, owner string, p *api.KVPair, rec placeRecord) (backend.Lease, *known) {
	h := rec.Handed
	k := &known{owner: owner, session: h.Session, token: h.Token, ttl: millis(rec.TTLMillis), leaseIndex: p.ModifyIndex,
		next: h.Next, released: h.Released, place: p.Session, placeTTL: millis(rec.PlaceMillis), handed: true}
	if len(k.next) == 0 {
		k.next = nil
	}
	return backend.Lease{Key: key, Owner: owner, Token: h.Token, TTL: k.ttl}, k
}

// dropOwnPlace are the operations that delete the handed place of the
// holder k, whose lease is released: a no-op if it has none.
func (s *Store) dropOwnPlace(key string, k *known) api.TxnOps {
	return api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.placeKey(key, k.owner)}}}
}

// handOn hands key, held as k says, to the first of k.next, if the lease
// and that waiter's place are as known, passing the rest on in the lease.
func (s *Store) handOn(ctx context.Context, key string, k *known) (done bool, err error) {
	n := k.next[0]
	ttl := millis(n.TTLMillis)
	token, err := s.nextToken(key, k.token, n.Floor)
	if err != nil {
		return false, nil // the usual way reports it
	}
	keeper, err := s.counterKeeper(ctx, "release", key, token, ttl)
	if err != nil {
		return true, err
	}
	// The waiters behind n go into n's handed place, not the lease (see take).
	rec := record{Owner: n.Owner, Token: token, TTLMillis: n.TTLMillis, Released: k.released}
	ops := s.dropKnown(key, k)
	ops = append(ops, s.setCounter(key, &api.KVPair{Flags: k.released}, token, keeper, false)...)
	ops = append(ops, s.dropOwnPlace(key, k)...)
	nrec := placeRecord{TTLMillis: n.TTLMillis, Floor: n.Floor, PlaceMillis: n.PlaceMillis, Session: n.Session}
	carry := record{Next: k.next[1:], Released: k.released}
	sess := n.Session
	for {
		own := sess == ""
		if own {
			if sess, err = s.sessionFor(ctx, "release", key, ttl); err != nil {
				return true, err
			}
		}
		all := append(ops[:len(ops):len(ops)], s.handPlace(key, n.Owner, n.Index, nrec, token, sess, carry)...)
		all = append(all, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: s.LeaseKey(key), Value: encodeJSON(rec), Session: sess}})
		ok, resp, _, err := s.txn.Txn(all, s.queryOpts(ctx))
		if err != nil {
			if own {
				s.destroyLater(sess)
			}
			return true, s.transport("release", key, ctx, err)
		}
		if ok {
			s.putIdle(k.ttl, k.session)
			s.putIdle(k.placeTTL, k.place)
			s.hintLine(key, lineHint{holder: rec.lease(key), next: carry.Next})
			return true, nil
		}
		if own {
			s.putIdle(ttl, sess)
		}
		ended := false
		for _, e := range resp.Errors {
			s.keeperEnded(keeper, e.What)
			ended = ended || (!own && strings.Contains(e.What, sess))
		}
		if !ended {
			return false, nil
		}
		sess = "" // the waiter's session for its lease ended: use the store's
	}
}

// Reading the line while the key is held.
//
// A holder handed the key with no waiter named behind it would read the
// line when it releases, between its section and the next holder's grant,
// which is the path a contended key's throughput depends on. It starts
// that read instead as soon as it learns of the handover (lookAhead),
// while its section runs, and its release waits for that read, if it is
// still under way, instead of making its own: it hands the key on to the
// first waiter found (handOn), or, with nobody in line, frees it in a
// transaction that holds only if the counter is as read (a waiter that
// joins an empty line writes the counter, and a waiter that joins behind
// another stands behind one that did). A holder named one waiter reads
// ahead too, so that the list it hands on names some and the releasing
// store joins without a read (joinKnown). A waiter that read the key as
// it started to wait (first in line) uses that read (rememberRead). What
// a read found is used only if the lease was then the one handed over.

// lookAheadTimeout bounds lookAhead's read.
const lookAheadTimeout = 10 * time.Second

// ahead is lookAhead's read of a key's line.
type ahead struct {
	done chan struct{} // closed when st is set
	st   *state        // nil if the read failed
}

// rememberHanded keeps k, what the store knows of its lease on key,
// handed over to it, and reads the line ahead of the release if k names
// fewer than two waiters behind: the release then hands the key on with
// a list that names some, so that the releasing store joins the line
// without a read either (joinKnown).
func (s *Store) rememberHanded(key string, k *known) {
	if len(k.next) < 2 {
		k.ahead = s.lookAhead(key)
	}
	s.remember(key, k)
}

// lookAhead starts a read of key and its line; nil if the store is closed.
func (s *Store) lookAhead(key string) *ahead {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil
	}
	a := &ahead{done: make(chan struct{})}
	s.lookups.Add(1)
	go func() {
		defer s.lookups.Done()
		defer close(a.done)
		ctx, cancel := context.WithTimeout(s.base, lookAheadTimeout)
		defer cancel()
		if st, err := s.look(ctx, "release", key, true); err == nil {
			a.st = st
		}
	}()
	return a
}

// lookedAhead returns k, what the store knows of its lease on key, with
// what k's lookAhead read of the line (knownFrom), once that read is over;
// k as it is if the read failed, found the lease changed, or ctx ended
// first.
func (s *Store) lookedAhead(ctx context.Context, k *known) *known {
	select {
	case <-k.ahead.done:
	case <-ctx.Done():
		return k
	}
	if k.ahead.st == nil {
		return k
	}
	if n := knownFrom(k, k.ahead.st); n != nil {
		return n
	}
	return k
}

// knownFrom returns k, what the store knows of a lease handed to it, with
// the waiters that st, read since the handover, found in line (or, with
// nobody in line, the counter as read); nil if st found the lease
// changed.
func knownFrom(k *known, st *state) *known {
	if cur := st.lease; cur == nil || cur.rec.Owner != k.owner || cur.session != k.session || cur.index != k.leaseIndex || cur.rec.Token != k.token {
		return nil
	}
	n := *k
	n.ahead = nil
	n.next = nextPlaces(st, &place{owner: k.owner}, nil)
	if h := st.handedOf(k.owner); h != nil && n.place == "" {
		n.place, n.placeTTL = h.session, millis(h.rec.PlaceMillis)
	}
	if f := st.fenceKV; len(n.next) == 0 && f != nil && string(f.Value) == strconv.FormatUint(k.token, 10) {
		n.fenceIndex = f.ModifyIndex
	}
	return &n
}

// rememberRead keeps what the store knows of its lease cur on key, handed
// over to it, as st, the read that found it, tells.
func (s *Store) rememberRead(key string, cur *entry, st *state) {
	k := handedTo(cur)
	if n := knownFrom(k, st); n != nil {
		s.remember(key, n)
		return
	}
	s.rememberHanded(key, k)
}
