package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/testenv"
)

// DefaultClusterWorkers is ClusterOptions.Workers's default: 16 per
// master of three.
const DefaultClusterWorkers = 48

// clusterTurn is the length of one turn of a cluster in RunCluster.
const clusterTurn = time.Second

// ClusterOptions configures RunCluster.
type ClusterOptions struct {
	// Duration is how long each cluster is measured, in turns of 1 s
	// with the other. Default DefaultDuration.
	Duration time.Duration
	// Workers is the number of goroutines, each locking a key of its own
	// app, so that the keys spread evenly over three masters' slots.
	// Rounded up to a multiple of 3. Default DefaultClusterWorkers.
	Workers int
	// Progress receives a line per step; nil for none.
	Progress io.Writer
}

// ClusterResults is lock throughput on many keys spread over the shards
// of a Redis Cluster of one master and of three, with the same client
// code: a go-redis ClusterClient, redisbackend and synclock.
type ClusterResults struct {
	Setup   string `json:"setup"`
	Workers int    `json:"workers"`
	CPUs    int    `json:"cpus"`
	// Runs holds the cluster of one master, then that of three.
	Runs []ClusterRun `json:"runs"`
	// Ratio is the ops/s of three masters over those of one.
	Ratio float64 `json:"ratio_3_to_1_masters"`
	// ServerBoundRatio is the same ratio of ServerBoundOpsPerS: how the
	// throughput would grow if the busiest server were the limit, each
	// server on a CPU of its own and the clients elsewhere.
	ServerBoundRatio float64 `json:"server_bound_ratio_3_to_1_masters"`
}

// ClusterRun is one cluster's figures.
type ClusterRun struct {
	Masters int     `json:"masters"`
	OpsPerS float64 `json:"ops_per_s"`
	Cycles  int     `json:"cycles"`
	// ServerCPU is each master's CPU use while measured, in CPUs.
	ServerCPU []float64 `json:"server_cpu"`
	// ClientCPU is the benchmark process's CPU use, in CPUs.
	ClientCPU float64 `json:"client_cpu"`
	// ServerBoundOpsPerS is OpsPerS over the busiest master's CPU use:
	// the rate at which that master would use a whole CPU.
	ServerBoundOpsPerS float64 `json:"server_bound_ops_per_s"`
}

// RunCluster starts a Redis Cluster of one master and one of three and
// measures, in turns, uncontended lock+unlock cycles of Workers
// goroutines on keys spread evenly over the three masters' slots.
func RunCluster(ctx context.Context, o ClusterOptions) (*ClusterResults, error) {
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	if o.Workers <= 0 {
		o.Workers = DefaultClusterWorkers
	}
	o.Workers = (o.Workers + 2) / 3 * 3
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	res := &ClusterResults{
		Setup: "synclock.Locker per app on redisbackend on one go-redis ClusterClient (pool " +
			"of workers+8 connections per node); each worker locks and unlocks its own app's key, " +
			"the apps' hash tags spread evenly over the three masters' slots",
		Workers: o.Workers,
		CPUs:    runtime.NumCPU(),
	}
	var sets []turnSet
	var clusters []*testenv.Cluster
	defer func() {
		for _, c := range clusters {
			_ = c.Close()
		}
	}()
	for _, masters := range []int{1, 3} {
		c, err := testenv.StartCluster(testenv.ClusterOptions{Masters: masters})
		if err != nil {
			return nil, err
		}
		clusters = append(clusters, c)
	}
	apps, err := spreadApps(ctx, clusters[1], o.Workers)
	if err != nil {
		return nil, err
	}
	for i, c := range clusters {
		set, closeSet, err := clusterSet(c, apps)
		if err != nil {
			return nil, err
		}
		defer closeSet()
		set.name = fmt.Sprintf("cluster of %d master(s)", len(c.Addrs()))
		sets = append(sets, set)
		res.Runs = append(res.Runs, ClusterRun{Masters: []int{1, 3}[i]})
	}
	fmt.Fprintf(o.Progress, "lockbench: cluster: %d workers on 1 master and on 3, %v each in turns of %v\n",
		o.Workers, o.Duration, clusterTurn)
	totals, err := runTurns(ctx, sets, o.Duration, clusterTurn)
	if err != nil {
		return nil, fmt.Errorf("bench: cluster: %w", err)
	}
	for i, t := range totals {
		r := &res.Runs[i]
		r.OpsPerS, r.Cycles = round(t.opsPerS(), 1), t.cycles
		r.ServerCPU = t.serverShares()
		r.ClientCPU = round(t.clientCPU/t.seconds, 3)
		if busiest := slices.Max(r.ServerCPU); busiest > 0 {
			r.ServerBoundOpsPerS = round(r.OpsPerS/busiest, 1)
		}
	}
	one, three := res.Runs[0], res.Runs[1]
	if one.OpsPerS > 0 {
		res.Ratio = round(three.OpsPerS/one.OpsPerS, 3)
	}
	if one.ServerBoundOpsPerS > 0 {
		res.ServerBoundRatio = round(three.ServerBoundOpsPerS/one.ServerBoundOpsPerS, 3)
	}
	return res, nil
}

