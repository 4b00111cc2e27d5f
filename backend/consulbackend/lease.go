package consulbackend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

// A lease's life: its record, reading it, Renew, Release (with and
// without a keep time) and Get.

// record is the JSON value of a lease key.
type record struct {
	Owner string `json:"owner"`
	Token uint64 `json:"token"`
	// TTLMillis is the TTL the lease was last given (or the keep time).
	TTLMillis int64 `json:"ttl_ms"`
	// Kept marks a lease released with a keep time: it can no longer be
	// renewed.
	Kept bool `json:"kept,omitempty"`
	// Next and Released tell the holder of a lease handed over to it who
	// waits behind it, and the counter's release mark (see known.go). A
	// handover now names the waiters in the handed place instead (take):
	// Next is read from leases that earlier versions wrote.
	Next     []nextPlace `json:"next,omitempty"`
	Released uint64      `json:"released,omitempty"`
	// Mark changes with every renewal (and with a waiter that joins the
	// line while the key has no counter, see joinLine): Consul skips a
	// write that changes nothing, and these writes must change the key's
	// index, so that watchers see the renewal and a release that read the
	// line before the join retries.
	Mark uint64 `json:"mark,omitempty"`
}

// marked returns r with the next Mark.
func (r record) marked() record {
	r.Mark++
	return r
}

func (r record) lease(key string) backend.Lease {
	return backend.Lease{Key: key, Owner: r.Owner, Token: r.Token, TTL: time.Duration(r.TTLMillis) * time.Millisecond}
}

// entry is a lease key as read: its record and the KV indexes.
type entry struct {
	rec     record
	session string
	index   uint64 // ModifyIndex
}

// heldBy reports whether e is owner's lease and can still be renewed (not
// released with a keep time); false for nil.
func (e *entry) heldBy(owner string) bool {
	return e != nil && e.rec.Owner == owner && !e.rec.Kept
}

func (s *Store) decodeRecord(key string, p *api.KVPair) (record, error) {
	var r record
	if err := json.Unmarshal(p.Value, &r); err != nil {
		return record{}, fmt.Errorf("consulbackend: lease of %q at %s: %w: not a baton lease: %s", key, backend.Printable(p.Key), backend.ErrCorrupt, backend.Printable(err.Error()))
	}
	if err := backend.ValidateOwner(r.Owner); err != nil || r.Token == 0 || r.Token > backend.MaxToken ||
		r.TTLMillis <= 0 || r.TTLMillis > backend.MaxTTL.Milliseconds() {
		return record{}, fmt.Errorf("consulbackend: lease of %q at %s: %w: owner %q, token %d, ttl %d ms is not a baton lease",
			key, backend.Printable(p.Key), backend.ErrCorrupt, r.Owner, r.Token, r.TTLMillis)
	}
	if err := s.checkNext(r.Next); err != nil {
		return record{}, fmt.Errorf("consulbackend: lease of %q at %s: %w: %s", key, backend.Printable(p.Key), backend.ErrCorrupt, backend.Printable(err.Error()))
	}
	return r, nil
}

// encodeJSON encodes one of the store's records (a lease, a place in
// line).
func encodeJSON(r any) []byte {
	b, _ := json.Marshal(r) // structs of strings, numbers and bools cannot fail
	return b
}

// parseCounter reads a fencing counter's value.
func parseCounter(key string, p *api.KVPair) (uint64, error) {
	if p == nil {
		return 0, nil
	}
	n, err := strconv.ParseUint(string(p.Value), 10, 64)
	if err != nil || n > backend.MaxToken {
		return 0, fmt.Errorf("consulbackend: fencing counter of %q at %s: %w: %.40q is not a token", key, backend.Printable(p.Key), backend.ErrCorrupt, p.Value)
	}
	return n, nil
}

