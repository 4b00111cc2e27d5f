package consulbackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

// The handover.
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
	l, _, retry, err := s.take(ctx, op, key, st, w.owner, ttl, w.rec.Floor, extra, w.rec.Session, carry, w)
	if err == nil && !retry {
		s.hintLine(key, lineHint{holder: l, next: carry.Next})
	}
	return retry, err
}

// handPlace are the operations that mark the place of the waiter owner
// (as read at index) handed: the key goes to it with token on session
// sess, and carry's Next and Released. One check-and-set: it holds only if
// the place is as read, and a write keeps the session that locks the
// place (every operation of a transaction costs the handover's time).
func (s *Store) handPlace(key, owner string, index uint64, rec placeRecord, token uint64, sess string, carry record) api.TxnOps {
	rec.Handed = &handedLease{Token: token, Session: sess, Next: carry.Next, Released: carry.Released}
	return api.TxnOps{{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.placeKey(key, owner), Value: encodeJSON(rec), Index: index}}}
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
		case cur.heldBy(owner):
			s.rememberHanded(key, handedTo(cur))
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
	if cur := st.lease; cur.heldBy(owner) {
		s.rememberRead(key, cur, st)
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
				if err := backend.CheckStoredToken("the place handed over at "+name, rec.Handed.Token, s.now().UnixMicro()); err != nil {
					return backend.Lease{}, false, fmt.Errorf("consulbackend: await handover %q: %w", key, err)
				}
				l, k := handedPlace(key, owner, pairs[i], rec)
				s.rememberHanded(key, k)
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
			if err != nil || !cur.heldBy(owner) {
				return backend.Lease{}, false, err
			}
			s.rememberHanded(key, handedTo(cur))
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
