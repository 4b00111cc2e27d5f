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
	if err := s.check(ctx, "leases", prefix); err != nil {
		return nil, err
	}
	if err := backend.ValidatePrefix(prefix); err != nil {
		return nil, fmt.Errorf("membackend: leases: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	var out []backend.LeaseInfo
	for key, e := range s.leases {
		if !strings.HasPrefix(key, prefix) || !now.Before(e.expires) {
			continue
		}
		info := backend.LeaseInfo{Lease: e.lease(key, now)}
		for _, w := range s.lines[key] {
			if now.Before(w.deadline) {
				info.Waiters = append(info.Waiters, w.owner)
			}
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b backend.LeaseInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}
