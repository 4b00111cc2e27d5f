package synclock

import (
	"errors"
	"fmt"
	"time"

	"github.com/baton-go/baton/backend"
)

var (
	// ErrDisabled reports that locks are turned off
	// (synchronized-lock.enabled=false). The section did not run: baton
	// never runs a section unlocked.
	ErrDisabled = errors.New("synclock: locks are disabled (synchronized-lock.enabled=false)")

	// ErrLocked reports that another holder has the lock: from TryDo and
	// TryLock at once, and from Do after its retries ran out.
	ErrLocked = errors.New("synclock: lock is held by another holder")

	// ErrTimeout reports that the caller's context ended while it waited
	// for the lock. It comes joined with the context's error.
	ErrTimeout = errors.New("synclock: gave up waiting for the lock")

	// ErrLeaseExpired reports that the lock's lease ended (or was about to)
	// while the section still ran: another holder may have entered it. The
	// section's context was cancelled at that moment.
	ErrLeaseExpired = errors.New("synclock: lock lease expired while the section ran")

	// ErrNotLocked reports an Unlock of a Mutex that is not locked.
	ErrNotLocked = errors.New("synclock: unlock of an unlocked mutex")

	// ErrNoDefault reports a package-level call before SetDefault.
	ErrNoDefault = errors.New("synclock: no default locker: call synclock.SetDefault first")
)

// lockedError is ErrLocked with the key and the holder.
type lockedError struct {
	key    string
	holder backend.Lease // Owner "" when the key is free but kept for next
	next   string        // the waiter first in the store's line, if any
	tries  int
	// recovering: the store restarted without its data and grants the
	// key to nobody for holder.TTL
	recovering bool
}

// holderText says who has the lock: its holder or, when the store keeps
// the free key for the waiter first in line, that waiter.
func (e *lockedError) holderText() string {
	if e.recovering {
		return fmt.Sprintf("granted to nobody for another %v: the store restarted without its data and a holding from before may still run", e.holder.TTL.Round(time.Millisecond))
	}
	if e.holder.Owner == "" {
		return fmt.Sprintf("free but kept for %q, first in line", e.next)
	}
	return fmt.Sprintf("held by %q (token %d, %v left)", e.holder.Owner, e.holder.Token, e.holder.TTL.Round(time.Millisecond))
}

func (e *lockedError) Error() string {
	s := fmt.Sprintf("synclock: lock %q is %s", e.key, e.holderText())
	if e.tries > 0 {
		s += fmt.Sprintf(" after %d tries", e.tries)
	}
	return s
}

func (e *lockedError) Is(target error) bool { return target == ErrLocked }