// read returns the lease on key, or nil if it is free.
func (s *Store) read(ctx context.Context, op, key string) (*entry, error) {
	p, _, err := s.kv.Get(s.LeaseKey(key), s.queryOpts(ctx))
	if err != nil {
		return nil, s.transport(op, key, ctx, err)
	}
	return s.entry(key, p)
}

// entry decodes the lease key p of key, or returns nil if it holds no
// lease (absent, or its session ended).
func (s *Store) entry(key string, p *api.KVPair) (*entry, error) {
	if p == nil || p.Session == "" {
		return nil, nil
	}
	rec, err := s.decodeRecord(key, p)
	if err != nil {
		return nil, err
	}
	if err := backend.CheckStoredToken("the lease at "+p.Key, rec.Token, s.now().UnixMicro()); err != nil {
		return nil, fmt.Errorf("consulbackend: lease of %q: %w", key, err)
	}
	return &entry{rec: rec, session: p.Session, index: p.ModifyIndex}, nil
}

// Renew implements backend.Store. It renews the lease's session, which
// Consul then keeps for at least ttl, and rewrites the lease key with its next mark,
// so that watchers see the renewal (EventRenewed). A lease cannot change
// its TTL on Consul: a ttl other than the one granted moves the lease to
// a new session with that TTL.
func (s *Store) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	if err := s.begin(ctx, "renew", key); err != nil {
		return backend.Lease{}, err
	}
	if err := errors.Join(backend.ValidateOwner(owner), s.validateSessionTTL("ttl", ttl)); err != nil {
		return backend.Lease{}, fmt.Errorf("consulbackend: renew: %w", err)
	}
	ttl = backend.RoundUpMillis(ttl)
	s.forget(key) // the lease changes: its release reads it first
	cur, err := s.read(ctx, "renew", key)
	if err != nil {
		return backend.Lease{}, err
	}
	if !cur.heldBy(owner) {
		return backend.Lease{}, notHeld(key, owner, cur)
	}
	if cur.rec.TTLMillis != ttl.Milliseconds() {
		moved, err := s.move(ctx, "renew", key, cur, record{Owner: owner, Token: cur.rec.Token, TTLMillis: ttl.Milliseconds()}, ttl)
		if err != nil {
			return backend.Lease{}, err
		}
		return moved.rec.lease(key), nil
	}
	entries, _, err := s.session.Renew(cur.session, s.writeOpts(ctx))
	if err != nil {
		return backend.Lease{}, s.transport("renew", key, ctx, fmt.Errorf("renew session: %w", err))
	}
	if entries == nil {
		// The session ended between the read and the renewal: the
		// lease is gone (or going) with it.
		return backend.Lease{}, notHeld(key, owner, nil)
	}
	if err := s.markRenewed(ctx, key, owner, cur); err != nil {
		return backend.Lease{}, err
	}
	return cur.rec.lease(key), nil
}

// markRenewed rewrites owner's lease cur, whose session Renew renewed,
// with its next mark (Consul skips a write that changes nothing), so that
// watchers learn of the renewal (EventRenewed) and count their wait from
// it: a session renewal alone changes nothing they can see.
func (s *Store) markRenewed(ctx context.Context, key, owner string, cur *entry) error {
	ok, resp, _, err := s.txn.Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.LeaseKey(key), Index: cur.index}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: s.LeaseKey(key), Value: encodeJSON(cur.rec.marked()), Session: cur.session}},
	}, s.queryOpts(ctx))
	if err != nil {
		return s.transport("renew", key, ctx, err)
	}
	if ok {
		return nil
	}
	if len(resp.Errors) == 0 {
		return s.txnFailed("renew", key, resp)
	}
	// The lease changed since it was read (released, moved, or a
	// racing renewal of the same owner rewrote it): judge by what
	// is there now.
	now, err := s.read(ctx, "renew", key)
	if err != nil {
		return err
	}
	if !now.heldBy(owner) || now.session != cur.session {
		return notHeld(key, owner, now)
	}
	return nil
}

