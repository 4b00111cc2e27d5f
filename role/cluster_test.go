package role_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/testkit/testenv"
)

// clusterRole is the election timing of the Cluster tests: quick enough to
// see a master come back within their runs.
var clusterRole = role.Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatExpiration: time.Second}

// clusterStores returns a maker of stores on c, each on its own client as
// separate processes have, closed when t ends.
func clusterStores(t *testing.T, c *testenv.Cluster) func() backend.Store {
	return func() backend.Store {
		s, err := redisbackend.New(c.ClusterClient(t), redisbackend.WithoutRestartGuard()) // new servers
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
}

// An app's keys share one Cluster slot (the {tenant:app} hash tag). The
// test moves that slot, keys and all, to another master while three
// electors and a loop of lock grants run on it, and then moves it back:
// clients follow the ASK and MOVED redirections, a master is elected
// throughout (or again at once), lock tokens keep increasing, and a
// watcher is still woken by a release after the moves.
func TestClusterSlotMigrationUnderLoad(t *testing.T) {
	c := testenv.NewCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	newStore := clusterStores(t, c)
	var ts tenures
	els := startElectors(t, 3, 7700, clusterRole, &ts, newStore)
	locks := newStore()
	load := startGrantLoop(ctx, locks, backend.AppKey("acme", "billing", "lock", "load"))
	defer load.stop()

	slot := c.ClusterClient(t).ClusterKeySlot(ctx, "{acme:billing}").Val()
	home, err := c.SlotOwner(ctx, int(slot))
	if err != nil {
		t.Fatal(err)
	}
	var away *testenv.Redis
	for _, n := range c.Nodes() {
		if n != home {
			away = n
			break
		}
	}
	for i, to := range []*testenv.Redis{away, home} {
		before := load.count()
		if err := c.MigrateSlot(ctx, int(slot), to); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("lock grants and a master after move %d", i+1), func() bool {
			return load.count() > before+20 && master(els) != nil
		}, els...)
	}

	// A watcher on the moved slot is woken by a release.
	w, err := newStore().Watch(ctx, backend.AppKey("acme", "billing", "lock", "watched"))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	watched := backend.AppKey("acme", "billing", "lock", "watched")
	if _, err := locks.Acquire(ctx, watched, "h", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if err := locks.Release(ctx, watched, "h", 0); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(patience)
	for released := false; !released; {
		select {
		case ev := <-w.C():
			released = ev.Kind == backend.EventReleased
		case <-deadline:
			t.Fatal("a watcher on the moved slot was not woken by a release")
		}
	}

	load.stopAndCheck(t, "through the slot moves")
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.overlaps) > 0 {
		t.Errorf("tenures overlapped through the slot moves: %v", ts.overlaps)
	}
}

// The replica of the master that serves an app's slot is promoted with
// CLUSTER FAILOVER while three electors and a loop of lock grants run on
// that slot, and then the old master is promoted back the same way. A
// manual CLUSTER FAILOVER (neither FORCE nor TAKEOVER) stops the master's
// writes until the replica has caught up with its replication stream, so
// no write the old master acknowledged is lost: no two tenures overlap
// and lock tokens never go back. A master is elected throughout or again
// soon (the test logs the longest time without one), lock grants resume,
// and watchers, one made before the failovers and one after, are woken by
// a release.
func TestClusterFailoverUnderLoad(t *testing.T) {
	c := testenv.NewCluster(t, testenv.ClusterOptions{Replicas: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	newStore := clusterStores(t, c)
	var ts tenures
	els := startElectors(t, 3, 7800, clusterRole, &ts, newStore)
	locks := newStore()
	load := startGrantLoop(ctx, locks, backend.AppKey("acme", "billing", "lock", "load"))
	defer load.stop()
	watched := backend.AppKey("acme", "billing", "lock", "watched")
	early, err := newStore().Watch(ctx, watched)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Close()

	masters := startMasterSampler(ctx, els)
	defer masters.close()

	slot := int(c.ClusterClient(t).ClusterKeySlot(ctx, "{acme:billing}").Val())
	for i := range 2 {
		owner, err := c.SlotOwner(ctx, slot)
		if err != nil {
			t.Fatal(err)
		}
		rs, err := c.ReplicasOf(ctx, owner)
		if err != nil || len(rs) != 1 {
			t.Fatalf("replicas of the slot's owner %s: %d, %v; want 1", owner.Addr(), len(rs), err)
		}
		before, fault := load.count(), time.Now()
		if err := c.Failover(ctx, rs[0]); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("lock grants and a master after failover %d", i+1), func() bool {
			return load.count() > before+20 && master(els) != nil
		}, els...)
		t.Logf("failover %d: longest time without a master %v, without a lock grant %v", i+1,
			masters.longestWithoutAfter(t, fault).Round(time.Millisecond), load.longestGapAfter(fault).Round(time.Millisecond))
	}

	late, err := newStore().Watch(ctx, watched)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	if _, err := locks.Acquire(ctx, watched, "h", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if err := locks.Release(ctx, watched, "h", 0); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]backend.Watch{"made before the failovers": early, "made after them": late} {
		deadline := time.After(patience)
		for released := false; !released; {
			select {
			case ev := <-w.C():
				released = ev.Kind == backend.EventReleased
			case <-deadline:
				t.Fatalf("a watcher %s was not woken by a release", name)
			}
		}
	}

	load.stopAndCheck(t, "through the failovers")
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.overlaps) > 0 {
		t.Errorf("tenures overlapped through the failovers: %v", ts.overlaps)
	}
}
