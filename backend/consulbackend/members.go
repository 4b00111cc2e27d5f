package consulbackend

import (
	"context"

	"github.com/baton-go/baton/backend"
)

var _ backend.MemberLister = (*Store)(nil)

// MembersUpTo implements backend.MemberLister over Members, which reads
// the whole group (Consul's listings cannot stop early).
func (s *Store) MembersUpTo(ctx context.Context, group string, limit int, first ...string) (backend.MemberList, error) {
	return backend.MembersUpTo(ctx, s, group, limit, first...)
}