// move puts the lease cur on a new session of ttl with the record rec, in
// one transaction that fails if the lease changed since it was read, and
// destroys the old session. It serves a Renew with another ttl and a
// Release with a keep time.
func (s *Store) move(ctx context.Context, op, key string, cur *entry, rec record, ttl time.Duration) (*entry, error) {
	sess, err := s.createSession(ctx, op, key, rec.Owner, ttl)
	if err != nil {
		return nil, err
	}
	ok, resp, _, err := s.txn.Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.LeaseKey(key), Index: cur.index}},
		{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: s.LeaseKey(key), Session: cur.session}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.LeaseKey(key)}},
		{KV: &api.KVTxnOp{Verb: api.KVLock, Key: s.LeaseKey(key), Value: encodeJSON(rec), Session: sess}},
	}, s.queryOpts(ctx))
	if err != nil || !ok {
		s.destroySession(ctx, sess)
		if err != nil {
			return nil, s.transport(op, key, ctx, err)
		}
		if len(resp.Errors) == 0 {
			return nil, s.txnFailed(op, key, resp)
		}
		// The lease changed or ended since it was read.
		now, err := s.read(ctx, op, key)
		if err != nil {
			return nil, err
		}
		return nil, notHeld(key, rec.Owner, now)
	}
	s.destroySession(ctx, cur.session)
	moved := &entry{rec: rec, session: sess}
	for _, r := range resp.Results {
		if r.KV != nil && r.KV.Key == s.LeaseKey(key) && r.KV.Session == sess {
			moved.index = r.KV.ModifyIndex
		}
	}
	return moved, nil
}

// endKeep ends the kept lease e on key keepFor from now, unless it changed
// by then: a Consul session may outlive its TTL by as much again, and a
// job lock kept with lockAtLeastFor must not skip the next run for that.
// Should this process stop first (Close), the session's TTL ends it.
func (s *Store) endKeep(key string, e *entry, keepFor time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done || e.index == 0 {
		return
	}
	s.keeps.Add(1)
	var timer *time.Timer
	timer = time.AfterFunc(keepFor, func() {
		defer s.keeps.Done()
		s.mu.Lock()
		delete(s.timers, timer)
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(s.base, 10*time.Second)
		defer cancel()
		pair := &api.KVPair{Key: s.LeaseKey(key), ModifyIndex: e.index}
		if ok, _, err := s.kv.DeleteCAS(pair, s.writeOpts(ctx)); err == nil && ok {
			s.destroySession(ctx, e.session)
		}
	})
	s.timers[timer] = struct{}{}
}

// Release implements backend.Store.
func (s *Store) Release(ctx context.Context, key, owner string, keepFor time.Duration) error {
	if err := s.begin(ctx, "release", key); err != nil {
		return err
	}
	if err := backend.ValidateOwner(owner); err != nil {
		return fmt.Errorf("consulbackend: release: %w", err)
	}
	if keepFor > 0 {
		if err := s.validateSessionTTL("keepFor", keepFor); err != nil {
			return fmt.Errorf("consulbackend: release: %w", err)
		}
		keepFor = backend.RoundUpMillis(keepFor)
	}
	if keepFor <= 0 {
		if done, err := s.releaseKnown(ctx, key, owner); done {
			return err
		}
		return s.release(ctx, key, owner, 1)
	}
	s.forget(key)
	cur, err := s.read(ctx, "release", key)
	if err != nil {
		return err
	}
	if cur == nil || cur.rec.Owner != owner {
		return notHeld(key, owner, cur)
	}
	if cur.rec.Kept {
		return nil // released with a keep time already: nothing changes
	}
	rec := record{Owner: owner, Token: cur.rec.Token, TTLMillis: keepFor.Milliseconds(), Kept: true}
	kept, err := s.move(ctx, "release", key, cur, rec, keepFor)
	if err != nil {
		return err
	}
	s.endKeep(key, kept, keepFor)
	return nil
}

