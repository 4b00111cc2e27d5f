package role

import (
	"context"
	"sync/atomic"
)

var defaultElector atomic.Pointer[Elector]

// SetDefault makes el the elector that the package-level IsMaster and
// IsMasterOf use, for code (HTTP handlers, jobs) that cannot be handed the
// elector. Pass nil to clear it.
func SetDefault(el *Elector) { defaultElector.Store(el) }

// Default returns the elector set by SetDefault, or nil.
func Default() *Elector { return defaultElector.Load() }

// IsMaster reports whether this instance is master according to the
// elector set by SetDefault; false when none is set.
func IsMaster() bool {
	if el := defaultElector.Load(); el != nil {
		return el.IsMaster()
	}
	return false
}

// IsMasterOf is Elector.IsMasterOf on the elector set by SetDefault. It
// returns ErrNoDefault when none is set.
func IsMasterOf(ctx context.Context, app, instanceID string) (bool, error) {
	el := defaultElector.Load()
	if el == nil {
		return false, ErrNoDefault
	}
	return el.IsMasterOf(ctx, app, instanceID)
}
