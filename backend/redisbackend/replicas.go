package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
)

// ErrNotReplicated reports that a grant (Acquire or Renew) reached fewer
// replicas than WithReplicaAck asks for within its timeout. An Acquire that
// fails so is undone; a Renew is not (the lease on the master stays as it
// was extended), but its caller should treat it as failed.
var ErrNotReplicated = errors.New("grant not acknowledged by enough replicas")

// WithReplicaAck makes every grant wait, with WAIT, until at least n
// replicas acknowledge it, at most timeout. A grant that only the master
// holds can be lost in a failover, letting a second holder in; with n >= 1
// a Sentinel failover to an acknowledging replica keeps it. Not for Redis
// Cluster clients (WAIT cannot be routed with a cluster pipeline).
//
// Such a store does not hand a released key to the first waiter (the
// releasing client could not wait for the grantee's acknowledgement):
// AwaitHandover fails with errors.ErrUnsupported, and a release keeps the
// key for that waiter, which claims it with a grant of its own.
func WithReplicaAck(n int, timeout time.Duration) Option {
	return func(s *Store) error {
		if n < 1 || timeout <= 0 {
			return fmt.Errorf("redisbackend: %w: WithReplicaAck(%d, %v) needs n >= 1 and a positive timeout", backend.ErrInvalidArgument, n, timeout)
		}
		if _, ok := s.rdb.(*redis.ClusterClient); ok {
			return fmt.Errorf("redisbackend: %w: WithReplicaAck is not supported on a Redis Cluster client", backend.ErrInvalidArgument)
		}
		s.replicas, s.replicaWait = n, timeout
		return nil
	}
}

// grant runs a granting script; with WithReplicaAck it sends WAIT on the
// same connection, in one pipeline, and checks the count.
func (s *Store) grant(ctx context.Context, script *script, key string, args ...any) (any, error) {
	if s.replicas == 0 {
		return s.run(ctx, script, key, args...).Result()
	}
	keys, all := s.leaseKeys(key), scriptArgs(s.settings, args...)
	res, acked, err := s.grantAndWait(ctx, script.send, keys, all...)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// The server does not have the script yet: send it whole, with
		// EVAL (which caches it), as the store's other calls do. SCRIPT
		// LOAD is not among the commands of ACLRules.
		res, acked, err = s.grantAndWait(ctx, func(ctx context.Context, pipe redis.Pipeliner, keys []string, args ...any) *redis.Cmd {
			return script.lua.Eval(ctx, pipe, keys, args...)
		}, keys, all...)
	}
	if err != nil {
		return nil, err
	}
	if succeeded(res) && acked < int64(s.replicas) {
		return res, &replicationError{acked: acked, want: s.replicas}
	}
	return res, nil
}

// grantAndWait queues the grant with send, then WAIT, in one pipeline,
// and returns the grant's reply and how many replicas acknowledged it.
func (s *Store) grantAndWait(ctx context.Context, send func(context.Context, redis.Pipeliner, []string, ...any) *redis.Cmd, keys []string, args ...any) (any, int64, error) {
	pipe := s.rdb.Pipeline()
	eval := send(ctx, pipe, keys, args...)
	wait := pipe.Do(ctx, "WAIT", s.replicas, s.replicaWait.Milliseconds())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		if eval.Err() != nil {
			return nil, 0, eval.Err()
		}
		return nil, 0, err
	}
	res, err := eval.Result()
	if err != nil {
		return nil, 0, err
	}
	acked, err := wait.Int64()
	if err != nil {
		return nil, 0, err
	}
	return res, acked, nil
}

type replicationError struct {
	acked int64
	want  int
}

func (e *replicationError) Error() string {
	return fmt.Sprintf("%v: %d of %d replicas acknowledged", ErrNotReplicated, e.acked, e.want)
}

func (e *replicationError) Unwrap() error { return ErrNotReplicated }
