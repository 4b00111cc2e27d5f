package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/statuspage"
)

// errNoInspector reports a store that cannot list leases.
var errNoInspector = errors.New("the store cannot list leases")

// leasePrefix is the key prefix that the locks argument names: a prefix
// with a hash tag is taken as it is, anything else is under the service's
// keys ({tenant:app}:prefix).
func (s *session) leasePrefix(arg string) string {
	if strings.Contains(arg, "{") {
		return s.unstore(arg)
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
		return writeJSON(s.stdout, s.locksOut(ls))
	}
	if len(ls) == 0 {
		prefix := s.leasePrefix(arg)
		fprintf(s.stderr, "no locks held under %s (%s)\n", prefix, s.storeWhere(prefix))
		return nil
	}
	return s.printLocks(ls)
}

// locksOut describes held leases as /status does.
func (s *session) locksOut(ls []backend.LeaseInfo) []statuspage.Lock {
	out := make([]statuspage.Lock, 0, len(ls))
	for _, l := range ls {
		out = append(out, s.lockOut(l))
	}
	return out
}

// storeWhere says where the store keeps key, or the keys that begin with
// it: "Redis keys baton:{acme:billing}:lock:...".
func (s *session) storeWhere(key string) string {
	sk := s.storeKey(key)
	if sk == key {
		return "the same keys in the " + s.kind + " store"
	}
	if s.kind == "consul" {
		return "Consul KV " + sk
	}
	return "Redis key " + sk
}

// printLocks writes the leases ls as a table, each under the key the
// store keeps it in (STORE KEY: on Redis, with the key prefix).
func (s *session) printLocks(ls []backend.LeaseInfo) error {
	tw := table(s.stdout)
	fprintf(tw, "STORE KEY\tHOLDER\tTOKEN\tTTL %s\tWAITERS\n", strings.ToUpper(s.ttlNote()))
	for _, l := range ls {
		lk := s.lockOut(l)
		waiters := "-"
		if len(lk.Waiters) > 0 {
			quoted := make([]string, len(lk.Waiters))
			for i, w := range lk.Waiters {
				quoted[i] = text(w)
			}
			waiters = fmt.Sprintf("%d: %s", len(lk.Waiters), strings.Join(quoted, ","))
		}
		fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", text(s.storeKey(l.Key)), text(lk.Holder), l.Token, dur(l.TTL), waiters)
	}
	return tw.Flush()
}
