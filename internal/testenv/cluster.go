package testenv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
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
	// between them. Default 3.
	Masters int
	// Replicas is the number of replicas of each master, attached with
	// CLUSTER REPLICATE. Default 0: masters only.
	Replicas int
	// NodeTimeout is cluster-node-timeout: how long a node may be silent
	// before the others flag it as failing. Default 5 s.
	NodeTimeout time.Duration
	// Redis configures every node. With Redis.TLS set the nodes also
	// speak TLS to each other (tls-cluster, tls-replication) and report
	// their TLS ports to clients that connect with TLS (TLSAddrs); the
	// plain ports stay, for testenv's own commands.
	Redis RedisOptions
	// StartTimeout bounds the wait for the cluster to be ready.
	// Default DefaultTopologyTimeout.
	StartTimeout time.Duration
}

func (o ClusterOptions) withDefaults() ClusterOptions {
	if o.Masters <= 0 {
		o.Masters = 3
	}
	o.Replicas = max(o.Replicas, 0)
	if o.NodeTimeout <= 0 {
		o.NodeTimeout = 5 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultTopologyTimeout
	}
	return o
}

// Cluster is a Redis Cluster on loopback: master nodes, each with the
// same number of replicas.
type Cluster struct {
	nodes   []*Redis // the masters first, then the replicas of each in turn
	masters int      // how many masters serve the slots
	ids     []string // the cluster node ID of each of nodes
}

