package backend

import "context"

// Breaker is implemented by stores that can end a lease whoever holds it:
// the operator's way out of a lock whose holder is stuck or gone while
// its lease is long (batonctl release --force). Nothing in baton's
// policy packages calls it; a holder only ever releases its own lease.
//
// A broken lease's holder may still be running the section it guarded:
// breaking a lease ends the store's promise of one holder at a time for
// that key until the old holder notices. Fencing is what keeps the shared
// resource safe then: the next grant's token is above the broken one, so
// a resource that checks tokens rejects the old holder's writes.
type Breaker interface {
	// Break ends the lease on key whoever holds it, also a lease released
	// with a keep time, and returns the lease it ended (with the TTL it
	// had left, or on stores that cannot read that, the TTL it was
	// given). The key then goes on as after its holder's Release with
	// keepFor <= 0: handed to the waiter first in line on a store that
	// hands over (Handover), else freed, with watchers told
	// (EventReleased, naming the waiter it is kept for, if any).
	//
	// Break also moves the key's fencing counter past the broken lease's
	// token (to at least the store's clock in microseconds), so that
	// every later grant of key carries a token above every token granted
	// before the break. The old holder's Renew and Release then return
	// a *NotHeldError.
	//
	// If no lease is on key, Break changes nothing and returns an error
	// wrapping ErrNotFound.
	Break(ctx context.Context, key string) (Lease, error)
}
