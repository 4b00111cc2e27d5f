package testenv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// ClusterOptions configures a Redis Cluster. Zero fields take the defaults
// named on each.
type ClusterOptions struct {
	// Masters is the number of master nodes; the slots are split evenly
	// between them. There are no replicas. Default 3.
	Masters int
	// NodeTimeout is cluster-node-timeout: how long a node may be silent
	// before the others flag it as failing. Default 5 s.
	NodeTimeout time.Duration
	// Redis configures every node.
	Redis RedisOptions
	// StartTimeout bounds the wait for the cluster to be ready.
	// Default DefaultTopologyTimeout.
	StartTimeout time.Duration
}

func (o ClusterOptions) withDefaults() ClusterOptions {
	if o.Masters <= 0 {
		o.Masters = 3
	}
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = 5 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultTopologyTimeout
	}
	return o
}

// Cluster is a Redis Cluster of master nodes on loopback.
type Cluster struct {
	nodes []*Redis
}

// StartCluster starts the nodes in cluster mode, gives each an even share
// of the slots, joins them with CLUSTER MEET and waits until every node
// reports cluster_state:ok and knows all the others. The caller must Close
// it.
func StartCluster(opts ClusterOptions) (*Cluster, error) {
	o := opts.withDefaults()
	c := &Cluster{}
	ok := false
	defer func() {
		if !ok {
			_ = c.Close()
		}
	}()

	for range o.Masters {
		n, err := startServer(serverSpec{
			program: "redis-server",
			opts:    o.Redis,
			config: func(r *Redis) ([]string, error) {
				bus, err := pickPort()
				if err != nil {
					return nil, err
				}
				r.busPort = bus
				return append(dataConfig(o.Redis),
					"cluster-enabled yes",
					"cluster-config-file nodes.conf",
					"cluster-node-timeout "+strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10),
					"cluster-port "+strconv.Itoa(bus),
				), nil
			},
		})
		if err != nil {
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.StartTimeout)
	defer cancel()
	if err := c.join(ctx); err != nil {
		return nil, err
	}
	if err := c.WaitReady(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// join assigns the slots and makes the nodes meet, as `redis-cli --cluster
// create` does: distinct config epochs first, so that no epoch collision has
// to be resolved later.
func (c *Cluster) join(ctx context.Context) error {
	for i, n := range c.nodes {
		cl := n.adminClient()
		lo, hi := i*clusterSlots/len(c.nodes), (i+1)*clusterSlots/len(c.nodes)-1
		err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err()
		if err == nil {
			err = cl.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err()
		}
		_ = cl.Close()
		if err != nil {
			return fmt.Errorf("testenv: assign slots %d-%d to %s: %w", lo, hi, n.Addr(), err)
		}
	}
	first := c.nodes[0].adminClient()
	defer first.Close()
	for _, n := range c.nodes[1:] {
		if err := first.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", n.Port(), n.busPort).Err(); err != nil {
			return fmt.Errorf("testenv: CLUSTER MEET %s: %w", n.Addr(), err)
		}
	}
	return nil
}

// NewCluster starts a Redis Cluster for one test and closes it when the
// test ends. It fails t on error. At most one ClusterOptions may be given.
func NewCluster(t testing.TB, opts ...ClusterOptions) *Cluster {
	t.Helper()
	c, err := StartCluster(single(t, opts))
	if err != nil {
		t.Fatal(err)
	}
	cleanupServer(t, c.nodes...)
	return c
}

// Addrs returns the addresses of the nodes.
func (c *Cluster) Addrs() []string { return addrs(c.nodes) }

// Nodes returns the node processes, for fault injection. A node that is
// restarted keeps its identity and slots (they are in its nodes.conf) but,
// without AppendOnly, not its data.
func (c *Cluster) Nodes() []*Redis { return slices.Clone(c.nodes) }

// ClusterOptions returns go-redis options for a client of this cluster.
func (c *Cluster) ClusterOptions() *redis.ClusterOptions {
	return &redis.ClusterOptions{Addrs: c.Addrs()}
}

// ClusterClient returns a new cluster client, closed when t ends.
func (c *Cluster) ClusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cl := redis.NewClusterClient(c.ClusterOptions())
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// WaitReady waits until every node reports cluster_state:ok, all slots
// served, and knows every other node. Without a deadline on ctx it gives up
// after DefaultTopologyTimeout.
func (c *Cluster) WaitReady(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx, DefaultTopologyTimeout)
	defer cancel()
	return poll(ctx, "wait for cluster_state:ok", c.checkReady)
}

