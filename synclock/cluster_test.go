package synclock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/testenv"
)

// Exclusion holds while the master that serves a lock's slot hands over
// to its replica with CLUSTER FAILOVER, twice (there and back): three
// instances, each on a Cluster client of its own, with two goroutines
// each, take turns on one key all along. A manual failover (neither FORCE
// nor TAKEOVER) loses no write the master acknowledged, so no grant is
// forgotten: no two holders are ever inside at once, the tokens they hold
// rise in the order they enter, and sections run again after each
// failover. A call that fails while the slot changes hands is retried.
func TestClusterFailoverExclusion(t *testing.T) {
	c := testenv.NewCluster(t, testenv.ClusterOptions{Replicas: 1})
	key := uniqueKey(t)
	ctx, stop := context.WithCancel(context.Background())
	var (
		inside, overlaps, sections, failed atomic.Int64
		last                               atomic.Uint64
		mu                                 sync.Mutex
		backwards                          []string
		wg                                 sync.WaitGroup
	)
	defer wg.Wait()
	defer stop()
	for n := range 3 {
		st, err := redisbackend.New(c.ClusterClient(t), redisbackend.WithoutRestartGuard()) // new servers
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		lk := lockerOn(t, n, st, synclock.Config{RetryInterval: 50 * time.Millisecond, HoldDuration: 5 * time.Second})
		for range 2 {
			wg.Go(func() {
				for ctx.Err() == nil {
					// A call can hang while the slot changes hands: bound each.
					cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
					err := lk.DoKey(cctx, key, func(ctx context.Context) error {
						if inside.Add(1) != 1 {
							overlaps.Add(1)
						}
						defer inside.Add(-1)
						tok, _ := synclock.Token(ctx)
						if prev := last.Swap(tok); tok <= prev {
							mu.Lock()
							backwards = append(backwards, fmt.Sprintf("token %d after %d", tok, prev))
							mu.Unlock()
						}
						time.Sleep(time.Millisecond)
						sections.Add(1)
						return nil
					})
					cancel()
					if err != nil && ctx.Err() == nil {
						failed.Add(1)
						time.Sleep(5 * time.Millisecond)
					}
				}
			})
		}
	}

	rdb := c.ClusterClient(t)
	slot := int(rdb.ClusterKeySlot(ctxT(t), "{acme:billing}").Val())
	for i := range 2 {
		owner, err := c.SlotOwner(ctxT(t), slot)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := c.ReplicasOf(ctxT(t), owner)
		if err != nil || len(rs) != 1 {
			t.Fatalf("replicas of the slot's owner %s: %d, %v; want 1", owner.Addr(), len(rs), err)
		}
		before := sections.Load()
		if err := c.Failover(ctxT(t), rs[0]); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(patience)
		for sections.Load() < before+20 {
			if time.Now().After(deadline) {
				t.Fatalf("no sections ran after failover %d (%d calls failed so far)", i+1, failed.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	stop()
	wg.Wait()
	t.Logf("%d sections, %d calls failed and were retried", sections.Load(), failed.Load())
	if overlaps.Load() != 0 || len(backwards) > 0 {
		t.Fatalf("%d overlapping holders, tokens out of order: %v", overlaps.Load(), backwards)
	}
}
