package consulbackend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

var _ backend.Registry = (*Store)(nil)

// A member of group G is the KV entry "<prefix>/members/G/<name>" (G and
// the name path-escaped, so that no group lists another's members),
// locked by a session of its own whose TTL is the heartbeat's ttl. A
// heartbeat renews the session; the entry is deleted when the session
// runs out, between ttl and 2 x ttl after the last heartbeat.

// memberRecord is the JSON value of a member entry.
type memberRecord struct {
	Identity  string `json:"identity"`
	Data      []byte `json:"data,omitempty"`
	TTLMillis int64  `json:"ttl_ms"`
}

// MemberKey returns the Consul KV key of member name of group.
func (s *Store) MemberKey(group, name string) string {
	return s.memberPrefix(group) + url.PathEscape(name)
}

func (s *Store) memberPrefix(group string) string {
	return s.prefix + "/members/" + url.PathEscape(group) + "/"
}

var _ backend.MemberLocator = (*Store)(nil)

// MemberEntry implements backend.MemberLocator: the member's KV entry.
func (s *Store) MemberEntry(group, name string) string {
	k := s.MemberKey(group, name)
	return fmt.Sprintf("the Consul KV key %q (consul kv delete %s)", k, k)
}

// Heartbeat implements backend.Registry. Members reports, as each
// member's TTL, the ttl of its last heartbeat, and an Age of 0: Consul
// cannot tell how long ago a session was renewed.
func (s *Store) Heartbeat(ctx context.Context, group string, m backend.Member, ttl time.Duration) ([]string, error) {
	if err := s.begin(ctx, "heartbeat", group); err != nil {
		return nil, err
	}
	if err := errors.Join(backend.ValidateMember(m), s.validateSessionTTL("ttl", ttl)); err != nil {
		return nil, fmt.Errorf("consulbackend: heartbeat: %w", err)
	}
	ttl = backend.RoundUpMillis(ttl)
	rec := memberRecord{Identity: m.Identity, Data: m.Data, TTLMillis: ttl.Milliseconds()}
	value, _ := json.Marshal(rec) // strings, bytes and a number cannot fail
	key := s.MemberKey(group, m.Name)

	p, _, err := s.kv.Get(key, s.queryOpts(ctx))
	if err != nil {
		return nil, s.transport("heartbeat", group, ctx, err)
	}
	renewed := false
	if p != nil && p.Session != "" && bytes.Equal(p.Value, value) {
		entry, _, err := s.session.Renew(p.Session, s.writeOpts(ctx))
		if err != nil {
			return nil, s.transport("heartbeat", group, ctx, fmt.Errorf("renew session: %w", err))
		}
		renewed = entry != nil
	}
	if !renewed {
		// New, lapsed, or sent other data or another ttl: a fresh
		// session, and the entry locked with it.
		if err := s.join(ctx, group, m.Name, key, p, value, ttl); err != nil {
			return nil, err
		}
	}
	all, err := s.members(ctx, "heartbeat", group)
	if err != nil {
		return nil, err
	}
	var dups []string
	for _, o := range all {
		if o.Name != m.Name && o.Identity == m.Identity {
			dups = append(dups, o.Name)
		}
	}
	return dups, nil
}

// join locks the member entry key with a new session of ttl, replacing
// the entry p read before (if any) only if it is unchanged.
func (s *Store) join(ctx context.Context, group, name, key string, p *api.KVPair, value []byte, ttl time.Duration) error {
	sess, err := s.createSession(ctx, "heartbeat", group, name, ttl)
	if err != nil {
		return err
	}
	var ops api.TxnOps
	if p != nil {
		ops = append(ops,
			&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVCheckIndex, Key: key, Index: p.ModifyIndex}},
			&api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVDelete, Key: key}})
	}
	ops = append(ops, &api.TxnOp{KV: &api.KVTxnOp{Verb: api.KVLock, Key: key, Value: value, Session: sess}})
	ok, resp, _, err := s.txn.Txn(ops, s.queryOpts(ctx))
	if err != nil || !ok {
		s.destroySession(ctx, sess)
		if err != nil {
			return s.transport("heartbeat", group, ctx, err)
		}
		if len(resp.Errors) == 0 {
			return s.txnFailed("heartbeat", group, resp)
		}
		// Another heartbeat of the same member won the race; its
		// entry stands.
		return nil
	}
	if p != nil && p.Session != "" {
		s.destroySession(ctx, p.Session)
	}
	return nil
}

// Members implements backend.Registry.
func (s *Store) Members(ctx context.Context, group string) ([]backend.Member, error) {
	if err := s.begin(ctx, "members", group); err != nil {
		return nil, err
	}
	return s.members(ctx, "members", group)
}

func (s *Store) members(ctx context.Context, op, group string) ([]backend.Member, error) {
	pairs, _, err := s.kv.List(s.memberPrefix(group), s.queryOpts(ctx))
	if err != nil {
		return nil, s.transport(op, group, ctx, err)
	}
	return s.decodeMembers(op, group, pairs)
}

// decodeMembers decodes the live entries of group's members.
func (s *Store) decodeMembers(op, group string, pairs api.KVPairs) ([]backend.Member, error) {
	prefix := s.memberPrefix(group)
	out := make([]backend.Member, 0, len(pairs))
	for _, p := range pairs {
		if p.Session == "" {
			continue // its session ended; the entry is going
		}
		name, err := url.PathUnescape(strings.TrimPrefix(p.Key, prefix))
		var rec memberRecord
		if err == nil {
			err = json.Unmarshal(p.Value, &rec)
		}
		if err == nil {
			err = errors.Join(backend.ValidateMember(backend.Member{Name: name, Identity: rec.Identity, Data: rec.Data}),
				backend.ValidateTTL("ttl", time.Duration(rec.TTLMillis)*time.Millisecond))
		}
		if err != nil {
			return nil, fmt.Errorf("consulbackend: %s %q: %w: entry %s is not a baton member: %s", op, group, backend.ErrCorrupt, backend.Printable(p.Key), backend.Printable(err.Error()))
		}
		out = append(out, backend.Member{Name: name, Identity: rec.Identity, Data: rec.Data, TTL: time.Duration(rec.TTLMillis) * time.Millisecond})
	}
	slices.SortFunc(out, func(a, b backend.Member) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Leave implements backend.Registry.
func (s *Store) Leave(ctx context.Context, group, name string) error {
	if err := s.begin(ctx, "leave", group); err != nil {
		return err
	}
	if err := backend.ValidateOwner(name); err != nil {
		return fmt.Errorf("consulbackend: leave: member %w", err)
	}
	key := s.MemberKey(group, name)
	p, _, err := s.kv.Get(key, s.queryOpts(ctx))
	if err != nil {
		return s.transport("leave", group, ctx, err)
	}
	if p == nil {
		return nil
	}
	ok, _, err := s.kv.DeleteCAS(p, s.writeOpts(ctx))
	if err != nil {
		return s.transport("leave", group, ctx, err)
	}
	if ok && p.Session != "" {
		s.destroySession(ctx, p.Session)
	}
	return nil
}
