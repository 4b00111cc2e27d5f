package testenv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/testkit/testenv"
)

func TestSentinelFailoverChangesMaster(t *testing.T) {
	t.Parallel()
	s := testenv.NewSentinel(t)
	ctx := t.Context()
	if s.MasterName() != testenv.DefaultMasterName || len(s.SentinelAddrs()) != 3 || len(s.Servers()) != 2 {
		t.Fatalf("topology: master %q, %d sentinels, %d servers; want %q, 3, 2",
			s.MasterName(), len(s.SentinelAddrs()), len(s.Servers()), testenv.DefaultMasterName)
	}
	old, err := s.MasterAddr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if old != s.Servers()[0].Addr() {
		t.Fatalf("initial master %s, want the first server %s", old, s.Servers()[0].Addr())
	}
	c := s.FailoverClient(t)
	if err := c.Set(ctx, "before", "1", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client: %v", err)
	}

	newAddr, err := s.Failover(ctx)
	if err != nil {
		t.Fatalf("Failover: %v", err)
	}
	if newAddr == old {
		t.Fatalf("master after Failover is still %s", old)
	}
	if got, err := s.MasterAddr(ctx); err != nil || got != newAddr {
		t.Fatalf("MasterAddr after Failover = %s, %v; want %s", got, err, newAddr)
	}
	// Failover returns once every sentinel has ended it: a leader still in
	// the failover would go on naming the promoted replica should it die.
	for _, sn := range s.Sentinels() {
		sc := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr(), Protocol: 2})
		m, err := sc.Master(ctx, s.MasterName()).Result()
		_ = sc.Close()
		if err != nil || strings.Contains(m["flags"], "failover_in_progress") {
			t.Fatalf("sentinel %s after Failover: flags %q, state %q, %v; want the failover ended", sn.Addr(), m["flags"], m["failover-state"], err)
		}
	}

	// The failover client follows the switch; until it has, a write may hit
	// the demoted master and be refused.
	deadline, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var werr error
	for {
		if werr = c.Set(deadline, "after", "1", 0).Err(); werr == nil {
			break
		}
		select {
		case <-deadline.Done():
			t.Fatalf("SET through the failover client after Failover: %v", werr)
		case <-time.After(50 * time.Millisecond):
		}
	}
	direct := s.Server(newAddr).Client(t)
	if n, err := direct.Exists(ctx, "after").Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS after on the new master = %d, %v; want 1", n, err)
	}
	role, err := s.Server(old).Client(t).Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 || role[0] != "slave" {
		t.Fatalf("ROLE of the old master = %v, %v; want slave", role, err)
	}
}
