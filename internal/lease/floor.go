package lease

import (
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/baton-go/baton/backend"
)

// Floor is the highest fencing token a policy has seen on one key. Every
// grant asks the store with it (the floor of backend.Store.Acquire), so a
// store that lost its counter still grants above each token a fenced
// resource has already been shown. The zero Floor is ready to use.
type Floor struct{ seen atomic.Uint64 }

// Load returns the floor: 0 when no token has been seen.
func (f *Floor) Load() uint64 { return f.seen.Load() }

// Observe raises the floor to token, from a grant or from a holder the
// store named.
func (f *Floor) Observe(token uint64) {
	for {
		old := f.seen.Load()
		if token <= old || f.seen.CompareAndSwap(old, token) {
			return
		}
	}
}

// Forget drops the floor when err is the store's refusal of it
// (backend.ErrFloorAhead: beyond any token the store can have granted, so
// learnt from forged data or from a store whose clock went back), so that
// it never locks the policy out of key, and logs that on logger in the
// name of who ("role", "synclock", ...). It reports whether a floor was
// dropped: then asking again without it may succeed.
func (f *Floor) Forget(err error, logger *slog.Logger, who, key string) bool {
	if !errors.Is(err, backend.ErrFloorAhead) {
		return false
	}
	old := f.seen.Load()
	if old == 0 || !f.seen.CompareAndSwap(old, 0) {
		return old != 0 // raised meanwhile by a grant: ask again with that
	}
	logger.Warn(who+": the store refused the highest token seen as the floor of a claim; forgetting it", "key", key, "floor", old, "err", err)
	return true
}
