package membackend

import (
	"context"
	"time"

	"github.com/baton-go/baton/backend"
)

var _ backend.Breaker = (*Store)(nil)

// Break implements backend.Breaker.
func (s *Store) Break(ctx context.Context, key string) (backend.Lease, error) {
	return s.onLive(ctx, "break", key, func(e *entry, now time.Time) backend.Lease {
		broken := e.lease(key, now)
		s.bumpLocked(key, e.token, now)
		s.freeLocked(key, e, now)
		return broken
	})
}

// bumpLocked moves key's fencing counter past token and the clock, so
// that every later grant of key is above both.
func (s *Store) bumpLocked(key string, token uint64, now time.Time) {
	s.lastUS = max(now.UnixMicro(), s.lastUS+1, 0)
	us := uint64(s.lastUS)
	counter, _ := s.counterLocked(key, now)
	bumped := min(max(counter, token, us)+1, backend.MaxToken)
	f := fence{token: bumped}
	if bumped-us <= uint64(FenceLife.Microseconds()) {
		f.expires = now.Add(FenceLife)
	}
	s.fences[key] = f
}
