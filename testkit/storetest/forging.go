package storetest

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
)

// Forging is an in-memory store whose first grant request (Acquire or
// AcquireQueued) names a holder with a token far ahead of the clock, as
// a store that did not check what it read would: the caller keeps that
// token as the floor of its next request, which the memory store then
// refuses (backend.ErrFloorAhead). It tests that role, synclock and
// schedlock forget such a floor instead of being locked out by it.
type Forging struct {
	*membackend.Store
	forged atomic.Bool
}

// forge returns, the first time only, the refusal that names the forged
// holder of key.
func (s *Forging) forge(key string) error {
	if s.forged.CompareAndSwap(false, true) {
		return &backend.HeldError{Holder: backend.Lease{Key: key, Owner: "forger", Token: backend.MaxToken - 1, TTL: time.Millisecond}}
	}
	return nil
}

// Acquire implements backend.Store.
func (s *Forging) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	if err := s.forge(key); err != nil {
		return backend.Lease{}, err
	}
	return s.Store.Acquire(ctx, key, owner, ttl, floor)
}

// AcquireQueued implements backend.Queue.
func (s *Forging) AcquireQueued(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
	if err := s.forge(key); err != nil {
		return backend.Lease{}, err
	}
	return s.Store.AcquireQueued(ctx, key, owner, ttl, floor, patience)
}
