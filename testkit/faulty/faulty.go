// Package faulty wraps baton's in-memory store in the faults that tests of
// the policy packages need, so that each test package does not write its
// own copy.
package faulty

import (
	"context"
	"sync"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
)

// LateRenew is an in-memory store whose Renew ignores its context and
// answers only after Proceed: a renewal whose reply lands after the
// holder's deadline, as on a go-redis client that does not let a context
// end a read. Every other method is the in-memory store's, waiting lines
// and handovers included.
type LateRenew struct {
	*membackend.Store
	entered                chan struct{}
	proceed                chan struct{}
	enterOnce, proceedOnce sync.Once
}

// NewLateRenew wraps s.
func NewLateRenew(s *membackend.Store) *LateRenew {
	return &LateRenew{Store: s, entered: make(chan struct{}), proceed: make(chan struct{})}
}

// Entered is closed when the first Renew starts.
func (s *LateRenew) Entered() <-chan struct{} { return s.entered }

// Proceed lets every Renew, waiting or later, go on. It is idempotent, so
// a test can also defer it.
func (s *LateRenew) Proceed() { s.proceedOnce.Do(func() { close(s.proceed) }) }

// Renew waits for Proceed, then renews without regard to ctx.
func (s *LateRenew) Renew(_ context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	s.enterOnce.Do(func() { close(s.entered) })
	<-s.proceed
	return s.Store.Renew(context.Background(), key, owner, ttl)
}
