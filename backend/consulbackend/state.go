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

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

// What one read of a key finds (state): its lease, counter, the restart
// guard's markers and its waiting line.

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

// first returns the waiter first in line, or nil.
func (st *state) first() *place {
	if len(st.line) == 0 {
		return nil
	}
	return &st.line[0]
}

// lastBut returns the waiter last in line other than mine, or nil.
func (st *state) lastBut(mine *place) *place {
	for i := len(st.line) - 1; i >= 0; i-- {
		if p := &st.line[i]; mine == nil || p.owner != mine.owner {
			return p
		}
	}
	return nil
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

// present returns p unless it is the empty pair of a get-or-empty read of
// a missing key.
func present(p *api.KVPair) *api.KVPair {
	if p == nil || p.ModifyIndex == 0 {
		return nil
	}
	return p
}
