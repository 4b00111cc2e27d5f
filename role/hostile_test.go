package role_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/internal/testenv"
	"github.com/baton-go/baton/role"
)

// FLUSHALL while three electors run, with a newcomer that has seen no
// master starting right after each flush, and then a SCRIPT FLUSH.
//
// A FLUSHALL deletes the role key under a live master and tells nobody:
// unlike a restart, which the restart guard covers, nothing on the server
// shows that data was lost, so the newcomer (floor 0, no master seen) is
// granted the role at once, by the framework's rule, while the old master
// still believes in its tenure until its next renewal finds the key gone.
// What the test requires is what baton promises there: the old tenure
// ends at that renewal; every new epoch is above every earlier one (the
// flush took the counter; the server's clock and the claimers' floors
// keep the order), so a resource fenced on epochs refuses the old master;
// and a master is back after each flush.
// SCRIPT FLUSH costs nothing: the scripts load again on their next call
// and no tenure overlaps another.
func TestHostileFlushUnderElection(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	cfg := role.Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatExpiration: time.Second}
	var ts tenures
	els := startElectors(t, 3, 7800, cfg, &ts, func() backend.Store { return redisStore(t, r) })

	highest := uint64(0)
	for round := range 3 {
		old := master(els)
		if old == nil {
			waitFor(t, "a master before the flush", func() bool { old = master(els); return old != nil }, els...)
		}
		oldEpoch := old.Epoch()
		if oldEpoch <= highest {
			t.Fatalf("round %d: master's epoch %d is not above the earlier %d", round+1, oldEpoch, highest)
		}
		highest = oldEpoch
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		late := startElector(t, redisStore(t, r), 7810+round, cfg, &ts)
		t.Cleanup(func() { stopAll(t, late) })
		els = append(els, late)
		waitFor(t, fmt.Sprintf("the master of epoch %d to step down after FLUSHALL %d", oldEpoch, round+1), func() bool {
			return !old.IsMaster() || old.Epoch() != oldEpoch
		}, els...)
		waitFor(t, fmt.Sprintf("a master of an epoch above %d after FLUSHALL %d", oldEpoch, round+1), func() bool {
			m := master(els)
			return m != nil && m.Epoch() > oldEpoch
		}, els...)
	}
	ts.mu.Lock()
	flushOverlaps := len(ts.overlaps)
	t.Logf("tenures that overlapped after FLUSHALL (the old master until its next renewal): %v", ts.overlaps)
	ts.mu.Unlock()

	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the scripts loaded again and a master", func() bool {
		info, err := rdb.Info(ctx, "memory").Result()
		if err != nil {
			return false
		}
		_, after, _ := strings.Cut(info, "number_of_cached_scripts:")
		n, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(after, "\n", 2)[0]))
		return n > 0 && master(els) != nil
	}, els...)
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if len(ts.overlaps) > flushOverlaps {
		t.Fatalf("tenures overlapped after SCRIPT FLUSH: %v", ts.overlaps[flushOverlaps:])
	}
}
