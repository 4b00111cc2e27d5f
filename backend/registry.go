package backend

import (
	"context"
	"fmt"
	"time"
)

// Registry is implemented by stores that also keep a list of live members
// per group, each refreshed by heartbeats and expired on the store's
// clock. Groups are keys of the same namespace as leases: name a group
// apart from every lease key (role uses {tenant:app}:members beside
// {tenant:app}:role). The role package uses it to list the instances of a service and
// to detect two live processes that claim one instance ID.
type Registry interface {
	// Heartbeat adds member to group, or refreshes it, for ttl. identity
	// names what the member claims to be (an instance ID); data is opaque
	// (at most MaxMemberData bytes). It returns the names of the other
	// live members of group that claim the same identity: a non-empty
	// result means two processes share one identity.
	Heartbeat(ctx context.Context, group string, m Member, ttl time.Duration) (duplicates []string, err error)

	// Members returns the live members of group, sorted by name.
	Members(ctx context.Context, group string) ([]Member, error)

	// Leave removes member name from group at once. Leaving a group one
	// is not in is not an error; an invalid name is (ErrInvalidArgument).
	Leave(ctx context.Context, group, name string) error
}

// MemberLocator is implemented by Registry stores that can say where a
// member's entry is kept, so that a message can tell an operator what to
// delete: an entry forged, or left by a process that is gone.
type MemberLocator interface {
	// MemberEntry describes, for people, where member name of group is
	// kept in the store and how to delete it.
	MemberEntry(group, name string) string
}

// MaxMemberData bounds Member.Data.
const MaxMemberData = 4096

// Member is one entry of a Registry group.
type Member struct {
	// Name is unique per process, such as a role owner string.
	Name string
	// Identity is what the member claims to be, such as its instance ID.
	Identity string
	// Data is opaque to the store.
	Data []byte
	// Age is how long ago, on the store's clock, the last heartbeat was
	// received. Set by Members.
	Age time.Duration
	// TTL is how long the member has left unless it heartbeats again. Set
	// by Members.
	TTL time.Duration
}

// ValidateMember checks a member's fields for Heartbeat.
func ValidateMember(m Member) error {
	if err := validateName("member name", m.Name, MaxOwnerLen); err != nil {
		return err
	}
	if err := validateName("member identity", m.Identity, MaxOwnerLen); err != nil {
		return err
	}
	if len(m.Data) > MaxMemberData {
		return fmt.Errorf("%w: member %q: data is %d bytes, more than %d", ErrInvalidArgument, m.Name, len(m.Data), MaxMemberData)
	}
	return nil
}
