package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/baton-go/baton/backend"
)

// errNoInspector reports a store that cannot list leases.
var errNoInspector = errors.New("the store cannot list leases")

// leasePrefix is the key prefix that the locks argument names: a prefix
// with a hash tag is taken as it is, anything else is under the service's
// keys ({tenant:app}:prefix).
func (s *session) leasePrefix(arg string) string {
	if strings.Contains(arg, "{") {
		return arg
	}
	return backend.AppKey(s.tenant, s.app) + ":" + arg
}

// locksHeld lists the leases held under the service's keys that begin
// with arg (see leasePrefix), the role key left out.
func (s *session) locksHeld(ctx context.Context, arg string) ([]backend.LeaseInfo, error) {
	in, ok := s.store.(backend.Inspector)
	if !ok {
		return nil, fmt.Errorf("the %s store cannot list leases: %w", s.kind, errNoInspector)
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	prefix := s.leasePrefix(arg)
	ls, err := in.Leases(cctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("listing the leases under %s: %w", prefix, err)
	}
	out := ls[:0]
	for _, l := range ls {
		if l.Key != s.roleKey() {
			out = append(out, l)
		}
	}
	return out, nil
}

// locks lists the leases held under the service's keys.
func locks(ctx context.Context, s *session, args []string) error {
	var arg string
	if len(args) > 0 {
		arg = args[0]
	}
	ls, err := s.locksHeld(ctx, arg)
	if err != nil {
		return err
	}
	if s.json() {
		out := make([]leaseJSON, 0, len(ls))
		for _, l := range ls {
			j := leaseOut(l.Lease)
			j.Waiters = l.Waiters
			out = append(out, j)
		}
		return writeJSON(s.stdout, out)
	}
	if len(ls) == 0 {
		fprintf(s.stderr, "no locks held under %s\n", s.leasePrefix(arg))
		return nil
	}
	return s.printLocks(ls)
}

// printLocks writes the leases ls as a table.
func (s *session) printLocks(ls []backend.LeaseInfo) error {
	tw := table(s.stdout)
	fprintf(tw, "KEY\tHOLDER\tTOKEN\tTTL %s\tWAITERS\n", strings.ToUpper(s.ttlNote()))
	for _, l := range ls {
		waiters := "-"
		if len(l.Waiters) > 0 {
			quoted := make([]string, len(l.Waiters))
			for i, w := range l.Waiters {
				quoted[i] = text(w)
			}
			waiters = fmt.Sprintf("%d: %s", len(l.Waiters), strings.Join(quoted, ","))
		}
		fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", text(l.Key), text(instanceOf(l.Owner)), l.Token, dur(l.TTL), waiters)
	}
	return tw.Flush()
}
