package membackend

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baton-go/baton/backend"
)

var _ backend.Registry = (*Store)(nil)

type member struct {
	identity string
	data     []byte
	seen     time.Time
	expires  time.Time
}

// Heartbeat implements backend.Registry.
func (s *Store) Heartbeat(ctx context.Context, group string, m backend.Member, ttl time.Duration) ([]string, error) {
	if err := s.check(ctx, "heartbeat", group); err != nil {
		return nil, err
	}
	if err := s.validGroup("heartbeat", group); err != nil {
		return nil, err
	}
	if err := backend.ValidateMember(m); err != nil {
		return nil, fmt.Errorf("membackend: heartbeat: %w", err)
	}
	if err := backend.ValidateTTL("ttl", ttl); err != nil {
		return nil, fmt.Errorf("membackend: heartbeat: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	g := s.groupLocked(group, now)
	var dups []string
	for name, o := range g {
		if name != m.Name && o.identity == m.Identity {
			dups = append(dups, name)
		}
	}
	slices.Sort(dups)
	g[m.Name] = &member{identity: m.Identity, data: slices.Clone(m.Data), seen: now, expires: now.Add(backend.RoundUpMillis(ttl))}
	return dups, nil
}

// Members implements backend.Registry.
func (s *Store) Members(ctx context.Context, group string) ([]backend.Member, error) {
	if err := s.check(ctx, "members", group); err != nil {
		return nil, err
	}
	if err := s.validGroup("members", group); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return nil, err
	}
	now := s.clock.Now()
	g := s.groupLocked(group, now)
	out := make([]backend.Member, 0, len(g))
	for name, o := range g {
		out = append(out, backend.Member{Name: name, Identity: o.identity, Data: slices.Clone(o.data), Age: now.Sub(o.seen), TTL: o.expires.Sub(now)})
	}
	slices.SortFunc(out, func(a, b backend.Member) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Leave implements backend.Registry.
func (s *Store) Leave(ctx context.Context, group, name string) error {
	if err := s.check(ctx, "leave", group); err != nil {
		return err
	}
	if err := s.validGroup("leave", group); err != nil {
		return err
	}
	if err := backend.ValidateOwner(name); err != nil {
		return fmt.Errorf("membackend: leave: member name: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return err
	}
	delete(s.members[group], name)
	return nil
}

func (s *Store) validGroup(op, group string) error {
	if err := backend.ValidateKey(group); err != nil {
		return fmt.Errorf("membackend: %s: group: %w", op, err)
	}
	return nil
}

// groupLocked returns group's live members, dropping expired ones.
func (s *Store) groupLocked(group string, now time.Time) map[string]*member {
	g := s.members[group]
	if g == nil {
		g = make(map[string]*member)
		s.members[group] = g
	}
	for name, m := range g {
		if !now.Before(m.expires) {
			delete(g, name)
		}
	}
	return g
}
