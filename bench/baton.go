package bench

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/synclock"
)

// BatonName is baton's name in flags and results.
const BatonName = "baton"

func batonImpl() Impl {
	return Impl{
		Name:  BatonName,
		Setup: "synclock.Locker on redisbackend, default Config (hold 45 s, 1 s fallback poll)",
		Open:  func(rdb *redis.Client, n int) (Client, error) { return openBaton(rdb, n) },
	}
}

// BatonFunctionsName is the name of the diagnostic run of baton with
// its Redis functions (WithFunctions) instead of sent scripts.
const BatonFunctionsName = "baton-functions"

// batonFunctionsImpl is baton as batonImpl sets it up, calling baton's
// function library (FCALL) instead of sending its scripts (EVALSHA): set
// beside baton, it shows what making the scripts' shared part on every
// call costs the server. It is not a peer and is run only when named.
func batonFunctionsImpl() Impl {
	return Impl{
		Name:  BatonFunctionsName,
		Setup: "diagnostic: baton as set up above, WithFunctions (FCALL of baton's function library, loaded into the benchmark's server)",
		Open: func(rdb *redis.Client, n int) (Client, error) {
			if err := redisbackend.LoadFunctions(context.Background(), rdb); err != nil {
				return nil, err
			}
			return openBaton(rdb, n, redisbackend.WithFunctions())
		},
	}
}

// openBaton builds a store with opts and a Locker on rdb. Each client
// gets its own instance ID (port n), as separate instances of a service
// would.
func openBaton(rdb *redis.Client, n int, opts ...redisbackend.Option) (Client, error) {
	// The benchmark's redis-server is started for it: no lease can have
	// been lost, and the restart guard would hold the first grants back.
	store, err := redisbackend.New(rdb, append([]redisbackend.Option{redisbackend.WithoutRestartGuard()}, opts...)...)
	if err != nil {
		return nil, err
	}
	id, err := clientID(n)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	lk, err := synclock.NewLocker(store, id, synclock.Config{})
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	return batonClient{store: store, lk: lk}, nil
}

// clientID is the instance ID of the benchmark's client n: its port
// tells the clients apart.
func clientID(n int) (instanceid.ID, error) {
	return instanceid.New("127.0.0.1", "bench", "bench", 1+(n-1)%65535)
}

type batonClient struct {
	store *redisbackend.Store
	lk    *synclock.Locker
}

func (c batonClient) Locker(key string) (Locker, error) {
	return batonLocker{m: c.lk.Mutex(key)}, nil
}

func (c batonClient) Close() error { return c.store.Close() }

type batonLocker struct{ m *synclock.Mutex }

func (l batonLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	if err := l.m.Lock(ctx); err != nil {
		return nil, fmt.Errorf("baton lock: %w", err)
	}
	return l.m.Unlock, nil
}