// spreadApps returns n app names whose hash tags ({bench:app}) fall on
// the masters of c, n/len(masters) on each.
func spreadApps(ctx context.Context, c *testenv.Cluster, n int) ([]string, error) {
	rdb := redis.NewClusterClient(c.ClusterOptions())
	defer rdb.Close()
	per := map[string]int{}
	var apps []string
	for i := 0; len(apps) < n && i < 100*n; i++ {
		app := fmt.Sprintf("app%d", i)
		slot, err := rdb.ClusterKeySlot(ctx, "{bench:"+app+"}").Result()
		if err != nil {
			return nil, fmt.Errorf("bench: CLUSTER KEYSLOT: %w", err)
		}
		owner, err := c.SlotOwner(ctx, int(slot))
		if err != nil {
			return nil, err
		}
		if per[owner.Addr()] < n/len(c.Addrs()) {
			per[owner.Addr()]++
			apps = append(apps, app)
		}
	}
	if len(apps) < n {
		return nil, fmt.Errorf("bench: found %d of %d apps spread over the masters: %v", len(apps), n, per)
	}
	return apps, nil
}

// clusterSet builds one worker's locker per app on a cluster client of c
// and returns them with admin clients of c's nodes, and the function that
// closes them all.
func clusterSet(c *testenv.Cluster, apps []string) (turnSet, func(), error) {
	opts := c.ClusterOptions()
	opts.PoolSize = len(apps) + 8 // no worker waits for a connection
	rdb := redis.NewClusterClient(opts)
	var closers []func() error
	closeAll := func() {
		for _, f := range slices.Backward(closers) {
			_ = f()
		}
	}
	closers = append(closers, rdb.Close)
	store, err := redisbackend.New(rdb, redisbackend.WithoutRestartGuard()) // new servers
	if err != nil {
		closeAll()
		return turnSet{}, nil, err
	}
	closers = append(closers, store.Close)
	var set turnSet
	for i, app := range apps {
		id, err := instanceid.New("127.0.0.1", "bench", app, 1+i)
		if err != nil {
			closeAll()
			return turnSet{}, nil, err
		}
		lk, err := synclock.NewLocker(store, id, synclock.Config{})
		if err != nil {
			closeAll()
			return turnSet{}, nil, err
		}
		set.lockers = append(set.lockers, batonLocker{m: lk.Mutex("scale")})
	}
	for _, addr := range c.Addrs() {
		admin := redis.NewClient(&redis.Options{Addr: addr})
		closers = append(closers, admin.Close)
		set.servers = append(set.servers, admin)
	}
	return set, closeAll, nil
}

// ReplicaAckOptions configures RunReplicaAck.
type ReplicaAckOptions struct {
	// Duration is how long each store is measured, in turns of 250 ms
	// with the other. Default DefaultDuration.
	Duration time.Duration
	// Progress receives a line per step; nil for none.
	Progress io.Writer
}

// ReplicaAckResults is the cost of redisbackend.WithReplicaAck(1):
// uncontended lock+unlock cycles of one goroutine on a master with one
// replica (a Sentinel topology), with every grant acknowledged by the
// replica (WAIT 1) and without.
type ReplicaAckResults struct {
	Setup string `json:"setup"`
	// Runs holds the store without WithReplicaAck, then the one with.
	Runs []ReplicaAckRun `json:"runs"`
	// Ratio is the ops/s with WithReplicaAck(1) over those without.
	Ratio float64 `json:"ratio_with_to_without"`
}

