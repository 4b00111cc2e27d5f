package backend

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
)

// MemberLister is implemented by registries that can list a bounded part
// of a group, for pages read again and again: its work is bounded by
// limit, not by the size of the group.
type MemberLister interface {
	// MembersUpTo returns at most limit (at least 1, else
	// ErrInvalidArgument) live members of group, sorted by name: first
	// those that claim one of the identities in first, then those whose
	// entries expire last (the most recently refreshed, when members
	// share a TTL). More is how many other live members the group has.
	MembersUpTo(ctx context.Context, group string, limit int, first ...string) (MemberList, error)
}

// MemberList is what MemberLister.MembersUpTo lists.
type MemberList struct {
	// Members are at most the limit asked for, sorted by name.
	Members []Member
	// More is how many other live members the group has.
	More int
}

// MembersUpTo is MemberLister.MembersUpTo for a registry whose Members
// reads the whole group anyway (in memory; Consul, whose listings cannot
// stop early): it keeps the members that claim an identity in first,
// then those with the most TTL left, at most limit in all, sorted by
// name.
func MembersUpTo(ctx context.Context, r Registry, group string, limit int, first ...string) (MemberList, error) {
	if err := ValidateLimit(limit); err != nil {
		return MemberList{}, fmt.Errorf("members up to %q: %w", group, err)
	}
	all, err := r.Members(ctx, group)
	if err != nil {
		return MemberList{}, err
	}
	ms := slices.Clone(all)
	rank := func(m Member) int {
		if slices.Contains(first, m.Identity) {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(ms, func(a, b Member) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), cmp.Compare(b.TTL, a.TTL), strings.Compare(a.Name, b.Name))
	})
	out := MemberList{Members: ms[:min(limit, len(ms))], More: max(len(ms)-limit, 0)}
	slices.SortFunc(out.Members, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
