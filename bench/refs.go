package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Names of the reference implementations: the least a fenced lock and an
// owner-checked poller need, written here, not taken from a library.
const (
	FencedMinName = "fenced-min"
	PollerName    = "poller-1ms"
)

// PollerInterval is the poller's sleep between two tries.
const PollerInterval = time.Millisecond

// The minimal fenced lock's two scripts. Acquire sets the key if it is
// free and then increments its fencing counter, in one script, so that
// every holder gets a token; it replies with the token, or nil when the
// key is held. Release deletes the key only for its owner.
var (
	fencedAcquire = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return false
`)
	ownerRelease = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)
)

// ownerSeq numbers the lock objects of a process, so that each has an
// owner value of its own.
var ownerSeq atomic.Int64

func fencedMinImpl() Impl {
	return Impl{
		Name:  FencedMinName,
		Setup: "one script SET NX PX 45000 + INCR of the fence counter; release by compare-and-delete; 10 ms between tries",
		Open: func(rdb *redis.Client, n int) (Client, error) {
			return minimalClient{rdb: rdb, n: n, fenced: true, retry: RedislockBackoff}, nil
		},
	}
}

func pollerImpl() Impl {
	return Impl{
		Name:  PollerName,
		Setup: "SET NX PX 45000, 1 ms between tries; release by compare-and-delete",
		Open: func(rdb *redis.Client, n int) (Client, error) {
			return minimalClient{rdb: rdb, n: n, retry: PollerInterval}, nil
		},
	}
}

// minimalClient opens the lock objects of both references: fenced or not,
// and how long they sleep after a refused try.
type minimalClient struct {
	rdb    *redis.Client
	n      int
	fenced bool
	retry  time.Duration
}

func (c minimalClient) Locker(key string) (Locker, error) {
	owner := fmt.Sprintf("bench-%d-%d", c.n, ownerSeq.Add(1))
	return &minimalLocker{c: c, key: key, fence: key + ":fence", owner: owner}, nil
}

func (minimalClient) Close() error { return nil }

type minimalLocker struct {
	c                 minimalClient
	key, fence, owner string
	token             int64 // the fenced lock's last token
}

func (l *minimalLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	var t *time.Timer
	for {
		ok, err := l.try(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil, errors.Join(err, ctx.Err())
			}
			return nil, err
		}
		if ok {
			return l.unlock, nil
		}
		if t == nil {
			t = time.NewTimer(l.c.retry)
			defer t.Stop()
		} else {
			t.Reset(l.c.retry)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// try makes one attempt and reports whether it got the lock.
func (l *minimalLocker) try(ctx context.Context) (bool, error) {
	ms := HoldTTL.Milliseconds()
	if !l.c.fenced {
		ok, err := l.c.rdb.SetNX(ctx, l.key, l.owner, HoldTTL).Result()
		if err != nil {
			return false, fmt.Errorf("%s lock %q: %w", PollerName, l.key, err)
		}
		return ok, nil
	}
	tok, err := fencedAcquire.Run(ctx, l.c.rdb, []string{l.key, l.fence}, l.owner, ms).Int64()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s lock %q: %w", FencedMinName, l.key, err)
	}
	if tok <= l.token {
		return false, fmt.Errorf("%s lock %q: token %d after %d: the fence went back", FencedMinName, l.key, tok, l.token)
	}
	l.token = tok
	return true, nil
}

func (l *minimalLocker) unlock(ctx context.Context) error {
	n, err := ownerRelease.Run(ctx, l.c.rdb, []string{l.key}, l.owner).Int64()
	if err != nil {
		return fmt.Errorf("unlock %q: %w", l.key, err)
	}
	if n != 1 {
		return fmt.Errorf("unlock %q: the lock was not held by %s", l.key, l.owner)
	}
	return nil
}
