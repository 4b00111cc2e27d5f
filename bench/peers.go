package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// Names of the peer implementations.
const (
	RedsyncName   = "redsync"
	RedislockName = "redislock"
	SeedSleepName = "seed-sleep"
)

// SeedRetryInterval is the seed framework's sleep between two tries.
const SeedRetryInterval = time.Second

// RedislockBackoff is redislock's retry interval in the comparison.
const RedislockBackoff = 10 * time.Millisecond

// --- redsync ---------------------------------------------------------------

func redsyncImpl() Impl {
	return Impl{
		Name:  RedsyncName,
		Setup: "redsync/v4 + goredis v9 pool, default options (8 s expiry, 32 tries 50-250 ms apart)",
		Open: func(rdb *redis.Client, _ int) (Client, error) {
			return redsyncClient{rs: redsync.New(goredis.NewPool(rdb))}, nil
		},
	}
}

type redsyncClient struct{ rs *redsync.Redsync }

func (c redsyncClient) Locker(key string) (Locker, error) {
	return redsyncLocker{m: c.rs.NewMutex(key)}, nil
}

func (redsyncClient) Close() error { return nil }

type redsyncLocker struct{ m *redsync.Mutex }

func (l redsyncLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	for {
		err := l.m.LockContext(ctx)
		if err == nil {
			return l.unlock, nil
		}
		if ctx.Err() != nil {
			return nil, errors.Join(err, ctx.Err())
		}
		var taken *redsync.ErrTaken
		var nodeTaken *redsync.ErrNodeTaken
		if errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || errors.As(err, &nodeTaken) {
			continue // its tries ran out while the lock was held: ask again
		}
		return nil, fmt.Errorf("redsync lock %q: %w", l.m.Name(), err)
	}
}

func (l redsyncLocker) unlock(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	if err != nil {
		return fmt.Errorf("redsync unlock %q: %w", l.m.Name(), err)
	}
	if !ok {
		return fmt.Errorf("redsync unlock %q: the lock was not held", l.m.Name())
	}
	return nil
}

// --- redislock -------------------------------------------------------------

func redislockImpl() Impl {
	return Impl{
		Name:  RedislockName,
		Setup: "bsm/redislock, Obtain with a 45 s TTL and LinearBackoff(10ms)",
		Open: func(rdb *redis.Client, _ int) (Client, error) {
			return redislockClient{c: redislock.New(rdb)}, nil
		},
	}
}

type redislockClient struct{ c *redislock.Client }

func (c redislockClient) Locker(key string) (Locker, error) {
	return redislockLocker{c: c.c, key: key}, nil
}

func (redislockClient) Close() error { return nil }

type redislockLocker struct {
	c   *redislock.Client
	key string
}

var redislockOptions = &redislock.Options{RetryStrategy: redislock.LinearBackoff(RedislockBackoff)}

func (l redislockLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	for {
		lock, err := l.c.Obtain(ctx, l.key, HoldTTL, redislockOptions)
		if err == nil {
			return func(ctx context.Context) error {
				if err := lock.Release(ctx); err != nil {
					return fmt.Errorf("redislock release %q: %w", l.key, err)
				}
				return nil
			}, nil
		}
		if ctx.Err() != nil {
			return nil, errors.Join(err, ctx.Err())
		}
		if errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, context.DeadlineExceeded) {
			continue // Obtain gave up (it retries at most one TTL): ask again
		}
		return nil, fmt.Errorf("redislock obtain %q: %w", l.key, err)
	}
}

// --- seed-sleep ------------------------------------------------------------

func seedSleepImpl() Impl {
	return Impl{
		Name:  SeedSleepName,
		Setup: "the seed's loop: SET NX PX 45000, sleep 1 s on failure, plain DEL to unlock",
		Open: func(rdb *redis.Client, n int) (Client, error) {
			return seedClient{rdb: rdb, value: fmt.Sprintf("127.0.0.1:bench:bench:%d", n)}, nil
		},
	}
}

type seedClient struct {
	rdb   *redis.Client
	value string
}

func (c seedClient) Locker(key string) (Locker, error) {
	return seedLocker{rdb: c.rdb, key: key, value: c.value}, nil
}

func (seedClient) Close() error { return nil }

type seedLocker struct {
	rdb        *redis.Client
	key, value string
}

func (l seedLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	var t *time.Timer
	for {
		ok, err := l.rdb.SetNX(ctx, l.key, l.value, HoldTTL).Result()
		if err != nil {
			if ctx.Err() != nil {
				return nil, errors.Join(err, ctx.Err())
			}
			return nil, fmt.Errorf("seed lock %q: %w", l.key, err)
		}
		if ok {
			return l.unlock, nil
		}
		if t == nil {
			t = time.NewTimer(SeedRetryInterval)
			defer t.Stop()
		} else {
			t.Reset(SeedRetryInterval)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// unlock deletes the key whoever holds it, as the seed does.
func (l seedLocker) unlock(ctx context.Context) error {
	if err := l.rdb.Del(ctx, l.key).Err(); err != nil {
		return fmt.Errorf("seed unlock %q: %w", l.key, err)
	}
	return nil
}
