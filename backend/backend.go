package backend

import (
	"context"
	"time"
)

// Lease is a grant of a key to one owner, as the store saw it when it
// answered.
type Lease struct {
	// Key is the key the lease is on.
	Key string
	// Owner is the opaque owner string the lease was granted to.
	Owner string
	// Token is the fencing token of this grant: strictly greater than the
	// token of every earlier grant of the same key in the same store.
	Token uint64
	// TTL is the time the lease had left on the store's clock when the
	// store answered. The caller's own view of expiry must start from the
	// moment it sent the request, not from when it read the answer.
	//
	// A store that cannot read how much of another owner's lease is left
	// (Consul: a session's remaining time cannot be read) reports, for a
	// lease it did not just grant or renew (Get, a HeldError), the TTL the
	// lease was last given: a time to look again, not a promise.
	TTL time.Duration
}

// Store is a storage-only lease store. It grants, renews and releases
// leases on keys and tells waiters when a key was released. It holds no
// policy: when to renew, how long to wait and when to give up belong to the
// packages that use it (role, synclock, schedlock), which are written once
// for every Store.
//
// A context that has ended makes every method fail with an error that
// matches the context's error (and its cause; see ContextError) and
// changes nothing. A Watch's context bounds only the subscribing: the
// Watch lives until Close.
//
// All methods are safe for concurrent use. Every method validates its
// arguments and returns an error wrapping ErrInvalidArgument for an empty
// key or owner, a key or owner that is too long or holds control
// characters, or a non-positive ttl; no method panics on bad input or on
// foreign data found in the store (that is ErrCorrupt). Names read back
// from the store (owners, waiters, members) are checked by the same
// rules (CheckStoredName), so that text baton never writes, such as a
// terminal escape sequence, is ErrCorrupt and never returned; a write
// that finds foreign data it depends on changes nothing.
//
// Expiry is decided by the store's clock only (Redis PX, Consul session
// TTL, the in-memory store's clock); no method compares client clocks. A
// lease nobody renews or releases ends no earlier than its TTL allows, and
// on some stores later: Consul keeps a session up to twice its TTL.
type Store interface {
	// Acquire grants key to owner for ttl if the key is free (set if
	// absent).
	//
	// The new lease's fencing token is max(stored counter, floor, the
	// store's clock in microseconds) + 1. floor is the highest token the
	// caller has seen for this key (below MaxToken), or 0. The clock term
	// keeps tokens increasing for every caller, new processes included,
	// when the store has lost the counter: it restarted without its data,
	// or dropped the counter of a key left idle past the counter's
	// lifetime (stores let counters expire, at the earliest an hour, or
	// the grant's ttl if longer, after the key's last grant, so that
	// per-entity keys such as
	// invoice:42 do not pile up). The floor keeps them increasing should
	// the store's clock go back. Tokens are therefore large numbers (about
	// 1.8e15 today), not 1, 2, 3: compare them, never count them. A
	// refused Acquire leaves the counter as it was.
	//
	// No honest grant puts a token more than MaxTokenLead (a year) ahead
	// of the store's clock, and stores hold every token to that: a floor
	// at or above TokenLimit of the store's clock is refused with
	// ErrFloorAhead (an ErrInvalidArgument) naming the key, and a counter
	// or a lease token beyond it, read by any method, is ErrCorrupt naming
	// the key to delete, never a token in a Lease or a HeldError, so that
	// forged data cannot become a caller's floor. Once the bad key is
	// deleted, the key is granted again as usual.
	//
	// If the key is held, including by owner itself, Acquire returns a
	// *HeldError (errors.Is(err, ErrHeld)) naming the holder's lease.
	//
	// After a data loss the store grants nobody a lease that its holder
	// may still believe in: if the store restarted without its data less
	// than the restart guard ago (at least ttl; stores can be told to wait
	// longer, for fleets whose leases outgrow their first ttl) and has not
	// granted key since, Acquire returns a *HeldError with Recovering set,
	// an empty Holder.Owner and, as Holder.TTL, how long it keeps refusing.
	// By then every lease granted before the restart has ended, on its
	// holder's clock as on the store's.
	Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (Lease, error)

	// Renew extends owner's live lease on key to ttl from now, keeping its
	// token. If owner does not hold the key (never did, expired, released,
	// or another owner holds it now), Renew returns a *NotHeldError
	// (errors.Is(err, ErrNotHeld)) and changes nothing.
	Renew(ctx context.Context, key, owner string, ttl time.Duration) (Lease, error)

	// Release ends owner's lease on key. With keepFor <= 0 the key is
	// deleted at once and watchers are woken (EventReleased), except on a
	// store that hands over (Handover) with a live waiter in the key's
	// line: the key then goes straight to that waiter. With
	// keepFor > 0 the key stays held for exactly keepFor more (it can no
	// longer be renewed, and watchers that are told get EventRenewed with
	// TTL keepFor), which is how a job lock keeps its lockAtLeastFor. Only the owner can release:
	// for any other owner, or a key that is gone, Release returns a
	// *NotHeldError and changes nothing. Releasing again a lease that owner
	// already released with keepFor > 0 is not an error: with keepFor > 0
	// it changes nothing, with keepFor <= 0 it deletes the key at once.
	Release(ctx context.Context, key, owner string, keepFor time.Duration) error

	// Get returns the lease currently on key, or an error wrapping
	// ErrNotFound if the key is free.
	Get(ctx context.Context, key string) (Lease, error)

	// Watch subscribes to what happens to key. The returned Watch
	// delivers an Event after every Release of the key with keepFor <= 0
	// that happens after Watch returned, and stores that can also report
	// renewals (so that waiters need not poll a live key). Stores may also
	// deliver an event on expiry or spuriously (for instance after a lost
	// connection, when a release may have been missed); stores that cannot
	// see expiry do not report it, so callers re-check at the holder's
	// remaining TTL, as WaitFree does. Close the Watch when done.
	Watch(ctx context.Context, key string) (Watch, error)
}

