package membackend

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-go/baton/backend"
)

var _ backend.Breaker = (*Store)(nil)

// Break implements backend.Breaker.
func (s *Store) Break(ctx context.Context, key, owner string, token uint64) (backend.Lease, error) {
	if err := backend.ValidateOwner(owner); err != nil {
		return backend.Lease{}, fmt.Errorf("membackend: break: %w", err)
	}
	var changed error
	broken, err := s.onLive(ctx, "break", key, func(e *entry, now time.Time) backend.Lease {
		l := e.lease(key, now)
		if l.Owner != owner || l.Token != token {
			changed = &backend.ChangedError{Key: key, Owner: owner, Token: token, Holder: l}
			return backend.Lease{}
		}
		s.bumpLocked(key, e.token, now)
		s.freeLocked(key, e, now)
		return l
	})
	if err == nil && changed != nil {
		return backend.Lease{}, fmt.Errorf("membackend: break: %w", changed)
	}
	return broken, err
}

// bumpLocked moves key's fencing counter past token and the clock, so
// that every later grant of key is above both.
func (s *Store) bumpLocked(key string, token uint64, now time.Time) {
	us := s.tickLocked(now)
	counter, _ := s.counterLocked(key, now)
	bumped := min(backend.NextToken(counter, token, us), backend.MaxToken)
	s.setFenceLocked(key, bumped, us, 0, now)
}
