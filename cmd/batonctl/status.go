package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/baton-go/baton/backend"
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

// memberJSON is a member in JSON output.
type memberJSON struct {
	ID     string `json:"id"`
	Owner  string `json:"owner"`
	Master bool   `json:"master"`
	// LastSeenMillis is how long ago its last heartbeat arrived; absent
	// on Consul, which cannot tell.
	LastSeenMillis *int64 `json:"last_seen_ms,omitempty"`
	// TTLMillis is how long it stays listed without another heartbeat.
	TTLMillis int64      `json:"ttl_ms"`
	Started   *time.Time `json:"started,omitempty"`
}

// listMembers returns the service's members as the role package's
// electors register them, the master (owner of the role key) marked.
func (s *session) listMembers(ctx context.Context, master *backend.Lease) ([]memberJSON, error) {
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
	out := make([]memberJSON, 0, len(ms))
	for _, m := range ms {
		j := memberJSON{ID: m.Identity, Owner: m.Name, Master: master != nil && master.Owner == m.Name, TTLMillis: m.TTL.Milliseconds()}
		if s.kind != "consul" {
			age := m.Age.Milliseconds()
			j.LastSeenMillis = &age
		}
		var data struct {
			Started time.Time `json:"started"`
		}
		if json.Unmarshal(m.Data, &data) == nil && !data.Started.IsZero() {
			started := data.Started.UTC()
			j.Started = &started
		}
		out = append(out, j)
	}
	return out, nil
}

// printMembers writes the members as a table.
func (s *session) printMembers(ms []memberJSON) error {
	tw := table(s.stdout)
	fprintf(tw, "ID\tMASTER\tLAST SEEN\tSTARTED\tOWNER\n")
	for _, m := range ms {
		mark, seen, started := "no", "unknown", "-"
		if m.Master {
			mark = "yes"
		}
		if m.LastSeenMillis != nil {
			seen = dur(time.Duration(*m.LastSeenMillis)*time.Millisecond) + " ago"
		}
		if m.Started != nil {
			started = m.Started.Format(time.RFC3339)
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
		return nof("%s has no master: its role key %s is free", s.service(), s.roleKey())
	}
	if s.json() {
		return writeJSON(s.stdout, masterOut(*m))
	}
	fprintf(s.stdout, "%s epoch %d\n", text(instanceOf(m.Owner)), m.Token)
	return nil
}

// statusJSON is status's JSON output.
type statusJSON struct {
	Tenant  string       `json:"tenant"`
	App     string       `json:"app"`
	Backend string       `json:"backend"`
	Store   string       `json:"store"`
	Master  *masterJSON  `json:"master"`
	Members []memberJSON `json:"members"`
	// LocksHeld is the number of leases held under the service's keys
	// other than the role; null when the store cannot list leases.
	LocksHeld *int `json:"locks_held"`
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
	out := statusJSON{Tenant: s.tenant, App: s.app, Backend: s.kind, Store: s.where, Members: ms}
	if m != nil {
		out.Master = masterOut(*m)
	}
	held, err := s.locksHeld(ctx, "")
	switch {
	case errors.Is(err, errNoInspector):
	case err != nil:
		return err
	default:
		n := len(held)
		out.LocksHeld = &n
	}
	if s.json() {
		return writeJSON(s.stdout, out)
	}
	fprintf(s.stdout, "service  %s\n", s.service())
	fprintf(s.stdout, "store    %s at %s\n", s.kind, s.where)
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
	fprintf(s.stdout, "members  %d\n", len(ms))
	if len(ms) == 0 {
		return nil
	}
	fprintf(s.stdout, "\n")
	return s.printMembers(ms)
}