// StartCluster starts the nodes in cluster mode, gives each master an even
// share of the slots, joins them with CLUSTER MEET, attaches the replicas
// with CLUSTER REPLICATE and waits until every node reports cluster_state:ok
// and knows all the others, and every replica has finished its first sync.
// The caller must Close it.
func StartCluster(opts ClusterOptions) (*Cluster, error) {
	o := opts.withDefaults()
	c := &Cluster{masters: o.Masters}
	ok := false
	defer func() {
		if !ok {
			_ = c.Close()
		}
	}()

	for range o.Masters * (1 + o.Replicas) {
		n, err := startServer(serverSpec{
			program: "redis-server",
			opts:    o.Redis,
			config: func(r *Redis) ([]string, error) {
				bus, err := pickPort()
				if err != nil {
					return nil, err
				}
				r.busPort = bus
				var tlsLinks []string
				if o.Redis.TLS != nil {
					tlsLinks = []string{"tls-cluster yes", "tls-replication yes"}
				}
				return append(append(dataConfig(o.Redis), tlsLinks...),
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
	for _, n := range c.nodes {
		id, err := nodeID(ctx, n)
		if err != nil {
			return nil, err
		}
		c.ids = append(c.ids, id)
	}
	if err := c.join(ctx); err != nil {
		return nil, err
	}
	if err := c.attachReplicas(ctx, o.Replicas); err != nil {
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
	for i, n := range c.nodes[:c.masters] {
		cl := n.adminClient()
		lo, hi := i*clusterSlots/c.masters, (i+1)*clusterSlots/c.masters-1
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

// attachReplicas makes the nodes after the masters replicas of them, n per
// master in turn. A node accepts CLUSTER REPLICATE only once gossip has
// told it of the master, so each is retried until then.
func (c *Cluster) attachReplicas(ctx context.Context, n int) error {
	for i, r := range c.nodes[c.masters:] {
		m := i / n
		err := poll(ctx, fmt.Sprintf("attach %s as a replica of %s", r.Addr(), c.nodes[m].Addr()), func(ctx context.Context) error {
			cl := r.adminClient()
			defer cl.Close()
			return cl.Do(ctx, "CLUSTER", "REPLICATE", c.ids[m]).Err()
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// NewCluster starts a Redis Cluster for one test and closes it when the
// test ends. It fails t on error. At most one ClusterOptions may be given.
func NewCluster(t testing.TB, opts ...ClusterOptions) *Cluster {
	t.Helper()
	skipShort(t, "a redis-server cluster")
	c, err := StartCluster(single(t, opts))
	if err != nil {
		t.Fatal(err)
	}
	cleanupServer(t, c.nodes...)
	return c
}

// Addrs returns the addresses of the nodes.
func (c *Cluster) Addrs() []string { return addrs(c.nodes) }

// TLSAddrs returns the nodes' TLS addresses, for a cluster started with
// Redis.TLS; nil otherwise.
func (c *Cluster) TLSAddrs() []string {
	var out []string
	for _, n := range c.nodes {
		if a := n.TLSAddr(); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// Nodes returns the node processes, for fault injection: the masters
// first (ClusterOptions.Masters of them), then the replicas of the first
// master, of the second and so on. After a Failover the roles differ;
// Role and ReplicasOf tell the current ones. A node that is restarted
// keeps its identity and slots (they are in its nodes.conf) but, without
// AppendOnly, not its data.
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
// served by ClusterOptions.Masters masters, knows every other node and
// agrees with the others on which nodes are masters, and every replica has
// its link to its master up with no sync in progress. Without a deadline
// on ctx it gives up after DefaultTopologyTimeout.
func (c *Cluster) WaitReady(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx, DefaultTopologyTimeout)
	defer cancel()
	return poll(ctx, "wait for cluster_state:ok", c.checkReady)
}

func (c *Cluster) checkReady(ctx context.Context) error {
	masters := map[string]bool{} // node IDs of the nodes whose role is master
	for i, n := range c.nodes {
		f, err := info(ctx, n, "replication")
		if err != nil {
			return err
		}
		switch {
		case f["role"] == "master":
			masters[c.ids[i]] = true
		case f["master_link_status"] != "up" || f["master_sync_in_progress"] != "0":
			return fmt.Errorf("replica %s: link to its master %q, sync in progress %q; want up, 0",
				n.Addr(), f["master_link_status"], f["master_sync_in_progress"])
		}
	}
	if len(masters) != c.masters {
		return fmt.Errorf("%d nodes have the master role, want %d", len(masters), c.masters)
	}
	for _, n := range c.nodes {
		cl := n.adminClient()
		s, err := cl.ClusterInfo(ctx).Result()
		var view string
		if err == nil {
			view, err = cl.ClusterNodes(ctx).Result()
		}
		_ = cl.Close()
		if err != nil {
			return fmt.Errorf("CLUSTER INFO and NODES on %s: %w", n.Addr(), err)
		}
		ci := parseFields(s)
		want := map[string]string{
			"cluster_state":       "ok",
			"cluster_slots_ok":    strconv.Itoa(clusterSlots),
			"cluster_known_nodes": strconv.Itoa(len(c.nodes)),
			"cluster_size":        strconv.Itoa(c.masters),
		}
		for k, v := range want {
			if ci[k] != v {
				return fmt.Errorf("%s reports %s:%s, want %s", n.Addr(), k, ci[k], v)
			}
		}
		if seen := viewMasters(view); !maps.Equal(seen, masters) {
			return fmt.Errorf("%s sees masters %v, the nodes' roles say %v",
				n.Addr(), slices.Sorted(maps.Keys(seen)), slices.Sorted(maps.Keys(masters)))
		}
	}
	return nil
}

// viewMasters returns the IDs of the nodes a CLUSTER NODES reply flags as
// master and not failing.
func viewMasters(nodes string) map[string]bool {
	ids := map[string]bool{}
	for line := range strings.SplitSeq(strings.TrimSpace(nodes), "\n") {
		// <id> <addr> <flags> <master> ...
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		flags := strings.Split(f[2], ",")
		if slices.Contains(flags, "master") && !slices.Contains(flags, "fail") && !slices.Contains(flags, "fail?") {
			ids[f[0]] = true
		}
	}
	return ids
}

// Role returns "master" or "slave", as n's INFO replication reports it.
func (c *Cluster) Role(ctx context.Context, n *Redis) (string, error) {
	f, err := info(ctx, n, "replication")
	if err != nil {
		return "", fmt.Errorf("testenv: %w", err)
	}
	return f["role"], nil
}

// ReplicasOf returns the running nodes that replicate from master, as
// their INFO replication reports it.
func (c *Cluster) ReplicasOf(ctx context.Context, master *Redis) ([]*Redis, error) {
	var out []*Redis
	for _, n := range running(c.nodes) {
		f, err := info(ctx, n, "replication")
		if err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		if f["role"] == "slave" && f["master_port"] == strconv.Itoa(master.Port()) {
			out = append(out, n)
		}
	}
	return out, nil
}

// manualFailoverTimeout is how long a manual failover may take before
// Redis gives it up (CLUSTER_MF_TIMEOUT, 5 s) and a little more: Failover
// asks again after it.
const manualFailoverTimeout = 6 * time.Second

// Failover promotes replica to master of its master's slots with CLUSTER
// FAILOVER (neither FORCE nor TAKEOVER): the master stops taking writes,
// the replica catches up with its replication stream and then takes over,
// so no write the master acknowledged is lost. The old master becomes a
// replica of the new one. Failover returns once replica reports the
// master role and WaitReady's checks pass on every node (Redis gives a
// manual failover up after 5 s; Failover asks again then). Without a
// deadline on ctx it gives up after DefaultTopologyTimeout.
func (c *Cluster) Failover(ctx context.Context, replica *Redis) error {
	ctx, cancel := withDefaultTimeout(ctx, DefaultTopologyTimeout)
	defer cancel()
	role, err := c.Role(ctx, replica)
	if err != nil {
		return err
	}
	if role != "slave" {
		return fmt.Errorf("testenv: failover to %s: it is not a replica (role %q)", replica.Addr(), role)
	}
	var asked time.Time
	return poll(ctx, "wait for "+replica.Addr()+" to take over its master's slots", func(ctx context.Context) error {
		role, err := c.Role(ctx, replica)
		if err != nil {
			return err
		}
		if role != "master" {
			if time.Since(asked) < manualFailoverTimeout {
				return fmt.Errorf("%s still reports role %q", replica.Addr(), role)
			}
			cl := replica.adminClient()
			err := cl.Do(ctx, "CLUSTER", "FAILOVER").Err()
			_ = cl.Close()
			if err != nil {
				return fmt.Errorf("CLUSTER FAILOVER on %s: %w", replica.Addr(), err)
			}
			asked = time.Now()
			return fmt.Errorf("%s was asked to fail over", replica.Addr())
		}
		return c.checkReady(ctx)
	})
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

// MigrateSlot moves slot, with its keys, from the master that serves it
// to the master to, as redis-cli --cluster reshard does: to imports it,
// the owner migrates it, the keys move with MIGRATE a batch at a time
// (clients get ASK redirections meanwhile), and then every master is told
// the new owner (MOVED from then on).
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
	if err := migrateKeys(ctx, src, slot, from, to); err != nil {
		return err
	}
	return c.announceOwner(ctx, slot, from, to, toID)
}

// migrateKeys moves the keys of slot from from (through its client src)
// to to, a batch of MIGRATE at a time, until none are left.
func migrateKeys(ctx context.Context, src *redis.Client, slot int, from, to *Redis) error {
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			return fmt.Errorf("testenv: GETKEYSINSLOT %d on %s: %w", slot, from.Addr(), err)
		}
		if len(keys) == 0 {
			return nil
		}
		args := []any{"MIGRATE", "127.0.0.1", to.Port(), "", 0, 5000, "REPLACE", "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		if err := src.Do(ctx, args...).Err(); err != nil && !errors.Is(err, redis.Nil) && err.Error() != "NOKEY" {
			return fmt.Errorf("testenv: MIGRATE of slot %d from %s to %s: %w", slot, from.Addr(), to.Addr(), err)
		}
	}
}

// announceOwner tells the masters that to (node ID toID) now serves slot:
// the new owner first, then the old one, then the other masters, as
// redis-cli does (replicas refuse SETSLOT and learn from gossip).
func (c *Cluster) announceOwner(ctx context.Context, slot int, from, to *Redis, toID string) error {
	order := []*Redis{to, from}
	for _, n := range c.nodes {
		if n == to || n == from {
			continue
		}
		role, err := c.Role(ctx, n)
		if err != nil {
			return err
		}
		if role == "master" {
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
