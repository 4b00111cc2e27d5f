package consulbackend

import (
	"context"
	"strconv"
	"time"

	"github.com/hashicorp/consul/api"
)

// Releasing a lease granted with nobody in line.
//
// A grant that took the key with nobody else in line remembers what it
// wrote: the lease's session and index, and the fencing counter as it
// left it. A waiter that joins the line while the key is held writes the
// counter again (joinLine), and a renewal rewrites the lease (Renew
// forgets), so while both are as remembered the lease is as granted and
// nobody is in line. Release then deletes the key and marks the release
// on the counter in one transaction that holds only if that is still so,
// without reading first: an uncontended lock cycle is one read and two
// writes. If the transaction fails, the release reads and goes the usual
// way. The transaction also checks the lease's session, which Consul
// would not know after losing its data, so that an index that happens to
// be reused after such a loss cannot pass for the lease.

// alone is what a grant with nobody in line wrote.
type alone struct {
	owner, session string
	token          uint64
	ttl            time.Duration
	leaseIndex     uint64
	fenceIndex     uint64 // the counter's, which holds token
}

// written picks out of a grant's transaction results what it wrote to
// key's lease and counter.
func (s *Store) written(key string, rec record, session string, results []*api.TxnResult) *alone {
	a := &alone{owner: rec.Owner, session: session, token: rec.Token, ttl: millis(rec.TTLMillis)}
	for _, r := range results {
		switch {
		case r.KV == nil:
		case r.KV.Key == s.LeaseKey(key) && r.KV.Session == session:
			a.leaseIndex = r.KV.ModifyIndex
		case r.KV.Key == s.FenceKey(key):
			a.fenceIndex = max(a.fenceIndex, r.KV.ModifyIndex) // the write, not the check before it
		}
	}
	if a.leaseIndex == 0 || a.fenceIndex == 0 {
		return nil
	}
	return a
}

// remember keeps a, a grant of key made with nobody in line.
func (s *Store) remember(key string, a *alone) {
	if a == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.alone[key] = a
	}
}

// forget drops what a grant of key remembered, and returns it.
func (s *Store) forget(key string) *alone {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.alone[key]
	delete(s.alone, key)
	return a
}

// releaseAlone releases owner's lease on key without reading it first, if
// it was granted with nobody in line and nothing changed since. done
// false: the caller releases the usual way.
func (s *Store) releaseAlone(ctx context.Context, key, owner string) (done bool, err error) {
	a := s.forget(key)
	if a == nil || a.owner != owner {
		return false, nil
	}
	ok, _, _, err := s.txn.Txn(api.TxnOps{
		{KV: &api.KVTxnOp{Verb: api.KVCheckSession, Key: s.LeaseKey(key), Session: a.session}},
		{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: s.LeaseKey(key), Index: a.leaseIndex}},
		{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: s.LeaseKey(key)}},
		{KV: &api.KVTxnOp{Verb: api.KVCAS, Key: s.FenceKey(key), Value: []byte(strconv.FormatUint(a.token, 10)), Flags: a.token, Index: a.fenceIndex}},
	}, s.queryOpts(ctx))
	if err != nil {
		return true, s.transport("release", key, ctx, err)
	}
	if !ok {
		return false, nil
	}
	s.putIdle(a.ttl, a.session)
	return true, nil
}
