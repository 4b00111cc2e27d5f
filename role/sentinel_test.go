package role_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/testkit/testenv"
)

// Elections and lock grants keep running through a Sentinel failover —
// SENTINEL FAILOVER, then kill -9 of the master — on 1 master, 2 replicas
// and 3 sentinels. For each fault the test measures how long there was no
// master and no lock grant, and how many grants acknowledged just before
// a kill -9 the new master does not have: with Redis's asynchronous
// replication some may be lost; with WithReplicaAck(2) (every replica
// acknowledged the grant before the caller saw it) none. Epochs and lock
// tokens keep increasing throughout.
func TestSentinelFailoverUnderLoad(t *testing.T) {
	t.Run("Async", func(t *testing.T) { testSentinelFailoverUnderLoad(t, nil, nil) })
	// The electors and the loader want one replica, so that they go on
	// once the kill leaves one; the probe's grants want both.
	t.Run("ReplicaAck", func(t *testing.T) {
		testSentinelFailoverUnderLoad(t,
			[]redisbackend.Option{redisbackend.WithReplicaAck(1, 2*time.Second)},
			[]redisbackend.Option{redisbackend.WithReplicaAck(2, 2*time.Second)})
	})
}

// testSentinelFailoverUnderLoad runs the test with stores made with opts
// and, for the grants checked after kill -9, probeOpts; probeOpts that
// ask for replica acknowledgements mean no grant may be lost.
func testSentinelFailoverUnderLoad(t *testing.T, opts, probeOpts []redisbackend.Option) {
	acked := probeOpts != nil
	// Sentinel starts no failover of a master within twice the
	// failover-timeout of the last one: short, so that the kill -9 right
	// after the SENTINEL FAILOVER is failed over too.
	sn := testenv.NewSentinel(t, testenv.SentinelOptions{Replicas: 2, DownAfter: time.Second, FailoverTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	newStore := func(opts ...redisbackend.Option) backend.Store {
		// The servers are new: no restart guard.
		s, err := redisbackend.New(sn.FailoverClient(t), append([]redisbackend.Option{redisbackend.WithoutRestartGuard()}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	cfg := role.Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatExpiration: time.Second}
	var ts tenures
	els := startElectors(t, 3, 7600, cfg, &ts, func() backend.Store { return newStore(opts...) })
	load := startGrantLoop(ctx, newStore(opts...), backend.AppKey("acme", "billing", "lock", "load"))
	defer load.stop()

	masters := startMasterSampler(ctx, els)
	defer masters.close()
	// gaps returns, for the fault at from, the longest stretch without a
	// master and the longest gap between lock grants that ended after
	// from, once a master and a grant are back and the sampler has seen
	// the master (so that it has noted the stretch that ended).
	gaps := func(from time.Time) (noMaster, noGrant time.Duration) {
		waitLong(t, "a master and a lock grant after the fault", func() bool {
			return master(els) != nil && load.since(from.Add(100*time.Millisecond))
		}, els...)
		return masters.longestWithoutAfter(t, from), load.longestGapAfter(from)
	}

	// 1. SENTINEL FAILOVER.
	before := master(els).Status().Epoch
	fault := time.Now()
	if _, err := sn.Failover(ctx); err != nil {
		t.Fatal(err)
	}
	// The master may keep its tenure: its key was replicated before the
	// switch, and its renewal reaches the new master in time. Otherwise a
	// new tenure begins; either way the epoch does not go back.
	waitLong(t, "a master after the failover", func() bool { m := master(els); return m != nil && m.Status().Epoch >= before }, els...)
	nm, ng := gaps(fault)
	t.Logf("SENTINEL FAILOVER: longest time without a master %v, without a lock grant %v", nm.Round(time.Millisecond), ng.Round(time.Millisecond))

	// 2. kill -9 of the master, right after a burst of grants on keys
	// nobody releases: the ones the new master lacks were lost.
	probe := newStore(probeOpts...)
	var probed []backend.Lease
	for i := range 50 {
		l, err := probe.Acquire(ctx, backend.AppKey("acme", "billing", "lock", fmt.Sprintf("probe-%d", i)), "prober", time.Minute, 0)
		if err != nil {
			t.Fatalf("probe grant %d: %v", i, err)
		}
		probed = append(probed, l)
	}
	m, err := sn.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before = master(els).Status().Epoch
	fault = time.Now()
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	waitLong(t, "a master of a new epoch after kill -9", func() bool { m := master(els); return m != nil && m.Status().Epoch > before }, els...)
	nm, ng = gaps(fault)
	t.Logf("kill -9 of the master: longest time without a master %v, without a lock grant %v", nm.Round(time.Millisecond), ng.Round(time.Millisecond))
	// Read the probes through a new client, which asks the sentinels
	// afresh: this checks the new master's data, not a client's search.
	fresh := newStore()
	lost := 0
	for _, l := range probed {
		var got backend.Lease
		var err error
		deadline := time.Now().Add(90 * time.Second) // the client may still be finding the new master
		for {
			if got, err = fresh.Get(ctx, l.Key); err == nil || errors.Is(err, backend.ErrNotFound) || time.Now().After(deadline) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		switch {
		case errors.Is(err, backend.ErrNotFound), err == nil && got.Token != l.Token:
			lost++
		case err != nil:
			t.Fatalf("reading probe %s after the failover: %v", l.Key, err)
		}
	}
	t.Logf("grants acknowledged just before kill -9 and missing on the new master: %d of %d", lost, len(probed))
	if acked && lost > 0 {
		t.Errorf("%d of %d grants that every replica acknowledged were lost in the failover", lost, len(probed))
	}

	load.stopAndCheck(t, "through the failovers")
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if acked && len(ts.overlaps) > 0 {
		t.Errorf("tenures overlapped with every grant acknowledged by the replicas: %v", ts.overlaps)
	}
	if len(ts.overlaps) > 0 {
		t.Logf("tenures that overlapped (asynchronous replication lost a renewal; fencing epochs tell them apart): %v", ts.overlaps)
	}
}

// waitLong is waitFor for what follows a failover, which Sentinel makes
// in seconds on a quiet machine and in many more on a loaded one: the
// down-after time, its election, the promotion and the other replica's
// full resync before it can acknowledge grants.
func waitLong(t testing.TB, what string, cond func() bool, els ...*role.Elector) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s%s", what, statuses(els))
		}
		time.Sleep(time.Millisecond)
	}
}