func (c *Cluster) checkReady(ctx context.Context) error {
	for _, n := range c.nodes {
		cl := n.adminClient()
		s, err := cl.ClusterInfo(ctx).Result()
		_ = cl.Close()
		if err != nil {
			return fmt.Errorf("CLUSTER INFO on %s: %w", n.Addr(), err)
		}
		ci := parseFields(s)
		want := map[string]string{
			"cluster_state":       "ok",
			"cluster_slots_ok":    strconv.Itoa(clusterSlots),
			"cluster_known_nodes": strconv.Itoa(len(c.nodes)),
		}
		for k, v := range want {
			if ci[k] != v {
				return fmt.Errorf("%s reports %s:%s, want %s", n.Addr(), k, ci[k], v)
			}
		}
	}
	return nil
}

// Close kills every node and removes their directories.
func (c *Cluster) Close() error {
	return closeAll(c.nodes)
}

// nodeID returns the cluster node ID of n.
func nodeID(ctx context.Context, n *Redis) (string, error) {
	cl := n.adminClient()
	defer cl.Close()
	id, err := cl.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		return "", fmt.Errorf("testenv: CLUSTER MYID on %s: %w", n.Addr(), err)
	}
	return id, nil
}

// SlotOwner returns the node that serves slot, as the first node sees it.
func (c *Cluster) SlotOwner(ctx context.Context, slot int) (*Redis, error) {
	cl := c.nodes[0].adminClient()
	defer cl.Close()
	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("testenv: CLUSTER SLOTS: %w", err)
	}
	for _, s := range slots {
		if s.Start <= slot && slot <= s.End && len(s.Nodes) > 0 {
			for _, n := range c.nodes {
				if n.Addr() == s.Nodes[0].Addr {
					return n, nil
				}
			}
			return nil, fmt.Errorf("testenv: slot %d is served by %s, not one of ours", slot, s.Nodes[0].Addr)
		}
	}
	return nil, fmt.Errorf("testenv: no node serves slot %d", slot)
}

// MigrateSlot moves slot, with its keys, from the node that serves it to
// to, as redis-cli --cluster reshard does: to imports it, the owner
// migrates it, the keys move with MIGRATE a batch at a time (clients get
// ASK redirections meanwhile), and then every node is told the new owner
// (MOVED from then on).
func (c *Cluster) MigrateSlot(ctx context.Context, slot int, to *Redis) error {
	from, err := c.SlotOwner(ctx, slot)
	if err != nil {
		return err
	}
	if from == to {
		return nil
	}
	fromID, err := nodeID(ctx, from)
	if err != nil {
		return err
	}
	toID, err := nodeID(ctx, to)
	if err != nil {
		return err
	}
	src, dst := from.adminClient(), to.adminClient()
	defer src.Close()
	defer dst.Close()
	if err := dst.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID).Err(); err != nil {
		return fmt.Errorf("testenv: SETSLOT %d IMPORTING on %s: %w", slot, to.Addr(), err)
	}
	if err := src.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID).Err(); err != nil {
		return fmt.Errorf("testenv: SETSLOT %d MIGRATING on %s: %w", slot, from.Addr(), err)
	}
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return fmt.Errorf("testenv: GETKEYSINSLOT %d on %s: %w", slot, from.Addr(), err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", "127.0.0.1", to.Port(), "", 0, 5000, "REPLACE", "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil && !errors.Is(err, redis.Nil) && err.Error() != "NOKEY" {
			return fmt.Errorf("testenv: MIGRATE of slot %d from %s to %s: %w", slot, from.Addr(), to.Addr(), err)
		}
	}
	// The new owner first, then the old one, then the rest, as
	// redis-cli does.
	order := []*Redis{to, from}
	for _, n := range c.nodes {
		if n != to && n != from {
			order = append(order, n)
		}
	}
	for _, n := range order {
		cl := n.adminClient()
		err := cl.Do(ctx, "CLUSTER", "SETSLOT", slot, "NODE", toID).Err()
		_ = cl.Close()
		if err != nil {
			return fmt.Errorf("testenv: SETSLOT %d NODE on %s: %w", slot, n.Addr(), err)
		}
	}
	return nil
}
