package role_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/testkit/storetest"
	"github.com/baton-go/baton/testkit/testenv"
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
		oldEpoch := old.Status().Epoch
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
			return m != nil && m.Status().Epoch > oldEpoch
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

// A role key written with a token no grant can have made (2^53-1, far
// beyond the server's clock), seen by a running elector and by one that
// was stopped and started again, is corrupt data, not an epoch: neither
// takes it as the floor of its claims, their log says "corrupt data in"
// (not "cannot reach the store"), and once the bad key is deleted one of
// them is master again, without a restart, with an epoch from the clock.
func TestHostileForgedEpoch(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	ctx := context.Background()
	cfg := role.Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatExpiration: time.Second}
	var logs testenv.SyncBuffer
	logged := role.WithLogger(slog.New(slog.NewTextHandler(&logs, nil)))
	s := redisStore(t, r)
	a := startElector(t, s, 7901, cfg, nil, logged)
	b := startElector(t, redisStore(t, r), 7902, cfg, nil)
	t.Cleanup(func() { stopAll(t, a, b) })
	waitFor(t, "a master", func() bool { return master([]*role.Elector{a, b}) != nil }, a, b)

	stopAll(t, a)
	key := s.LeaseKey(backend.AppKey("acme", "billing", "role"))
	if err := rdb.Set(ctx, key, fmt.Sprintf("%d forger", uint64(backend.MaxToken)), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := a.Launch(); err != nil {
		t.Fatal(err)
	}
	els := []*role.Elector{a, b}
	waitFor(t, "both electors to report the forged role key and be slaves", func() bool {
		for _, el := range els {
			if err := el.Status().LastError; err == nil || !errors.Is(err, backend.ErrCorrupt) || el.IsMaster() {
				return false
			}
		}
		return strings.Contains(logs.String(), "corrupt data in")
	}, els...)
	for _, el := range els {
		if el.IsMaster() || el.Status().Epoch >= backend.MaxToken {
			t.Fatalf("%s while the role key is forged: master %v, epoch %d; want a slave that took no epoch from it", el.Status().Instance, el.IsMaster(), el.Status().Epoch)
		}
	}

	if err := rdb.Del(ctx, key).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a master once the forged key was deleted", func() bool { return master(els) != nil }, els...)
	if ep := master(els).Status().Epoch; ep > uint64(time.Now().Add(time.Hour).UnixMicro()) {
		t.Errorf("the new master's epoch is %d; want one from the server's clock", ep)
	}
	if out := logs.String(); strings.Contains(out, "cannot reach") {
		t.Errorf("the log says the store could not be reached; want only that its data was corrupt:\n%s", out)
	}
}

// An epoch the store refuses as the floor of a claim, because no grant
// can have had it (ErrFloorAhead), is forgotten: the elector claims again
// without it and becomes master, so an epoch once seen never locks it out
// of the role.
func TestFloorAheadIsForgotten(t *testing.T) {
	cfg := role.Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatExpiration: time.Second}
	el := startElector(t, &storetest.Forging{Store: membackend.New()}, 7950, cfg, nil)
	t.Cleanup(func() { stopAll(t, el) })
	waitFor(t, "the elector to be master", el.IsMaster, el)
	if ep := el.Status().Epoch; ep >= backend.MaxToken-1 {
		t.Fatalf("master with epoch %d; want one from the clock", ep)
	}
}
