package synclock

import (
	"errors"
	"fmt"
	"time"

	"github.com/baton-go/baton/backend"
)

var (
	// ErrDisabled reports that locks are turned off; the section did not run.
	ErrDisabled = errors.New("synclock: locks are disabled (synchronized-lock.enabled=false)")

	// ErrLocked reports that another holder has the lock (a *LockedError
	// names the key and the holder): from TryLock at once, from DoKey and
	// Lock after MaxRetries, and joined with the context's error when the
	// caller's context ended while it waited.
	ErrLocked = errors.New("synclock: lock is held by another holder")

	// ErrReentrant reports a DoKey or Lock that would wait for a lock its
	// own call chain holds on the same store (through another Locker, or
	// a Mutex): a wait that could end only when the holding does.
	ErrReentrant = errors.New("synclock: the lock is held by the caller's own call chain")

	// ErrLeaseExpired reports that the lease ended (or was about to) while
	// the section ran: its context was cancelled, and another holder may
	// have entered it.
	ErrLeaseExpired = errors.New("synclock: lock lease expired while the section ran")

	// ErrNotLocked reports an Unlock of a Mutex that is not locked.
	ErrNotLocked = errors.New("synclock: unlock of an unlocked mutex")

	// ErrNoDefault reports a package-level call before SetDefault.
	ErrNoDefault = errors.New("synclock: no default locker: call synclock.SetDefault first")
)

// LockedError is ErrLocked (errors.Is matches it) with the lock's key and
// who has it; get it with errors.As.
type LockedError struct {
	// Key is the lock's key, as the caller gave it.
	Key string
	// Holder is the lease that holds the lock, with its remaining TTL.
	// Its Owner ("<instance ID>#<nonce>") is empty when the lock is kept
	// for Next, and when Recovering.
	Holder backend.Lease
	// Next is the waiter first in the store's line, if any: a TryLock's
	// refusal names it; that of a waiter that joined the line and gave up
	// may not (see backend.HeldError).
	Next string
	// Tries is how many times the caller asked the store before it gave
	// up after retries; 0 for a single try.
	Tries int
	// Recovering reports that the store restarted without its data, lost
	// it, or is new to baton, and grants the lock to nobody for Holder.TTL
	// (see the package doc).
	Recovering bool
}

// declareWhole says how to end a recovering store's refusals.
const declareWhole = "a store known to hold no live lease is declared whole with `batonctl init`; tests on servers started for them make their store WithoutRestartGuard"

// holderText says who has the lock, or for whom the store keeps it.
func (e *LockedError) holderText() string {
	if e.Recovering {
		return fmt.Sprintf("granted to nobody for another %v: the store restarted without its data, lost it, or is new to baton, and a holding from before may still run (%s)",
			e.Holder.TTL.Round(time.Millisecond), declareWhole)
	}
	switch {
	case e.Holder.Owner == "" && e.Next == "":
		return "handed to the waiter first in line (the holder released it as this instance took its place)"
	case e.Holder.Owner == "":
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
