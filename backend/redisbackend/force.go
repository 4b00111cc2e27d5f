package redisbackend

import (
	"context"
	"fmt"
	"strconv"

	"github.com/baton-go/baton/backend"
)

var _ backend.Breaker = (*Store)(nil)

// Break implements backend.Breaker with one script (lua/break.lua): if
// the lease on key is the grant named, it moves the key's fencing counter
// past the broken token and the server's clock, deletes the lease and its
// mailbox, and hands the key to the first live waiter in line or
// publishes its release, as the owner's Release would. A store made
// WithReplicaAck does not wait for replicas here: a failover that loses
// the break brings the old lease back, which its holder still believes
// in anyway.
func (s *Store) Break(ctx context.Context, key, owner string, token uint64) (backend.Lease, error) {
	if err := s.begin(ctx, "break", key); err != nil {
		return backend.Lease{}, err
	}
	if err := backend.ValidateOwner(owner); err != nil {
		return backend.Lease{}, fmt.Errorf("redisbackend: break: %w", err)
	}
	r, err := s.call(ctx, "break", s.scripts.breakLease, key, backend.Lease{Key: key}, owner, strconv.FormatUint(token, 10))
	if err != nil {
		return backend.Lease{}, err
	}
	switch r.status {
	case statusOK:
		return r.lease, nil
	case statusHeld:
		return backend.Lease{}, fmt.Errorf("redisbackend: break: %w", &backend.ChangedError{Key: key, Owner: owner, Token: token, Holder: r.lease})
	case statusFree:
		return backend.Lease{}, fmt.Errorf("redisbackend: break %q: %w", key, backend.ErrNotFound)
	}
	return backend.Lease{}, r.unexpected("break", key)
}
