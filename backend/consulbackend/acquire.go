package consulbackend

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

// Granting a key: Acquire, and take, the one transaction that grants a
// key (to Acquire, to AcquireQueued, to a waiter in a handover).

// grantAttempts bounds how often Acquire reads and tries again when
// another client changed the key's fencing counter between its read and
// its write.
const grantAttempts = 16

// Acquire implements backend.Store.
//
// It reads the key and its fencing counter, creates a session with the
// lease's TTL, and in one transaction moves the counter to the new token
// (only if nobody changed it since the read) and locks the key with the
// session. A refused grant destroys the session.
func (s *Store) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	if err := s.begin(ctx, "acquire", key); err != nil {
		return backend.Lease{}, err
	}
	if err := errors.Join(backend.ValidateOwner(owner), s.validateSessionTTL("ttl", ttl), backend.ValidateFloor(floor)); err != nil {
		return backend.Lease{}, fmt.Errorf("consulbackend: acquire: %w", err)
	}
	ttl = backend.RoundUpMillis(ttl)
	for attempt := range grantAttempts {
		l, retry, err := s.grant(ctx, key, owner, ttl, floor)
		if !retry {
			return l, err
		}
		// Another client changed the key or its counter between this
		// read and this write: a grant, or a release marking the
		// counter. Look again, after a short random pause once it has
		// happened a few times, so that racing clients spread out.
		if !backoff(ctx, attempt) {
			return backend.Lease{}, fmt.Errorf("consulbackend: acquire %q: %w", key, backend.ContextError(ctx))
		}
	}
	// Every attempt lost the counter to another client: the key is
	// very likely held now; say by whom.
	cur, err := s.read(ctx, "acquire", key)
	if err != nil {
		return backend.Lease{}, err
	}
	if cur == nil {
		return backend.Lease{}, fmt.Errorf("consulbackend: acquire %q: the key or its fencing counter changed under %d attempts in a row; try again", key, grantAttempts)
	}
	return backend.Lease{}, &backend.HeldError{Holder: cur.rec.lease(key)}
}

// grant makes one attempt of Acquire. retry reports that another
// client changed the counter or took the key between the read and the
// write, so the caller should read again.
func (s *Store) grant(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (l backend.Lease, retry bool, err error) {
	st, err := s.look(ctx, "acquire", key, false)
	if err != nil {
		return backend.Lease{}, false, err
	}
	if st.lease != nil {
		return backend.Lease{}, false, &backend.HeldError{Holder: st.lease.rec.lease(key)}
	}
	l, _, retry, err = s.take(ctx, "acquire", key, st, owner, ttl, floor, nil, "", record{}, nil)
	return l, retry, err
}

// take grants key to owner: it moves the counter st read to the next
// token and locks the key with a session of ttl, in one transaction with
// the extra operations that holds only if the key and its counter are as
// st read them. The session is sess, one the waiter owner made for its
// lease when it joined the line, or, if sess is empty or Consul ended it,
// one of the store's (sessionFor). A lease st found on the key (its
// holder's release handing the key over, or a lease key without a
// session) is replaced. retry reports that something changed since the
// read; a session of the store's is then kept idle.
//
// carry's Next and Released (see known.go) are written into the lease.
// It also returns what it wrote.
//
// With to, the place of the waiter owner, that place is marked handed
// (handPlace) instead of being left or deleted, and carry's Next go into
// that place only: the waiter, which waits on it, learns them there, and
// the handover's transaction is the smaller for it.
func (s *Store) take(ctx context.Context, op, key string, st *state, owner string, ttl time.Duration, floor uint64, extra api.TxnOps, sess string, carry record, to *place) (l backend.Lease, w *known, retry bool, err error) {
	token, keeper, ops, err := s.takeOps(ctx, op, key, st, owner, ttl, floor)
	if err != nil {
		return backend.Lease{}, nil, false, err
	}
	rec := record{Owner: owner, Token: token, TTLMillis: ttl.Milliseconds(), Next: carry.Next, Released: carry.Released}
	if to != nil {
		rec.Next = nil // the handed place names them: the waiter learns them there
	}
	ops = append(ops, extra...)
	for {
		own := sess == ""
		if own {
			if sess, err = s.sessionFor(ctx, op, key, ttl); err != nil {
				return backend.Lease{}, nil, false, err
			}
		}
		all := ops[:len(ops):len(ops)]
		if to != nil {
			all = append(all, s.handPlace(key, to.owner, to.index, to.rec, token, sess, carry)...)
		}
		all = append(all, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: s.LeaseKey(key), Value: encodeJSON(rec), Session: sess}})
		ok, resp, _, err := s.txn.Txn(all, s.queryOpts(ctx))
		if err == nil && ok {
			return rec.lease(key), s.written(key, rec, sess, resp.Results), false, nil
		}
		if err != nil {
			if own {
				s.destroyLater(sess) // the grant may have been made: end it
			}
			return backend.Lease{}, nil, false, s.transport(op, key, ctx, err)
		}
		if own {
			s.putIdle(ttl, sess)
		}
		ended, err := s.takeRefused(op, key, keeper, sess, own, resp)
		if err != nil || !ended {
			return backend.Lease{}, nil, err == nil, err
		}
		// The waiter's session ended while it waited (it waited longer
		// than its ttl allows without asking again): use the store's.
		sess = ""
	}
}

