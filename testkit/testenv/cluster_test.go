package testenv_test

import (
	"fmt"
	"testing"

	"github.com/baton-go/baton/testkit/testenv"
)

func TestClusterAcceptsWritesInEverySlotRange(t *testing.T) {
	t.Parallel()
	cl := testenv.NewCluster(t)
	if len(cl.Addrs()) != 3 {
		t.Fatalf("cluster has %d nodes, want 3", len(cl.Addrs()))
	}
	c := cl.ClusterClient(t)
	ctx := t.Context()

	slots := map[int64]bool{}
	for i := range 30 {
		key := fmt.Sprintf("key-%d", i)
		if err := c.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		if got, err := c.Get(ctx, key).Int(); err != nil || got != i {
			t.Fatalf("GET %s = %d, %v; want %d", key, got, err, i)
		}
		slot, err := c.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[slot] = true
	}
	if len(slots) < 2 {
		t.Fatalf("keys fell into %d slot(s); the test needs several", len(slots))
	}
	// Every master owns a third of the slots, so each must hold some keys.
	for _, n := range cl.Nodes() {
		if size, err := n.Client(t).DBSize(ctx).Result(); err != nil || size == 0 {
			t.Errorf("node %s holds %d keys (%v); want some", n.Addr(), size, err)
		}
	}
}

// Three masters with a replica each: every master has its replica, in
// sync, and Failover promotes the replica of a slot's owner with CLUSTER
// FAILOVER. The old master follows the new one, the slot moves with it,
// every write acknowledged before is on the new master, and a client
// writes on after.
func TestClusterReplicasAndFailover(t *testing.T) {
	t.Parallel()
	cl := testenv.NewCluster(t, testenv.ClusterOptions{Replicas: 1})
	ctx := t.Context()
	nodes := cl.Nodes()
	if len(nodes) != 6 {
		t.Fatalf("cluster has %d nodes, want 6", len(nodes))
	}
	for i, n := range nodes {
		role, err := cl.Role(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]string{true: "master", false: "slave"}[i < 3]; role != want {
			t.Errorf("node %d (%s) has role %q, want %q", i, n.Addr(), role, want)
		}
	}
	for i, m := range nodes[:3] {
		rs, err := cl.ReplicasOf(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0] != nodes[3+i] {
			t.Errorf("replicas of master %s: %v, want %s", m.Addr(), addrsOf(rs), nodes[3+i].Addr())
		}
	}

	c := cl.ClusterClient(t)
	slot := int(c.ClusterKeySlot(ctx, "{tag}").Val())
	owner, err := cl.SlotOwner(ctx, slot)
	if err != nil {
		t.Fatal(err)
	}
	const writes = 200
	for i := range writes {
		if err := c.Set(ctx, fmt.Sprintf("{tag}:%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET before the failover: %v", err)
		}
	}
	rs, err := cl.ReplicasOf(ctx, owner)
	if err != nil || len(rs) != 1 {
		t.Fatalf("replicas of the slot's owner %s: %v, %v", owner.Addr(), addrsOf(rs), err)
	}
	promoted := rs[0]
	if err := cl.Failover(ctx, promoted); err != nil {
		t.Fatal(err)
	}

	if role, err := cl.Role(ctx, promoted); err != nil || role != "master" {
		t.Fatalf("promoted replica has role %q (%v), want master", role, err)
	}
	if got, err := cl.SlotOwner(ctx, slot); err != nil || got != promoted {
		t.Fatalf("slot %d is served by %v (%v), want the promoted %s", slot, addrsOf([]*testenv.Redis{got}), err, promoted.Addr())
	}
	if rs, err := cl.ReplicasOf(ctx, promoted); err != nil || len(rs) != 1 || rs[0] != owner {
		t.Fatalf("replicas of the promoted node: %v, %v; want the old master %s", addrsOf(rs), err, owner.Addr())
	}
	if err := cl.Failover(ctx, promoted); err == nil {
		t.Error("Failover to a master succeeded; want an error")
	}
	// CLUSTER FAILOVER waits for the replica to catch up: nothing
	// acknowledged is lost.
	direct := promoted.Client(t)
	if n, err := direct.DBSize(ctx).Result(); err != nil || n != writes {
		t.Errorf("the promoted node holds %d keys (%v), want %d", n, err, writes)
	}
	if err := c.Set(ctx, "{tag}:after", 1, 0).Err(); err != nil {
		t.Fatalf("SET after the failover: %v", err)
	}
	if n, err := direct.Exists(ctx, "{tag}:after").Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS on the promoted node = %d, %v; want 1", n, err)
	}
}

func addrsOf(rs []*testenv.Redis) []string {
	var out []string
	for _, r := range rs {
		if r == nil {
			out = append(out, "<nil>")
			continue
		}
		out = append(out, r.Addr())
	}
	return out
}
