package backend

import (
	"context"
	"errors"
	"fmt"
)

// Breaker is implemented by stores that can end a lease its holder did
// not release: the operator's way out of a lock whose holder is stuck or
// gone while its lease is long (batonctl release --force). Nothing in
// baton's policy packages calls it; a holder only ever releases its own
// lease.
//
// A broken lease's holder may still be running the section it guarded:
// breaking a lease ends the store's promise of one holder at a time for
// that key until the old holder notices. Fencing is what keeps the shared
// resource safe then: the next grant's token is above the broken one, so
// a resource that checks tokens rejects the old holder's writes.
type Breaker interface {
	// Break ends the lease on key if it is the grant the caller names:
	// the one to owner with token, as Get returned it. It compares and
	// ends in one step of the store, so that a lease granted after the
	// caller looked (the holder released and another took the key, or
	// the key was handed to a waiter) is never ended in its place: Break
	// then changes nothing and returns a *ChangedError (ErrLeaseChanged)
	// naming the lease on key now. A lease released with a keep time is
	// still its grant and can be broken.
	//
	// Break returns the lease it ended (with the TTL it had left, or on
	// stores that cannot read that, the TTL it was given). The key then
	// goes on as after its holder's Release with keepFor <= 0: handed to
	// the waiter first in line on a store that hands over (Handover),
	// else freed, with watchers told (EventReleased, naming the waiter it
	// is kept for, if any).
	//
	// Break also moves the key's fencing counter past the broken lease's
	// token (to at least the store's clock in microseconds), so that
	// every later grant of key carries a token above every token granted
	// before the break. The old holder's Renew and Release then return
	// a *NotHeldError.
	//
	// If no lease is on key, Break changes nothing and returns an error
	// wrapping ErrNotFound. A bad key or owner is ErrInvalidArgument.
	Break(ctx context.Context, key, owner string, token uint64) (Lease, error)
}

// ErrLeaseChanged reports that Break found another grant on the key than
// the one it was asked to end, and ended nothing. The error is a
// *ChangedError.
var ErrLeaseChanged = errors.New("lease changed")

// ChangedError is returned by Break when the lease on the key is not the
// grant the caller named.
type ChangedError struct {
	// Key is the key of the Break.
	Key string
	// Owner and Token name the grant the caller asked to end.
	Owner string
	Token uint64
	// Holder is the lease on the key now, with its remaining TTL.
	Holder Lease
}

// Error implements error.
func (e *ChangedError) Error() string {
	return fmt.Sprintf("the lease on key %q changed: it was held by %q (token %d), and is held by %q (token %d) now; nothing was broken",
		e.Key, e.Owner, e.Token, e.Holder.Owner, e.Holder.Token)
}

// Is makes errors.Is(err, ErrLeaseChanged) true.
func (e *ChangedError) Is(target error) bool { return target == ErrLeaseChanged }