// takeOps are take's steps before the session: the restart guard's
// verdict on a key without a counter, the next token (nextToken), the
// keeper of the counter, and the operations that move the counter to the
// token and replace a lease key st found, holding only if the key and its
// counter are as st read them.
func (s *Store) takeOps(ctx context.Context, op, key string, st *state, owner string, ttl time.Duration, floor uint64) (token uint64, keeper string, ops api.TxnOps, err error) {
	var guardOps api.TxnOps
	if st.fenceKV == nil && s.guard >= 0 {
		// No counter: a new key, or a Consul that lost its data.
		if guardOps, err = s.guardFresh(ctx, key, owner, ttl, st.bootedKV, st.recoveringKV); err != nil {
			return 0, "", nil, err
		}
	}
	counter, err := parseCounter(key, st.fenceKV)
	if err != nil {
		return 0, "", nil, err
	}
	if token, err = s.nextToken(key, counter, floor); err != nil {
		return 0, "", nil, err
	}
	if keeper, err = s.counterKeeper(ctx, op, key, token, ttl); err != nil {
		return 0, "", nil, err
	}
	ops = s.setCounter(key, st.fenceKV, token, keeper, st.lease == nil)
	if st.fenceKV == nil && st.bootedKV != nil {
		// The guard let a key without a counter through because the
		// store had not lost its data: grant only if that still holds.
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.BootedKey(key), Index: st.bootedKV.ModifyIndex}})
	}
	if st.leaseKV != nil {
		// Replace the lease key only as it was read.
		ops = append(ops,
			&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.LeaseKey(key), Index: st.leaseKV.ModifyIndex}},
			&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.LeaseKey(key)}})
	} else {
		// Absent as read (or as the store's own release left it, see
		// grantKnown): whatever was written there since, even without a
		// session, is read and judged first, never overwritten.
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckNotExists, Key: s.LeaseKey(key)}})
	}
	return token, keeper, append(ops, guardOps...), nil
}

// takeRefused reads why Consul refused take's transaction: ended reports
// that the session sess, the waiter's own (not own), ended, so that take
// tries again with one of the store's; an error when Consul named no
// operation, or when the key is in its lock-delay; neither: something
// take checked changed since the read. A keeper session that ended is
// forgotten on the way.
func (s *Store) takeRefused(op, key, keeper, sess string, own bool, resp *api.TxnResponse) (ended bool, err error) {
	if len(resp.Errors) == 0 {
		return false, s.txnFailed(op, key, resp)
	}
	for _, e := range resp.Errors {
		// The keeper session ended (Consul lost its data, or an
		// operator destroyed it): make another.
		s.keeperEnded(keeper, e.What)
		if !own && strings.Contains(e.What, sess) {
			ended = true
		}
		if strings.Contains(e.What, "lock delay") {
			// The key's last session was invalidated while it held
			// the key: Consul refuses it to everyone for the
			// session's lock-delay.
			return false, &backend.HeldError{Holder: backend.Lease{Key: key, TTL: max(s.lockDelay, time.Second)}, Recovering: true}
		}
	}
	return ended, nil
}

// backoff pauses before attempt+1 of a write that lost a race: not at
// first, then for a random time that grows with attempt, so that racing
// clients spread out. It reports false if ctx ended first.
func backoff(ctx context.Context, attempt int) bool {
	if attempt < 2 {
		return true
	}
	return sleepCtx(ctx, time.Duration(mrand.Int64N(int64(min(time.Millisecond<<attempt, 50*time.Millisecond)))))
}

// nextToken is the fencing rule (backend.FenceToken) on this client's
// clock: max(counter, floor, the clock in µs) + 1, refused for a floor at
// or beyond the clock's backend.TokenLimit (ErrFloorAhead), a counter
// beyond it or at the largest token (ErrCorrupt).
func (s *Store) nextToken(key string, counter, floor uint64) (uint64, error) {
	t, err := backend.FenceToken(key, s.FenceKey(key), counter, floor, s.now().UnixMicro())
	if err != nil {
		return 0, fmt.Errorf("consulbackend: acquire: %w", err)
	}
	return t, nil
}
