package consulbackend

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

var _ backend.Inspector = (*Store)(nil)

// Leases implements backend.Inspector with two KV listings: the lease
// entries under "<prefix>/lease/<prefix of Leases>" whose sessions are
// live, and the places in line under "<prefix>/line/<prefix of Leases>".
// As in Get, a lease's TTL is the one it was last given: Consul cannot
// tell how much of a session's TTL is left.
func (s *Store) Leases(ctx context.Context, prefix string) ([]backend.LeaseInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("consulbackend: leases %q: %w", prefix, backend.ContextError(ctx))
	}
	if s.closed() {
		return nil, fmt.Errorf("consulbackend: leases %q: %w", prefix, backend.ErrClosed)
	}
	if err := backend.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("consulbackend: leases: %w", err)
	}
	leaseRoot, lineRoot := s.LeaseKey(""), s.prefix+"/line/" // LineKey without its key
	leases, _, err := s.kv.List(leaseRoot+prefix, s.queryOpts(ctx))
	if err != nil {
		return nil, s.transport("leases", prefix, ctx, err)
	}
	lines, _, err := s.kv.List(lineRoot+prefix, s.queryOpts(ctx))
	if err != nil {
		return nil, s.transport("leases", prefix, ctx, err)
	}
	// The places of key K are "<line root>K/<owner>"; K may hold slashes.
	places := make(map[string][]*api.TxnResult)
	for _, p := range lines {
		rest, ok := strings.CutPrefix(p.Key, lineRoot)
		if i := strings.LastIndexByte(rest, '/'); ok && i >= 0 {
			places[rest[:i]] = append(places[rest[:i]], &api.TxnResult{KV: p})
		}
	}
	var out []backend.LeaseInfo
	for _, p := range leases {
		key := strings.TrimPrefix(p.Key, leaseRoot)
		if backend.ValidateKey(key) != nil {
			continue // not a lease entry, such as a folder of longer keys
		}
		cur, err := s.entry(key, p)
		if err != nil {
			return nil, err
		}
		if cur == nil {
			continue
		}
		info := backend.LeaseInfo{Lease: cur.rec.lease(key)}
		line, _, err := s.places(key, places[key])
		if err != nil {
			return nil, err
		}
		for _, pl := range line {
			info.Waiters = append(info.Waiters, pl.owner)
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b backend.LeaseInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// LeasesUpTo implements backend.Inspector: the first limit leases by key
// that Leases lists, each with its first waiters waiters. Consul's KV
// listings cannot stop early, so it reads every entry under the prefix
// as Leases does (two listings, one round trip each): bounded in calls,
// not in bytes. More is exact and the list never partial.
func (s *Store) LeasesUpTo(ctx context.Context, prefix string, limit, waiters int) (backend.LeaseList, error) {
	if err := backend.ValidateLeaseLimits(limit, waiters); err != nil {
		return backend.LeaseList{}, fmt.Errorf("consulbackend: leases up to: %w", err)
	}
	all, err := s.Leases(ctx, prefix)
	if err != nil {
		return backend.LeaseList{}, err
	}
	var out backend.LeaseList
	if len(all) > limit {
		all, out.More = all[:limit], len(all)-limit
	}
	for _, l := range all {
		if len(l.Waiters) > waiters {
			l.Waiters, l.MoreWaiting = l.Waiters[:waiters], true
		}
		out.Leases = append(out.Leases, l)
	}
	return out, nil
}
