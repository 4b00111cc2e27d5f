package role_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/internal/testenv"
	"github.com/baton-go/baton/role"
)

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
	newStore := func() *redisbackend.Store {
		s, err := redisbackend.New(c.ClusterClient(t), redisbackend.WithoutRestartGuard()) // new servers
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	cfg := role.Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatExpiration: time.Second}
	var ts tenures
	var els []*role.Elector
	for i := range 3 {
		els = append(els, startElector(t, newStore(), 7700+i, cfg, &ts))
	}
	defer stopAll(t, els...)
	waitFor(t, "a master", func() bool { return master(els) != nil }, els...)

	var (
		mu        sync.Mutex
		lastToken uint64
		grants    int
		backwards []string
	)
	locks := newStore()
	key := backend.AppKey("acme", "billing", "lock", "load")
	loadCtx, stopLoad := context.WithCancel(ctx)
	var load sync.WaitGroup
	load.Go(func() {
		for loadCtx.Err() == nil {
			l, err := locks.Acquire(loadCtx, key, "loader", time.Second, lastToken)
			if err != nil {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			mu.Lock()
			if l.Token <= lastToken {
				backwards = append(backwards, fmt.Sprintf("token %d after %d", l.Token, lastToken))
			}
			lastToken = l.Token
			grants++
			mu.Unlock()
			_ = locks.Release(loadCtx, key, "loader", 0)
		}
	})
	defer func() { stopLoad(); load.Wait() }()
	grantsNow := func() int { mu.Lock(); defer mu.Unlock(); return grants }

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
		before := grantsNow()
		if err := c.MigrateSlot(ctx, int(slot), to); err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("lock grants and a master after move %d", i+1), func() bool {
			return grantsNow() > before+20 && master(els) != nil
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

	stopLoad()
	load.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(backwards) > 0 {
		t.Errorf("lock tokens went back through the slot moves: %v", backwards)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.overlaps) > 0 {
		t.Errorf("tenures overlapped through the slot moves: %v", ts.overlaps)
	}
}
