package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/statuspage"
)

// getMaster returns the lease on the service's role key, or nil if the
// key is free.
func (s *session) getMaster(ctx context.Context) (*backend.Lease, error) {
	cctx, cancel := s.call(ctx)
	defer cancel()
	l, err := s.store.Get(cctx, s.roleKey())
	if errors.Is(err, backend.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the master of %s: %w", s.service(), err)
	}
	return &l, nil
}

// listMembers returns the service's members as the role package's
// electors register them, the master (owner of the role key) marked, in
// /status's shape.
func (s *session) listMembers(ctx context.Context, master *backend.Lease) ([]statuspage.Member, error) {
	reg, ok := s.store.(backend.Registry)
	if !ok {
		return nil, fmt.Errorf("the %s store keeps no member list", s.kind)
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	group := backend.AppKey(s.tenant, s.app, "members")
	ms, err := reg.Members(cctx, group)
	if err != nil {
		return nil, fmt.Errorf("listing the members of %s (%s): %w", s.service(), group, err)
	}
	owner := ""
	if master != nil {
		owner = master.Owner
	}
	out := make([]statuspage.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, statuspage.MemberOf(m, owner))
	}
	return out, nil
}

// printMembers writes the members as a table.
func (s *session) printMembers(ms []statuspage.Member) error {
	tw := table(s.stdout)
	fprintf(tw, "ID\tMASTER\tLAST SEEN\tSTARTED\tOWNER\n")
	for _, m := range ms {
		mark, seen, started := "no", "unknown", "-"
		if m.Master {
			mark = "yes"
		}
		if s.kind != "consul" { // Consul cannot tell
			seen = dur(time.Duration(m.LastHeartbeatMillis)*time.Millisecond) + " ago"
		}
		if !m.StartedAt.IsZero() {
			started = m.StartedAt.UTC().Format(time.RFC3339)
		}
		fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", text(m.ID), mark, seen, started, text(m.Owner))
	}
	return tw.Flush()
}

// members lists the live instances of the service.
func members(ctx context.Context, s *session, _ []string) error {
	m, err := s.getMaster(ctx)
	if err != nil {
		return err
	}
	ms, err := s.listMembers(ctx, m)
	if err != nil {
		return err
	}
	if s.json() {
		return writeJSON(s.stdout, ms)
	}
	if len(ms) == 0 {
		fprintf(s.stderr, "no live members of %s\n", s.service())
		return nil
	}
	return s.printMembers(ms)
}

// master prints the master's instance ID and epoch; no master is exit 3.
func master(ctx context.Context, s *session, _ []string) error {
	m, err := s.getMaster(ctx)
	if err != nil {
		return err
	}
	if m == nil {
		if s.json() {
			if err := writeJSON(s.stdout, nil); err != nil {
				return err
			}
		}
		return nof("%s has no master: its role key %s (%s) is free; if the service runs, check the store's address and key prefix (--redis or --consul, --prefix)", s.service(), s.roleKey(), s.storeWhere(s.roleKey()))
	}
	if s.json() {
		return writeJSON(s.stdout, s.masterOut(*m))
	}
	fprintf(s.stdout, "%s epoch %d\n", text(instanceOf(m.Owner)), m.Token)
	return nil
}

// statusJSON is status's JSON output: the service, the master, the
// members and the locks in /status's shapes (statuspage.Status), with
// the store it read them from.
type statusJSON struct {
	Service statuspage.Service `json:"service"`
	Backend string             `json:"backend"`
	Store   string             `json:"store"`
	// KeyPrefix is what the store puts before every key: on Redis,
	// "baton:" (a key {t:a}:role is the Redis key baton:{t:a}:role); on
	// Consul, "baton/lease/".
	KeyPrefix string              `json:"key_prefix,omitempty"`
	Master    *statuspage.Master  `json:"master"`
	Members   []statuspage.Member `json:"members"`
	// Locks are the leases held under the service's keys other than the
	// role, and LocksHeld their number; null when the store cannot list
	// leases (LocksError says so).
	Locks      []statuspage.Lock `json:"locks"`
	LocksHeld  *int              `json:"locks_held"`
	LocksError string            `json:"locks_error,omitempty"`
}

// status prints the master, the members and the number of locks held.
func status(ctx context.Context, s *session, _ []string) error {
	m, err := s.getMaster(ctx)
	if err != nil {
		return err
	}
	ms, err := s.listMembers(ctx, m)
	if err != nil {
		return err
	}
	out := statusJSON{Service: statuspage.Service{Tenant: s.tenant, App: s.app}, Backend: s.kind, Store: s.where,
		KeyPrefix: s.keyPrefix(), Members: ms}
	if m != nil {
		out.Master = s.masterOut(*m)
	}
	held, err := s.locksHeld(ctx, "")
	switch {
	case errors.Is(err, errNoInspector):
		out.LocksError = err.Error()
	case err != nil:
		return err
	default:
		n := len(held)
		out.Locks, out.LocksHeld = s.locksOut(held), &n
	}
	if s.json() {
		return writeJSON(s.stdout, out)
	}
	return s.printStatus(out, m)
}

// keyPrefix is what the store puts before a key of baton's to make the
// key it keeps the lease in, "" when it does not say or the key is not
// merely prefixed (the Spring layout's).
func (s *session) keyPrefix() string {
	role := s.roleKey()
	if p, ok := strings.CutSuffix(s.storeKey(role), role); ok {
		return p
	}
	return ""
}

// printStatus writes status's table: m is the role lease, nil if free.
func (s *session) printStatus(out statusJSON, m *backend.Lease) error {
	fprintf(s.stdout, "service  %s\n", s.service())
	fprintf(s.stdout, "store    %s at %s\n", s.kind, s.where)
	fprintf(s.stdout, "role key %s (%s)\n", s.roleKey(), s.storeWhere(s.roleKey()))
	if m != nil {
		fprintf(s.stdout, "master   %s (epoch %d, lease %s %s)\n", text(instanceOf(m.Owner)), m.Token, dur(m.TTL), s.ttlNote())
	} else {
		fprintf(s.stdout, "master   none (%s is free)\n", s.roleKey())
	}
	if out.LocksHeld != nil {
		fprintf(s.stdout, "locks    %d held\n", *out.LocksHeld)
	} else {
		fprintf(s.stdout, "locks    unknown (the %s store cannot list leases)\n", s.kind)
	}
	fprintf(s.stdout, "members  %d\n", len(out.Members))
	if len(out.Members) == 0 {
		return nil
	}
	fprintf(s.stdout, "\n")
	return s.printMembers(out.Members)
}
