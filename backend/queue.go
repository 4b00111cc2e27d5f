package backend

import (
	"context"
	"fmt"
	"time"
)

// Queue is implemented by stores that can line up the waiters of a key, so
// that a released key goes to the waiter that has waited longest, whichever
// process it is in, instead of to whichever waiter's request arrives first.
// synclock uses it when the store has it; without it waiters race and the
// unlucky ones can wait many turns.
//
// A waiter joins the line by an AcquireQueued that is refused, and keeps its
// place by calling AcquireQueued again before its patience runs out (a
// waiter that crashed thus loses its place after patience, and the key goes
// to the next one). While anyone is in line, AcquireQueued grants a free key
// only to the waiter first in line; a Release then names that waiter in its
// EventReleased (Event.Next), so the others need not ask. Acquire, Renew,
// Release and Get do not look at the line: a caller that mixes Acquire with
// AcquireQueued on one key gives up the order.
type Queue interface {
	// AcquireQueued is Acquire for a waiter in line. It first drops the
	// waiters whose patience ran out. It then grants key to owner, as
	// Acquire would, if the key is free and either nobody is in line or
	// owner is first; the grant takes owner out of the line.
	//
	// Otherwise it returns a *HeldError (errors.Is(err, ErrHeld)) naming
	// the holder or, when the key is free but kept for another waiter, a
	// zero-owner Holder and that waiter as Next. A refused owner with
	// patience > 0 joins the back of the line, or keeps its place if it
	// is in line already, until patience from now; patience 0 neither
	// joins nor refreshes (a try that must not wait). patience must not be
	// negative.
	AcquireQueued(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (Lease, error)

	// Dequeue takes owner out of key's line (a waiter that gave up). It is
	// not an error if owner is not in line. If owner was first and the key
	// is free, watchers get EventReleased naming the new first waiter, so
	// that the key does not sit idle until owner's patience would have run
	// out.
	Dequeue(ctx context.Context, key, owner string) error
}

// ValidatePatience checks the patience of AcquireQueued.
func ValidatePatience(patience time.Duration) error {
	if patience < 0 {
		return fmt.Errorf("%w: patience %v must not be negative", ErrInvalidArgument, patience)
	}
	return nil
}
