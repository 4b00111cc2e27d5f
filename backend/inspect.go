package backend

import (
	"context"
	"fmt"
)

// Inspector is implemented by stores that can list the leases held on keys
// under a prefix, for status pages and operators' tools. It reads and
// never writes: a lapsed waiter or an expired lease it comes across is
// left for the store's next write to drop.
//
// The list is not one snapshot: each key is read on its own, so a lease
// granted or released while Leases runs may or may not be in it. Every
// entry is as Get would report it at the moment its key was read.
//
// Stores do not record when a lease was granted, so an entry carries no
// age. Its token is the next best thing: every store makes a grant's token
// at least the store's clock in microseconds at the grant (see
// Store.Acquire), so a lease whose token, read as such a time, lies in the
// past has been held at least since then by its owner.
type Inspector interface {
	// Leases returns the leases held now on the keys that begin with
	// prefix, sorted by key; an empty prefix lists every lease of the
	// store. A key released with a keep time is listed until the keep
	// time ends; a free key is not, even when it is kept for the waiter
	// first in its line. Member groups (Registry) are not leases and are
	// never listed.
	Leases(ctx context.Context, prefix string) ([]LeaseInfo, error)

	// LeasesUpTo is Leases with its work bounded by limit (at least 1)
	// and waiters (at least 0; else ErrInvalidArgument) and not by the
	// number of keys, for pages that are read again and again: it lists
	// at most limit leases, sorted by key, each with at most waiters
	// waiters (MoreWaiting says there are more), and says in LeaseList
	// how many more leases it saw. Which leases a store lists when
	// there are more is the store's to say (the first by key, or the
	// first its scan came across); the empty prefix is allowed, as in
	// Leases.
	LeasesUpTo(ctx context.Context, prefix string, limit, waiters int) (LeaseList, error)
}

// LeaseList is what Inspector.LeasesUpTo lists.
type LeaseList struct {
	// Leases are at most the limit asked for, sorted by key.
	Leases []LeaseInfo
	// More is how many more keys under the prefix the store saw that
	// hold, or may hold, a lease: a store that found their names but did
	// not read them counts each (a few may turn out free, kept for a
	// waiter).
	More int
	// Partial is true when the store stopped looking before it had seen
	// every key under the prefix, to keep its work bounded: More is then
	// only a lower bound ("more than More").
	Partial bool
}

// LeaseInfo is one held lease as Inspector.Leases lists it.
type LeaseInfo struct {
	// Lease is the lease: its key, owner, fencing token and remaining TTL
	// (for stores that cannot read what is left, such as Consul, the TTL
	// it was last given, as in Get).
	Lease
	// Waiters are the owners in the key's waiting line (Queue) whose
	// places have not lapsed, first in line first; empty when nobody
	// waits or the store keeps no lines. A store may list only those
	// among the first places of a very long line, so that one read's
	// work stays bounded (redisbackend: the first 100).
	Waiters []string
	// MoreWaiting is true when a bounded listing (LeasesUpTo) did not
	// read every place in line: more owners wait, or did until their
	// places lapsed. Leases reads every place and leaves it false.
	MoreWaiting bool
}

// ValidateLimit checks the limit of a bounded listing
// (Inspector.LeasesUpTo, MemberLister.MembersUpTo): at least 1.
func ValidateLimit(limit int) error {
	if limit < 1 {
		return fmt.Errorf("%w: limit %d: a bounded listing must list at least 1 entry", ErrInvalidArgument, limit)
	}
	return nil
}

// ValidateLeaseLimits checks the limits of Inspector.LeasesUpTo: limit
// at least 1, waiters at least 0.
func ValidateLeaseLimits(limit, waiters int) error {
	if waiters < 0 {
		return fmt.Errorf("%w: waiters %d: a bounded listing lists 0 waiters or more", ErrInvalidArgument, waiters)
	}
	return ValidateLimit(limit)
}

// ValidatePrefix checks the prefix of Inspector.Leases: empty, or at most
// MaxKeyLen bytes of UTF-8 without spaces or control characters. Unlike a
// key, it may end inside a hash tag ("{acme:bil").
func ValidatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	return validateName("prefix", prefix, MaxKeyLen)
}
