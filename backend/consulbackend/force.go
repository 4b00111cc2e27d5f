package consulbackend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

var _ backend.Breaker = (*Store)(nil)

// Break implements backend.Breaker. It reads the key, its counter and its
// line in one transaction, and if the lease read is the grant named, then
// in another that holds only if the lease and the counter are as read
// (else it reads again), either hands the key to the first live waiter
// (whose token, from the counter and the clock, is above the broken one)
// or deletes the lease and moves the counter past the broken token and
// this client's clock, recording the broken token in the counter's flags
// as Release does, so that watchers see a release. The broken lease's
// session is destroyed afterwards. The lease's TTL is the one it was last
// given (a session's remaining time cannot be read).
func (s *Store) Break(ctx context.Context, key, owner string, token uint64) (backend.Lease, error) {
	if err := s.begin(ctx, "break", key); err != nil {
		return backend.Lease{}, err
	}
	if err := backend.ValidateOwner(owner); err != nil {
		return backend.Lease{}, fmt.Errorf("consulbackend: break: %w", err)
	}
	for attempt := range grantAttempts {
		l, retry, err := s.breakOnce(ctx, key, owner, token)
		if !retry {
			return l, err
		}
		if !backoff(ctx, attempt) {
			return backend.Lease{}, fmt.Errorf("consulbackend: break %q: %w", key, backend.ContextError(ctx))
		}
	}
	return backend.Lease{}, fmt.Errorf("consulbackend: break %q: the key changed under %d attempts in a row; try again", key, grantAttempts)
}

// breakOnce makes one attempt of Break; retry reports that the key, its
// counter or its line changed between the read and the write.
func (s *Store) breakOnce(ctx context.Context, key, owner string, token uint64) (l backend.Lease, retry bool, err error) {
	s.forget(key)
	st, err := s.look(ctx, "break", key, true)
	if err != nil {
		return backend.Lease{}, false, err
	}
	cur := st.lease
	if cur == nil {
		return backend.Lease{}, false, fmt.Errorf("consulbackend: break %q: %w", key, backend.ErrNotFound)
	}
	broken := cur.rec.lease(key)
	if broken.Owner != owner || broken.Token != token {
		return backend.Lease{}, false, fmt.Errorf("consulbackend: break: %w", &backend.ChangedError{Key: key, Owner: owner, Token: token, Holder: broken})
	}
	if s.afterLook != nil {
		s.afterLook()
	}
	if w := st.first(); w != nil {
		if retry, done, err := s.breakToWaiter(ctx, key, st, w); retry || err != nil {
			return backend.Lease{}, retry, err
		} else if done {
			return broken, false, nil
		}
		// The waiter cannot be granted the key now: free it, and the
		// waiter asks again.
	}
	ops, err := s.breakOps(ctx, key, st)
	if err != nil {
		return backend.Lease{}, false, err
	}
	ok, resp, _, err := s.txn.Txn(ops, s.queryOpts(ctx))
	if retry, err := s.txnRetry("break", key, ctx, ok, resp, err); err != nil || retry {
		return backend.Lease{}, retry, err
	}
	s.destroyLater(cur.session)
	return broken, false, nil
}

// breakToWaiter hands the key that st read, held by the grant Break ends,
// to the first waiter in line, w. retry: nothing was handed over; done:
// Break is over, with err (the broken lease, unless err). Neither: the
// waiter cannot be granted the key now, and Break frees it instead.
func (s *Store) breakToWaiter(ctx context.Context, key string, st *state, w *place) (retry, done bool, err error) {
	retry, err = s.handOver(ctx, "break", key, st, w, nil, nil)
	switch {
	case retry:
		return true, false, nil // nothing was handed over
	case err == nil:
		// Not kept idle: its holder may still renew it.
		s.destroyLater(st.lease.session)
		return false, true, nil
	case !errors.Is(err, backend.ErrHeld) && !errors.Is(err, backend.ErrCorrupt):
		return false, true, err
	}
	return false, false, nil
}

// breakOps are the operations that end the lease st read and move the
// key's counter past its token and this client's clock, recording the
// broken token in the counter's flags as a release does, if the lease
// and the counter are as st read them.
func (s *Store) breakOps(ctx context.Context, key string, st *state) (api.TxnOps, error) {
	cur := st.lease
	counter, err := parseCounter(key, st.fenceKV)
	if err != nil {
		return nil, err
	}
	bumped, err := s.nextToken(key, max(counter, cur.rec.Token), 0)
	if err != nil {
		return nil, err
	}
	ops := api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.LeaseKey(key), Index: cur.index}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.LeaseKey(key)}},
	}
	value := []byte(strconv.FormatUint(bumped, 10))
	if fence := st.fenceKV; fence != nil {
		// The counter keeps the keeper session that locks it.
		return append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.FenceKey(key), Value: value, Flags: cur.rec.Token, Index: fence.ModifyIndex}}), nil
	}
	// The counter ended while its key was held: write it again,
	// kept as a grant keeps it.
	keeper, err := s.counterKeeper(ctx, "break", key, bumped, time.Duration(cur.rec.TTLMillis)*time.Millisecond)
	if err != nil {
		return nil, err
	}
	set := s.setCounter(key, nil, bumped, keeper, true)
	set[len(set)-1].KV.Flags = cur.rec.Token
	return append(ops, set...), nil
}
