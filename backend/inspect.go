package backend

import "context"

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