// release ends owner's lease on key at once. With a live waiter in the
// key's line it hands the key to the first one (handOver). Otherwise it
// deletes the key, then keeps its session idle (sessions.go); the fencing
// counter's flags record the released token, which tells a watcher that
// this deletion was a release, not an expiry.
func (s *Store) release(ctx context.Context, key, owner string, attempt int) error {
	st, err := s.look(ctx, "release", key, true)
	if err != nil {
		return err
	}
	cur := st.lease
	if cur == nil || cur.rec.Owner != owner {
		return notHeld(key, owner, cur)
	}
	if s.afterLook != nil {
		s.afterLook()
	}
	if w := st.first(); w != nil {
		retry, err := s.handOver(ctx, "release", key, st, w, nil, s.dropHanded(key, owner, st))
		switch {
		case retry:
			// The lease, its counter or the line changed since they
			// were read (a renewal, a waiter that moved its place):
			// nothing was handed over, and the lease still holds.
			return s.releaseAgain(ctx, key, owner, attempt)
		case err == nil:
			s.putIdle(millis(cur.rec.TTLMillis), cur.session)
			s.droppedHanded(owner, st)
			return nil
		case !errors.Is(err, backend.ErrHeld) && !errors.Is(err, backend.ErrCorrupt):
			return err
		}
		// The waiter cannot be granted the key (its floor is at the
		// largest token, or the store is recovering): free it, and the
		// waiter asks again.
	}
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.LeaseKey(key), Index: cur.index}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.LeaseKey(key)}},
	}
	if fence := st.fenceKV; fence != nil {
		ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.FenceKey(key), Value: fence.Value, Flags: cur.rec.Token, Index: fence.ModifyIndex}})
	}
	ops = append(ops, s.dropHanded(key, owner, st)...)
	ok, resp, _, err := s.txn.Txn(ops, s.queryOpts(ctx))
	if retry, err := s.txnRetry("release", key, ctx, ok, resp, err); err != nil {
		return err
	} else if retry {
		// The lease, the counter or the line changed since they were
		// read (a racing release, a waiter that joined): look again.
		return s.releaseAgain(ctx, key, owner, attempt)
	}
	s.putIdle(millis(cur.rec.TTLMillis), cur.session)
	s.droppedHanded(owner, st)
	if fence := st.fenceKV; fence != nil && len(st.line) == 0 {
		s.hintLine(key, lineHint{fence: s.freedCounter(key, fence.Value, cur.rec.Token, resp)})
	}
	return nil
}

// releaseAgain is release's next attempt after a race.
func (s *Store) releaseAgain(ctx context.Context, key, owner string, attempt int) error {
	if attempt >= grantAttempts {
		return fmt.Errorf("consulbackend: release %q: the key changed under %d attempts in a row; try again", key, grantAttempts)
	}
	if !backoff(ctx, attempt) {
		return fmt.Errorf("consulbackend: release %q: %w", key, backend.ContextError(ctx))
	}
	return s.release(ctx, key, owner, attempt+1)
}

// Get implements backend.Store. The lease's TTL is the one it was last
// given: Consul cannot tell how much of a session's TTL is left.
func (s *Store) Get(ctx context.Context, key string) (backend.Lease, error) {
	if err := s.begin(ctx, "get", key); err != nil {
		return backend.Lease{}, err
	}
	cur, err := s.read(ctx, "get", key)
	if err != nil {
		return backend.Lease{}, err
	}
	if cur == nil {
		return backend.Lease{}, fmt.Errorf("consulbackend: get %q: %w", key, backend.ErrNotFound)
	}
	return cur.rec.lease(key), nil
}

func notHeld(key, owner string, cur *entry) error {
	e := &backend.NotHeldError{Key: key, Owner: owner}
	if cur != nil {
		e.Holder = cur.rec.lease(key)
	}
	return e
}