// ReplicaAckRun is one store's figures.
type ReplicaAckRun struct {
	Name    string  `json:"name"`
	OpsPerS float64 `json:"ops_per_s"`
	Cycles  int     `json:"cycles"`
	// CycleUS is the mean time of one lock+unlock cycle.
	CycleUS float64 `json:"cycle_us"`
	// MasterCPUUSPerOp and ReplicaCPUUSPerOp are the CPU time the master
	// and the replica used per cycle.
	MasterCPUUSPerOp  float64 `json:"master_cpu_us_per_op"`
	ReplicaCPUUSPerOp float64 `json:"replica_cpu_us_per_op"`
}

// RunReplicaAck starts a master with one replica (and the three sentinels
// that watch them) and measures, in turns, one goroutine's uncontended
// lock+unlock cycles with a store made with WithReplicaAck(1, 1s) and
// with one made without.
func RunReplicaAck(ctx context.Context, o ReplicaAckOptions) (*ReplicaAckResults, error) {
	if o.Duration <= 0 {
		o.Duration = DefaultDuration
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	sn, err := testenv.StartSentinel(testenv.SentinelOptions{Replicas: 1})
	if err != nil {
		return nil, err
	}
	defer sn.Close()
	var closers []func() error
	defer func() {
		for _, f := range slices.Backward(closers) {
			_ = f()
		}
	}()
	var admins []*redis.Client
	for _, r := range sn.Servers() { // the master, then the replica
		admin := redis.NewClient(&redis.Options{Addr: r.Addr()})
		closers = append(closers, admin.Close)
		admins = append(admins, admin)
	}
	res := &ReplicaAckResults{
		Setup: "synclock.Locker on redisbackend on a go-redis failover client; master, one replica, " +
			"three sentinels; one goroutine, lock+unlock cycles back to back",
	}
	var sets []turnSet
	for i, opts := range [][]redisbackend.Option{nil, {redisbackend.WithReplicaAck(1, time.Second)}} {
		name := []string{"without", "WithReplicaAck(1)"}[i]
		rdb := redis.NewFailoverClient(sn.FailoverOptions())
		closers = append(closers, rdb.Close)
		store, err := redisbackend.New(rdb, append([]redisbackend.Option{redisbackend.WithoutRestartGuard()}, opts...)...) // new servers
		if err != nil {
			return nil, err
		}
		closers = append(closers, store.Close)
		id, err := instanceid.New("127.0.0.1", "bench", "bench", 1+i)
		if err != nil {
			return nil, err
		}
		lk, err := synclock.NewLocker(store, id, synclock.Config{})
		if err != nil {
			return nil, err
		}
		sets = append(sets, turnSet{
			name:    name,
			lockers: []Locker{batonLocker{m: lk.Mutex(runKey("replica-ack", name))}},
			servers: admins,
		})
		res.Runs = append(res.Runs, ReplicaAckRun{Name: name})
	}
	fmt.Fprintf(o.Progress, "lockbench: replica ack: one goroutine with and without WithReplicaAck(1), %v each in turns of %v\n",
		o.Duration, sliceLen)
	totals, err := runTurns(ctx, sets, o.Duration, sliceLen)
	if err != nil {
		return nil, fmt.Errorf("bench: replica ack: %w", err)
	}
	for i, t := range totals {
		r := &res.Runs[i]
		if t.cycles == 0 {
			return nil, errors.New("bench: replica ack: no lock+unlock cycle completed")
		}
		r.OpsPerS, r.Cycles = round(t.opsPerS(), 1), t.cycles
		r.CycleUS = round(t.seconds/float64(t.cycles)*1e6, 1)
		r.MasterCPUUSPerOp = round(t.serverCPU[0]/float64(t.cycles)*1e6, 1)
		r.ReplicaCPUUSPerOp = round(t.serverCPU[1]/float64(t.cycles)*1e6, 1)
	}
	res.Ratio = round(res.Runs[1].OpsPerS/res.Runs[0].OpsPerS, 3)
	return res, nil
}
