package redisbackend

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/baton-go/baton/backend"
)

var _ backend.Registry = (*Store)(nil)

// A group G is kept in three keys sharing G's hash tag: the sorted set
// "<prefix>:G" (member name -> expiry in server milliseconds), the hash
// "<prefix>:G:member-data" (name -> "seen-ms\nidentity\ndata") and the hash
// "<prefix>:G:member-ids" (identity -> the space-separated names that claim
// it), which finds two live members with one identity without a scan. All three
// expire when the group stops heartbeating. Each call purges at most 100
// expired members, so its cost stays bounded.
const (
	memberDataSuffix = ":member-data"
	memberIDsSuffix  = ":member-ids"
)

func (s *Store) groupKeys(group string) []string {
	k := s.LeaseKey(group)
	return []string{k, k + memberDataSuffix, k + memberIDsSuffix}
}

var _ backend.MemberLocator = (*Store)(nil)

// MemberEntry implements backend.MemberLocator: the member of the
// group's sorted set, and its data beside it (the group's next heartbeat
// tidies the list of names per identity).
func (s *Store) MemberEntry(group, name string) string {
	k := s.LeaseKey(group)
	return fmt.Sprintf("member %q of the Redis sorted set %q (ZREM %s %s; HDEL %s%s %s)", name, k, k, name, k, memberDataSuffix, name)
}

// Heartbeat implements backend.Registry.
func (s *Store) Heartbeat(ctx context.Context, group string, m backend.Member, ttl time.Duration) ([]string, error) {
	if err := s.begin(ctx, "heartbeat", group); err != nil {
		return nil, err
	}
	if err := backend.ValidateMember(m); err != nil {
		return nil, fmt.Errorf("redisbackend: heartbeat: %w", err)
	}
	if err := backend.ValidateTTL("ttl", ttl); err != nil {
		return nil, fmt.Errorf("redisbackend: heartbeat: %w", err)
	}
	res, err := s.scripts.heartbeat.run(ctx, s.rdb, s.groupKeys(group),
		m.Name, m.Identity, string(m.Data), backend.RoundUpMillis(ttl).Milliseconds()).StringSlice()
	if err != nil {
		return nil, s.groupTransport("heartbeat", group, ctx, err)
	}
	if len(res) < 1 || res[0] != "ok" {
		return nil, corruptReply("heartbeat", group, res)
	}
	dups := res[1:]
	if len(dups) == 0 {
		return nil, nil
	}
	for _, d := range dups {
		if err := backend.CheckStoredName("member name", s.groupKeys(group)[2], d); err != nil {
			return nil, fmt.Errorf("redisbackend: heartbeat %q: %w", group, err)
		}
	}
	slices.Sort(dups)
	return dups, nil
}

// Members implements backend.Registry.
func (s *Store) Members(ctx context.Context, group string) ([]backend.Member, error) {
	if err := s.begin(ctx, "members", group); err != nil {
		return nil, err
	}
	res, err := s.scripts.members.run(ctx, s.rdb, s.groupKeys(group)).StringSlice()
	if err != nil {
		return nil, s.groupTransport("members", group, ctx, err)
	}
	return parseMembers(group, res)
}

// parseMembers reads the members script's reply: "ok", the server's time
// in ms, then name, expiry (ms, the sorted set's score) and entry
// ("<seen ms>\n<identity>\n<data>") for each member.
func parseMembers(group string, res []string) ([]backend.Member, error) {
	if len(res) < 2 || res[0] != "ok" || (len(res)-2)%3 != 0 {
		return nil, corruptReply("members", group, res)
	}
	now, err := strconv.ParseInt(res[1], 10, 64)
	if err != nil {
		return nil, corruptReply("members", group, res)
	}
	out := make([]backend.Member, 0, (len(res)-2)/3)
	for i := 2; i < len(res); i += 3 {
		m, ok := memberEntry(now, res[i+1], res[i+2])
		if !ok {
			return nil, fmt.Errorf("redisbackend: members %q: %w: member %q has no readable entry; delete the group's keys", group, backend.ErrCorrupt, res[i])
		}
		if err := checkMember(group, res[i], m.Identity); err != nil {
			return nil, fmt.Errorf("redisbackend: members %q: %w", group, err)
		}
		m.Name = res[i]
		out = append(out, m)
	}
	// ZRANGEBYSCORE orders by expiry; the interface promises name order.
	sortMembers(out)
	return out, nil
}

// memberEntry reads a member's expiry and entry as the members script
// returns them, by the server's time now (all in ms): its identity, data,
// age and the time it has left. It reports false for anything baton does
// not write.
func memberEntry(now int64, expiry, entry string) (backend.Member, bool) {
	exp, err1 := strconv.ParseFloat(expiry, 64)
	inRange := !math.IsNaN(exp) && exp >= math.MinInt64/2 && exp <= math.MaxInt64/2
	seenText, rest, ok1 := strings.Cut(entry, "\n")
	ident, data, ok2 := strings.Cut(rest, "\n")
	seen, err2 := strconv.ParseInt(seenText, 10, 64)
	age, ok3 := millis(now - seen)
	left, ok4 := millis(int64(exp) - now)
	if seen > now {
		age, ok3 = 0, true // the entry's clock ran ahead: seen just now
	}
	if exp < float64(now) {
		left, ok4 = 0, true // expired; the script drops it next time
	}
	if err1 != nil || !inRange || err2 != nil || !ok1 || !ok2 || !ok3 || !ok4 {
		return backend.Member{}, false
	}
	return backend.Member{Identity: ident, Data: []byte(data), Age: age, TTL: left}, true
}

// checkMember checks the name and identity of a member of group read
// back (backend.CheckStoredName).
func checkMember(group, name, identity string) error {
	if err := backend.CheckStoredName("member name", "group "+group, name); err != nil {
		return err
	}
	return backend.CheckStoredName("member identity", "group "+group, identity)
}

// Leave implements backend.Registry.
func (s *Store) Leave(ctx context.Context, group, name string) error {
	if err := s.begin(ctx, "leave", group); err != nil {
		return err
	}
	if err := backend.ValidateOwner(name); err != nil {
		return fmt.Errorf("redisbackend: leave: %w", err)
	}
	if err := s.scripts.leave.run(ctx, s.rdb, s.groupKeys(group), name).Err(); err != nil {
		return s.groupTransport("leave", group, ctx, err)
	}
	return nil
}

// groupTransport is transport for a call on group's keys.
func (s *Store) groupTransport(op, group string, ctx context.Context, err error) error {
	return s.transportOn(op, group, strings.Join(s.groupKeys(group), ", "), ctx, err)
}

func corruptReply(op, key string, res []string) error {
	detail := fmt.Sprint(res)
	if len(res) >= 2 && res[0] == "corrupt" {
		detail = res[1]
	}
	return fmt.Errorf("redisbackend: %s %q: %w: %s; delete the key or use another prefix", op, key, backend.ErrCorrupt, backend.Printable(detail))
}