// Watch is a subscription to the releases (and, where the store can,
// renewals) of one key.
type Watch interface {
	// C delivers events about the key. Events are coalesced: when the
	// reader falls behind, it gets the newest, except that a release is
	// not replaced by a maybe-free (see Notify).
	C() <-chan Event
	// Close ends the subscription. It is idempotent.
	Close() error
}

// Event is what a Watch reports about its key.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// TTL is the renewed lease's duration, for EventRenewed.
	TTL time.Duration
	// Next is, for EventReleased from a store with waiting lines (Queue),
	// the waiter first in line when the key was released: the store keeps
	// the key for it, so other waiters need not ask. It is empty when
	// nobody was in line or the store keeps no lines.
	Next string
}

// EventKind says what a Watch saw happen to its key.
type EventKind int

const (
	// EventMaybeFree: the key may have become free — it expired, the
	// store lost its data, or events were missed (a broken connection).
	// A waiter should look, but should not assume the holder gave the
	// key up: the store may have lost a lease that its holder still
	// believes in, so a cautious waiter does not claim before the lease
	// it last saw would have ended.
	EventMaybeFree EventKind = iota
	// EventReleased: the holder released the key; it is free now.
	EventReleased
	// EventRenewed: the holder renewed its lease; the key stays held for
	// TTL from when the store sent the event, and a waiter can sleep that
	// long without asking.
	EventRenewed
)

// String returns the kind's name.
func (k EventKind) String() string {
	switch k {
	case EventReleased:
		return "released"
	case EventRenewed:
		return "renewed"
	}
	return "maybe-free"
}

// Notify delivers ev on ch (a channel of capacity 1) without blocking,
// replacing an event the reader has not taken yet, so that a slow reader
// finds the newest. One merge keeps a slow reader doing what a fast one
// would: an EventMaybeFree that comes while an EventReleased waits leaves
// the release, with no Next. A fast reader would have seen the release
// and looked at once; the maybe-free adds only that events may have been
// missed, so the key may no longer be kept for the waiter Next named.
func Notify(ch chan Event, ev Event) {
	for {
		select {
		case ch <- ev:
			return
		default:
		}
		select {
		case old := <-ch:
			if old.Kind == EventReleased && ev.Kind == EventMaybeFree {
				ev = Event{Kind: EventReleased}
			}
		default:
		}
	}
}
