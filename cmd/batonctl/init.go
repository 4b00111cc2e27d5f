package main

import (
	"context"
	"fmt"

	"github.com/baton-go/baton/backend"
)

// declarer is a store whose restart guard an operator can tell that its
// data is whole (redisbackend and consulbackend's DeclareIntact).
type declarer interface {
	DeclareIntact(ctx context.Context, keys ...string) error
}

// initJSON is init's JSON output.
type initJSON struct {
	Store    string `json:"store"`
	Tenant   string `json:"tenant"`
	App      string `json:"app"`
	Declared bool   `json:"declared"`
}

// initStore declares the store's baton data whole for the service's
// tenant (on a Redis Cluster, for the service), so that its grants skip
// the restart guard's wait: after a confirmation unless --yes. It is for
// a store an operator knows holds no live lease: a new one, or one whose
// every holder has stopped.
func initStore(ctx context.Context, s *session, _ []string) error {
	d, ok := s.store.(declarer)
	if !ok {
		return fmt.Errorf("the %s store has no restart guard to declare: its grants never wait for one", s.kind)
	}
	if !s.o.yes {
		q := fmt.Sprintf("Declare the baton data of tenant %s on %s (%s) whole? Its services' new keys are then granted at once, "+
			"without waiting out leases the store may have lost: do this only on a store that holds no live lease (a new store, or one whose every holder has stopped). Type yes to declare: ",
			s.tenant, s.where, s.kind)
		if err := s.confirm(q, "declared"); err != nil {
			return err
		}
	}
	cctx, cancel := s.call(ctx)
	err := d.DeclareIntact(cctx, backend.AppKey(s.tenant, s.app))
	cancel()
	if err != nil {
		return fmt.Errorf("declaring %s whole: %w", s.where, err)
	}
	if s.json() {
		return writeJSON(s.stdout, initJSON{Store: s.where, Tenant: s.tenant, App: s.app, Declared: true})
	}
	fprintf(s.stdout, "declared the baton data of tenant %s on %s (%s) whole: new keys of its services are granted at once, until the store restarts without its data or loses it "+
		"(on a Redis Cluster, of service %s only: run init for each service)\n", s.tenant, s.where, s.kind, s.app)
	return nil
}
