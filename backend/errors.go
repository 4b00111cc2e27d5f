package backend

import (
	"errors"
	"fmt"
)

var (
	// ErrHeld reports that a key is held by a lease (possibly the caller's
	// own). The error is a *HeldError that names the holder.
	ErrHeld = errors.New("key is held")

	// ErrNotHeld reports that the caller does not hold the lease it tried
	// to renew or release. The error is a *NotHeldError.
	ErrNotHeld = errors.New("lease not held")

	// ErrNotFound reports that no lease is on a key.
	ErrNotFound = errors.New("no lease on key")

	// ErrInvalidArgument reports a bad key, owner or duration.
	ErrInvalidArgument = errors.New("invalid argument")

	// ErrCorrupt reports data in the store that baton did not write in
	// that shape, such as a foreign value under one of its keys.
	ErrCorrupt = errors.New("unexpected data in store")

	// ErrClosed reports use of a store after Close.
	ErrClosed = errors.New("store closed")

	// ErrFloorAhead reports an Acquire floor at or beyond the largest
	// token the store can have granted the key (TokenLimit of its clock):
	// a floor learnt from forged data, or from a store whose clock went
	// back by more than MaxTokenLead. It wraps ErrInvalidArgument. The
	// store granted nothing and changed nothing; a caller that keeps
	// floors forgets the key's floor and asks again without it, so that
	// a floor it once learnt never locks it out of the key.
	ErrFloorAhead = fmt.Errorf("%w: fencing floor ahead of the store's clock", ErrInvalidArgument)
)

// HeldError is returned by Acquire when the key is held, by AcquireQueued
// (see Queue) also when the key is free but kept for the waiter first in
// line, and by both when the store may have lost the key's lease in a
// restart and grants it to nobody until that lease would have ended
// (Recovering).
type HeldError struct {
	// Holder is the lease that holds the key, with its remaining TTL. Its
	// Owner is empty when the key is free but kept for Next, and when the
	// store is Recovering: TTL is then how long it keeps refusing the key.
	Holder Lease
	// Next is the waiter first in the key's line, if the store keeps one
	// and anyone is in it (Queue). AcquireQueued names it when the key is
	// free but kept for Next and for a try that does not join (patience
	// 0); an owner that joins the line of a key another owner holds
	// (patience > 0) may get an empty Next, as a store need not read the
	// line then.
	Next string
	// Recovering reports that the store restarted without its data, or
	// otherwise lost a lease on the key that its holder may still believe
	// in (Consul: the lease's session ended while it held the key, and
	// the key is under lock-delay):
	// the store grants the key to nobody for Holder.TTL, after which every
	// lease granted before the restart has ended. A caller waits that long
	// and asks again.
	Recovering bool
}

// Error implements error.
func (e *HeldError) Error() string {
	if e.Recovering {
		return fmt.Sprintf("key %q is not granted for another %v: the store may have lost a lease on the key that its holder can still be using until then "+
			"(the store restarted without its data or is new to baton, or a Consul session ended while it held the key); "+
			"a store known to hold no live lease is declared whole with `batonctl init`, and tests on servers started for them make their store WithoutRestartGuard (redisbackend or consulbackend)",
			e.Holder.Key, e.Holder.TTL)
	}
	if e.Holder.Owner == "" {
		return fmt.Sprintf("key %q is free but kept for %q, first in line", e.Holder.Key, e.Next)
	}
	return fmt.Sprintf("key %q is held by %q (token %d) for another %v",
		e.Holder.Key, e.Holder.Owner, e.Holder.Token, e.Holder.TTL)
}

// Is makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// NotHeldError is returned by Renew and Release when the caller does not
// hold the lease.
type NotHeldError struct {
	// Key is the key of the operation.
	Key string
	// Owner is the caller that tried to renew or release.
	Owner string
	// Holder is the lease that holds the key now; its Owner is empty when
	// the key is free.
	Holder Lease
}

// Error implements error.
func (e *NotHeldError) Error() string {
	if e.Holder.Owner == "" {
		return fmt.Sprintf("%q does not hold key %q: the key is free (lease expired or released)", e.Owner, e.Key)
	}
	if e.Holder.Owner == e.Owner {
		return fmt.Sprintf("%q does not hold key %q: its lease was released and is only kept for another %v", e.Owner, e.Key, e.Holder.TTL)
	}
	return fmt.Sprintf("%q does not hold key %q: it is held by %q (token %d)", e.Owner, e.Key, e.Holder.Owner, e.Holder.Token)
}

// Is makes errors.Is(err, ErrNotHeld) true.
func (e *NotHeldError) Is(target error) bool { return target == ErrNotHeld }
