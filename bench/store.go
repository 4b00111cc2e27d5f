package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
)

// StoreName is the name of the diagnostic run of baton's Redis store
// without synclock.
const StoreName = "baton-store"

// storeImpl drives redisbackend.Store as synclock does on the way to a
// lock, minus synclock: a place in the key's line, the handover, and the
// owner-checked release, with no local queue, section context, lease
// timer or events. Set beside baton, it shows what synclock adds to a
// lock cycle and what the store's scripts cost. It is not a peer and is
// run only when named (-impls).
func storeImpl() Impl {
	return Impl{
		Name:  StoreName,
		Setup: "diagnostic: redisbackend.Store's AcquireQueued, AwaitHandover and Release called directly, without synclock",
		Open:  openStore,
	}
}

func openStore(rdb *redis.Client, n int) (Client, error) {
	id, err := clientID(n)
	if err != nil {
		return nil, err
	}
	// The benchmark's redis-server is started for it: no lease can have
	// been lost, and the restart guard would hold the first grants back.
	store, err := redisbackend.New(rdb, redisbackend.WithoutRestartGuard())
	if err != nil {
		return nil, err
	}
	return &storeClient{store: store, prefix: id.String() + "#"}, nil
}

type storeClient struct {
	store  *redisbackend.Store
	prefix string // of the owners: the client's instance ID, as synclock writes it
	// n counts the acquisitions of the client's lockers: each has its own
	// owner, as in synclock, also when goroutines share the client.
	n atomic.Uint64
}

func (c *storeClient) Locker(key string) (Locker, error) {
	return &storeLocker{c: c, key: key}, nil
}

func (c *storeClient) Close() error { return c.store.Close() }

// storeLocker asks for leases of synclock's defaults: a 10 s claim
// window, a 3 s place in line, a 1 s fallback poll.
type storeLocker struct {
	c     *storeClient
	key   string
	owner string
}

const (
	storeClaim    = 10 * time.Second
	storePatience = 3 * time.Second
	storePoll     = time.Second
)

func (l *storeLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	l.owner = l.c.prefix + strconv.FormatUint(l.c.n.Add(1), 16)
	for {
		_, err := l.c.store.AcquireQueued(ctx, l.key, l.owner, storeClaim, 0, storePatience)
		if err == nil {
			return l.unlock, nil
		}
		var held *backend.HeldError
		if !errors.As(err, &held) {
			return nil, fmt.Errorf("baton-store acquire: %w", err)
		}
		poll := storePoll
		if held.Holder.Owner != "" {
			poll = min(poll, held.Holder.TTL+time.Millisecond)
		}
		if _, ok, err := l.c.store.AwaitHandover(ctx, l.key, l.owner, poll); err != nil {
			return nil, fmt.Errorf("baton-store await handover: %w", err)
		} else if ok {
			return l.unlock, nil
		}
	}
}

func (l *storeLocker) unlock(ctx context.Context) error {
	return l.c.store.Release(ctx, l.key, l.owner, 0)
}
