package testenv_test

import (
	"fmt"
	"testing"

	"github.com/baton-go/baton/internal/testenv"
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
