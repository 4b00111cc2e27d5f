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
// master starting right after each flush, then a SCRIPT FLUSH; every
// store keeps the default restart guard, as processes in production do.
//
// A FLUSHALL deletes the role key under a live master and tells nobody,
// and leaves the server's uptime as it was. The app's intact marker went
// with it, so the store grants the role to nobody — the newcomer, by the
// framework's rule, would claim it at once — until the master's lease
// could have ended; the master steps down when its renewal finds the key
// gone. No tenure begins while an earlier one is still believed in, every
// new epoch is above every earlier one, and a master is back after each
// flush. SCRIPT FLUSH costs nothing: the scripts load again on their
// next call.
func TestHostileFlushUnderElection(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	cfg := role.Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatExpiration: time.Second}
	var ts tenures
	els := startElectors(t, 3, 7800, cfg, &ts, func() backend.Store { return processStore(t, r) })

	highest := uint64(0)
	for round := range 3 {
		var old *role.Elector
		waitFor(t, "a master before the flush", func() bool { old = master(els); return old != nil }, els...)
		oldEpoch := old.Epoch()
		if oldEpoch <= highest {
			t.Fatalf("round %d: master's epoch %d is not above the earlier %d", round+1, oldEpoch, highest)
		}
		highest = oldEpoch
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		late := startElector(t, processStore(t, r), 7810+round, cfg, &ts)
		t.Cleanup(func() { stopAll(t, late) })
		els = append(els, late)
		waitFor(t, fmt.Sprintf("a master of an epoch above %d after FLUSHALL %d", oldEpoch, round+1), func() bool {
			m := master(els)
			return m != nil && m.Epoch() > oldEpoch
		}, els...)
	}

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
	if len(ts.overlaps) > 0 {
		t.Fatalf("tenures overlapped: %v", ts.overlaps)
	}
}
