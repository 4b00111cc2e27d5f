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

	// ErrLocked reports that another holder has the lock (the error is a
	// *LockedError naming the key and the holder): from TryLock at once,
	// from DoKey and Lock after MaxRetries ran out, and joined with the
	// context's error when the caller's context ended while it waited.
	// A call whose context had ended before it asked the store returns
	// the context's error (and its cause) alone.
	ErrLocked = errors.New("synclock: lock is held by another holder")

	// ErrReentrant reports a DoKey or Lock that would wait for a lock its
	// own call chain holds: its context comes from a live holding's
	// section (or a Mutex's Context) of the same key on the same store,
	// taken through another Locker, or a Mutex asked for inside it. Such
	// a wait could end only when the holding does, so it fails at once;
	// the message names the key. A DoKey through the Locker that holds
	// the key runs its section directly instead (see DoKey).
	ErrReentrant = errors.New("synclock: the lock is held by the caller's own call chain")

	// ErrLeaseExpired reports that the lock's lease ended (or was about to)
	// while the section still ran: another holder may have entered it. The
	// section's context was cancelled at that moment.
	ErrLeaseExpired = errors.New("synclock: lock lease expired while the section ran")

	// ErrNotLocked reports an Unlock of a Mutex that is not locked.
	ErrNotLocked = errors.New("synclock: unlock of an unlocked mutex")

	// ErrNoDefault reports a package-level call before SetDefault.
	ErrNoDefault = errors.New("synclock: no default locker: call synclock.SetDefault first")
)

// LockedError is the error of a lock held by another holder: ErrLocked
// (errors.Is matches it) with the lock's key and who has it, as
// backend.HeldError names a lease's holder. TryLock, and DoKey or Lock
// whose retries ran out, return it; get it with errors.As.
type LockedError struct {
	// Key is the lock's key, as the caller gave it.
	Key string
	// Holder is the lease that holds the lock, with its remaining TTL.
	// Its Owner (instance ID, "#", a nonce) is empty when the lock is free
	// but kept for Next, and when Recovering.
	Holder backend.Lease
	// Next is the waiter first in the store's line, if the store keeps
	// one and anyone is in it.
	Next string
	// Tries is how many times the caller asked the store, when it gave up
	// after retries; 0 for a single try.
	Tries int
	// Recovering reports that the store restarted without its data, lost
	// it, or is new to baton (its restart guard), and grants the lock to
	// nobody for Holder.TTL: a holding from before may still run until
	// then. A store known to hold no live lease is declared whole with
	// batonctl init.
	Recovering bool
}

// holderText says who has the lock: its holder or, when the store keeps
// the free key for the waiter first in line, that waiter.
func (e *LockedError) holderText() string {
	if e.Recovering {
		return fmt.Sprintf("granted to nobody for another %v: the store restarted without its data, lost it, or is new to baton, and a holding from before may still run "+
			"(a store known to hold no live lease is declared whole with `batonctl init`; tests on servers started for them make their store WithoutRestartGuard)", e.Holder.TTL.Round(time.Millisecond))
	}
	if e.Holder.Owner == "" {
		return fmt.Sprintf("free but kept for %q, first in line", e.Next)
	}
	return fmt.Sprintf("held by %q (token %d, %v left)", e.Holder.Owner, e.Holder.Token, e.Holder.TTL.Round(time.Millisecond))
}

// Error implements error.
func (e *LockedError) Error() string {
	s := fmt.Sprintf("synclock: lock %q is %s", e.Key, e.holderText())
	if e.Tries > 0 {
		s += fmt.Sprintf(" after %d tries", e.Tries)
	}
	return s
}

// Is reports whether target is ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }
