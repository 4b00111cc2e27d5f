package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// team is the goroutines of one process in a run: each with a lock object
// on the run's key and a Redis client for the bookkeeping. By default
// every goroutine has its own Redis client and its own implementation
// client (a separate instance, as far as the library can tell); with
// shared set the process has one of each, which its goroutines share.
type team struct {
	rdbs    []*redis.Client // one per goroutine, or one shared
	clients []Client        // one per goroutine, or one shared
	lockers []Locker
	warm    []Locker
}

// newTeam opens n goroutines' worth of clients of im on addr, for key.
// firstID numbers the implementation clients (see Impl.Open).
func newTeam(im Impl, addr string, n int, shared bool, key string, firstID int) (*team, error) {
	t := &team{}
	for i := range n {
		if !shared || i == 0 {
			rdb := redis.NewClient(&redis.Options{Addr: addr})
			c, err := im.Open(rdb, firstID+i)
			if err != nil {
				_ = rdb.Close()
				return nil, errors.Join(fmt.Errorf("bench: open %s: %w", im.Name, err), t.close())
			}
			t.rdbs = append(t.rdbs, rdb)
			t.clients = append(t.clients, c)
		}
		c := t.clients[len(t.clients)-1]
		l, err := c.Locker(key)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("bench: %s locker: %w", im.Name, err), t.close())
		}
		w, err := c.Locker(fmt.Sprintf("%s:warmup:%d:%d", key, firstID, i))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("bench: %s locker: %w", im.Name, err), t.close())
		}
		t.lockers = append(t.lockers, l)
		t.warm = append(t.warm, w)
	}
	return t, nil
}

// rdb returns the Redis client of goroutine i.
func (t *team) rdb(i int) *redis.Client { return t.rdbs[min(i, len(t.rdbs)-1)] }

// warmUp connects every client and runs one lock+unlock per goroutine on
// a key of its own, so that connections are open and scripts loaded
// before the measurement starts.
func (t *team) warmUp(ctx context.Context) error {
	for i, w := range t.warm {
		if err := t.rdb(i).Ping(ctx).Err(); err != nil {
			return fmt.Errorf("bench: ping: %w", err)
		}
		unlock, err := w.Lock(ctx)
		if err != nil {
			return fmt.Errorf("bench: warm-up lock: %w", err)
		}
		if err := unlock(ctx); err != nil {
			return fmt.Errorf("bench: warm-up unlock: %w", err)
		}
	}
	return nil
}

func (t *team) close() error {
	var errs []error
	for _, c := range t.clients {
		errs = append(errs, c.Close())
	}
	for _, r := range t.rdbs {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}
