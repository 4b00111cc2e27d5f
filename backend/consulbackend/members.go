package consulbackend

import (
	"context"
	"fmt"

	"github.com/baton-go/baton/backend"
)

var _ backend.MemberLister = (*Store)(nil)

// MembersUpTo implements backend.MemberLister over Members, which reads
// the whole group (Consul's listings cannot stop early).
func (s *Store) MembersUpTo(ctx context.Context, group string, limit int, first ...string) (backend.MemberList, error) {
	if err := backend.ValidateLimit(limit); err != nil {
		return backend.MemberList{}, fmt.Errorf("consulbackend: members up to: %w", err)
	}
	all, err := s.Members(ctx, group)
	if err != nil {
		return backend.MemberList{}, err
	}
	return backend.PickMembers(all, limit, first...)
}
