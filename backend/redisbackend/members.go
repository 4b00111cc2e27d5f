package redisbackend

import (
	"context"
	"fmt"
	"strconv"

	"github.com/baton-go/baton/backend"
)

var _ backend.MemberLister = (*Store)(nil)

// MembersUpTo implements backend.MemberLister with one read-only script
// whose calls are bounded by limit: the members that claim an identity in
// first, then the group's sorted set read from its latest expiry down,
// and a count of the live members (ZCOUNT, needs Redis 6.2 for the
// reverse range by score). It skips the purge of expired members that
// Members does, leaving it to the heartbeats.
func (s *Store) MembersUpTo(ctx context.Context, group string, limit int, first ...string) (backend.MemberList, error) {
	if err := s.begin(ctx, "members up to", group); err != nil {
		return backend.MemberList{}, err
	}
	if err := backend.ValidateLimit(limit); err != nil {
		return backend.MemberList{}, fmt.Errorf("redisbackend: members up to: %w", err)
	}
	args := []any{limit}
	for _, id := range first {
		args = append(args, id)
	}
	res, err := s.scripts.top.run(ctx, s.rdb, s.groupKeys(group), args...).StringSlice()
	if err != nil {
		return backend.MemberList{}, s.groupTransport("members up to", group, ctx, err)
	}
	if len(res) < 3 || res[0] != "ok" {
		return backend.MemberList{}, corruptReply("members up to", group, res)
	}
	more, err := strconv.Atoi(res[2])
	if err != nil || more < 0 {
		return backend.MemberList{}, corruptReply("members up to", group, res)
	}
	ms, err := parseMembers(group, append([]string{res[0], res[1]}, res[3:]...))
	return backend.MemberList{Members: ms, More: more}, err
}
