package membackend

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/baton-go/baton/backend"
)

var _ backend.Inspector = (*Store)(nil)

// Leases implements backend.Inspector: the live leases of the store's map
// whose keys begin with prefix, with the live waiters of their lines.
func (s *Store) Leases(ctx context.Context, prefix string) ([]backend.LeaseInfo, error) {
	l, err := s.list(ctx, "leases", prefix, 0, -1)
	return l.Leases, err
}

// LeasesUpTo implements backend.Inspector: the first limit live leases by
// key whose keys begin with prefix, each with its first waiters live
// waiters. It looks at every key of the map (in memory), so More is
// exact and the list never partial.
func (s *Store) LeasesUpTo(ctx context.Context, prefix string, limit, waiters int) (backend.LeaseList, error) {
	if err := backend.ValidateLeaseLimits(limit, waiters); err != nil {
		return backend.LeaseList{}, fmt.Errorf("membackend: leases up to: %w", err)
	}
	return s.list(ctx, "leases up to", prefix, limit, waiters)
}

// list lists the live leases under prefix, at most limit of them (0: all)
// with at most waiters waiters each (-1: all).
func (s *Store) list(ctx context.Context, op, prefix string, limit, waiters int) (backend.LeaseList, error) {
	if err := s.check(ctx, op, prefix); err != nil {
		return backend.LeaseList{}, err
	}
	if err := backend.ValidatePrefix(prefix); err != nil {
		return backend.LeaseList{}, fmt.Errorf("membackend: %s: %w", op, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return backend.LeaseList{}, err
	}
	now := s.clock.Now()
	var keys []string
	for key, e := range s.leases {
		if strings.HasPrefix(key, prefix) && now.Before(e.expires) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	var out backend.LeaseList
	if limit > 0 && len(keys) > limit {
		keys, out.More = keys[:limit], len(keys)-limit
	}
	for _, key := range keys {
		info := backend.LeaseInfo{Lease: s.leases[key].lease(key, now)}
		for _, w := range s.lines[key] {
			switch {
			case !now.Before(w.deadline):
			case waiters >= 0 && len(info.Waiters) == waiters:
				info.MoreWaiting = true
			default:
				info.Waiters = append(info.Waiters, w.owner)
			}
		}
		out.Leases = append(out.Leases, info)
	}
	return out, nil
}
