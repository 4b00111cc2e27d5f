package backend

import (
	"context"
	"errors"
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
// only to the waiter first in line.
//
// Stores that also implement Handover give a released key straight to the
// waiter first in line. Stores that do not keep the released key free for
// that waiter and name it in their EventReleased (Event.Next), so the others
// need not ask. Acquire, Renew and Get do not look at the line: a caller
// that mixes Acquire with AcquireQueued on one key gives up the order.
type Queue interface {
	// AcquireQueued is Acquire for a waiter in line. Waiters whose
	// patience ran out hold no place: it passes over them, and drops them
	// where it reads the line. It grants key to owner, as Acquire would,
	// if the key is free and either nobody is in line or owner is first;
	// the grant takes owner out of the line. If a Release already handed
	// the key to owner (Handover), it returns that lease with its
	// remaining TTL.
	//
	// Otherwise it returns a *HeldError (errors.Is(err, ErrHeld)) naming
	// the holder or, when the key is free but kept for another waiter, a
	// zero-owner Holder and that waiter as Next. A refused owner with
	// patience > 0 joins the back of the line, or keeps its place if it
	// is in line already, until patience from now, asking for ttl and
	// floor should the key be handed to it; patience 0 neither joins nor
	// refreshes (a try that must not wait). patience must not be negative.
	// A refusal names the waiter first in line as Next ("" for nobody)
	// when the key is free but kept for it and when patience is 0; one
	// that joins the line of a key another owner holds may name nobody,
	// as a store need not read the line then (nor drop the lapsed places
	// in it).
	// A refusal because the store is recovering from a restart (Recovering
	// in the HeldError) neither joins nor leaves the line.
	AcquireQueued(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (Lease, error)

	// Dequeue takes owner out of key's line (a waiter that gave up). It is
	// not an error if owner is not in line. If owner was first and the key
	// is free, the key goes to the next waiter (handed over, or kept for it
	// and named in an EventReleased), so that it does not sit idle until
	// owner's patience would have run out. If the key had already been
	// handed to owner (Handover), Dequeue releases it the same way: a
	// waiter that gives up never keeps a key it did not know it had.
	Dequeue(ctx context.Context, key, owner string) error
}

// Handover is implemented by Queue stores whose Release (keepFor <= 0) of a
// key with a live waiter in line does not free the key but grants it, in
// the same atomic step, to the waiter first in line: with the ttl and floor
// of that waiter's last AcquireQueued, a new fencing token, and an
// EventRenewed (not EventReleased) for watchers, since the key stays held.
// The waiter learns of it from AwaitHandover, without another request, so
// a contended key passes from holder to holder in one trip to the store.
//
// A waiter that crashed can be handed the key until its place lapses; the
// key then stays held until that lease's ttl ends, as if the waiter had
// crashed while holding it.
type Handover interface {
	Queue

	// AwaitHandover waits until a Release or Dequeue hands key to owner,
	// until max passes (then ok is false and err nil), or until ctx ends.
	// A store may also return ok false sooner when it sees the key free
	// and not handed to owner (released while owner was not yet in line,
	// or expired): nothing will hand it over then, and the caller asks
	// again.
	// A handover that happened before the call is returned at once; one
	// whose lease ended before it was collected is not returned. The
	// lease's TTL is, as everywhere, what was left of it when the store
	// answered: for a handover seen before the call, less the time since.
	// The store cannot know when the handover reached the caller, so the
	// caller counts the TTL from a moment it knows to come before the
	// handover, such as when it sent its last AcquireQueued or the last
	// AwaitHandover that returned ok false.
	//
	// A store that cannot hand over at the moment (for instance a Redis
	// store that must wait for replicas to acknowledge every grant)
	// returns an error wrapping errors.ErrUnsupported; the caller then
	// waits for EventReleased as with a plain Queue.
	//
	// When ctx ends, a handover may still arrive after AwaitHandover
	// returned: a waiter that gives up calls Dequeue, which releases it.
	AwaitHandover(ctx context.Context, key, owner string, max time.Duration) (l Lease, ok bool, err error)
}

// Rejoin is implemented by Handover stores whose release can, in the same
// step, put another waiter at the back of the key's line: a process that
// releases a key while another of its goroutines waits for it saves that
// goroutine's AcquireQueued, a request and its round trip per turn.
type Rejoin interface {
	Handover

	// ReleaseAndJoin releases key as Release(ctx, key, owner, 0) does. If
	// the release handed key to the waiter first in line, next joins the
	// back of the line in the same atomic step, as a refused
	// AcquireQueued(ctx, key, next, ttl, floor, patience) would have it
	// join, and joined is true: next waits for its turn with
	// AwaitHandover and keeps its place by asking (AcquireQueued) before
	// patience runs out, or leaves with Dequeue. If the key was not handed
	// over (nobody live in line, or the store does not hand over at the
	// moment), next has not joined and asks as usual. patience must be
	// positive.
	ReleaseAndJoin(ctx context.Context, key, owner, next string, ttl time.Duration, floor uint64, patience time.Duration) (joined bool, err error)
}

// ValidateRejoin checks the arguments of ReleaseAndJoin other than key.
func ValidateRejoin(owner, next string, ttl time.Duration, floor uint64, patience time.Duration) error {
	return errors.Join(ValidateOwner(owner), ValidateOwner(next), ValidateTTL("ttl", ttl), ValidateFloor(floor), ValidateTTL("patience", patience))
}

// ValidatePatience checks the patience of AcquireQueued.
func ValidatePatience(patience time.Duration) error {
	if patience < 0 {
		return fmt.Errorf("%w: patience %v must not be negative", ErrInvalidArgument, patience)
	}
	return nil
}

// ValidateMaxWait checks the max of AwaitHandover.
func ValidateMaxWait(max time.Duration) error {
	if max <= 0 || max > MaxTTL {
		return fmt.Errorf("%w: wait %v must be positive and at most %v", ErrInvalidArgument, max, MaxTTL)
	}
	return nil
}
