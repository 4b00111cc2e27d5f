//go:build chaos

package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/testkit/all/chaos"
	"github.com/baton-go/baton/testkit/testenv"
)

// Timing of a chaos run. The leases are short so that a run sees many
// lapses, and long enough that a busy machine does not lapse them alone.
const (
	roleTTL      = 1500 * time.Millisecond
	roleInterval = 400 * time.Millisecond
	lockHold     = 1500 * time.Millisecond
	lockRetry    = 150 * time.Millisecond
	jobAtMost    = 1200 * time.Millisecond
	jobAtLeast   = 500 * time.Millisecond
	// longest is the longest lease of the run: the restart guard.
	longest  = roleTTL
	prefix   = "baton-chaos"
	roleKey  = "{chaos:chaos}:role"
	lockKey  = "{chaos:chaos}:lock:counter"
	basePort = 7100
	// consulTTLMin is the test agent's session_ttl_min: below every
	// lease of the run.
	consulTTLMin = 100 * time.Millisecond
)

// persistent is the coordination servers' configuration: an append-only
// file, synced every second (syncing every write makes a loaded machine's
// disk the bottleneck of the run). server_restart stops the server
// cleanly, so it comes back with every write; server_restart_empty kills
// it and deletes its files. A restart writes a new AOF base file before it
// answers; on a loaded machine (make test-stress) that took longer than
// testenv's default 10 s.
var persistent = testenv.RedisOptions{AppendOnly: true, Config: []string{"appendfsync everysec"}, StartTimeout: 30 * time.Second}

// cluster is one chaos run's world: the coordination servers (standalone
// or Sentinel), the ledger, the node processes and the nemesis's record.
type cluster struct {
	t        *testing.T
	dir      string
	topology string
	unfenced bool
	args     []string // more node flags

	server     *testenv.Redis    // standalone
	sentinel   *testenv.Sentinel // sentinel topology
	rcluster   *testenv.Cluster  // cluster topology
	consul     *testenv.Consul   // consul topology
	ledger     *chaos.Ledger
	ledgerAt   string
	view       backend.Store // the test's own look at the leases
	viewClient redis.UniversalClient
	nemesis    *chaos.Writer

	mu    sync.Mutex
	nodes []*node // every node slot, in start order
}

// node is one node slot (n1, n2, ...): its ID's port, its proxies, and
// the process of its current incarnation.
type node struct {
	base    string
	port    int
	inc     int // incarnations started so far
	proxies map[string]*testenv.Proxy
	cmd     *exec.Cmd
	exited  chan struct{}
}

func (n *node) name() string { return fmt.Sprintf("%s.%d", n.base, n.inc-1) }

func (n *node) pid() int { return n.cmd.Process.Pid }

func (n *node) running() bool {
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

func newCluster(t *testing.T, topology string, unfenced bool) *cluster {
	t.Helper()
	dir := t.TempDir()
	if *flagOut != "" {
		dir = filepath.Join(*flagOut, strings.ReplaceAll(t.Name(), "/", "-"))
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	c := &cluster{t: t, dir: dir, topology: topology, unfenced: unfenced}
	ledger := testenv.NewRedis(t)
	c.ledgerAt = ledger.Addr()
	c.ledger = chaos.NewLedger(ledger.Client(t))

	var view redis.UniversalClient
	switch topology {
	case "consul":
		c.consul = testenv.NewConsul(t, testenv.ConsulOptions{SessionTTLMin: consulTTLMin})
		cs, err := consulbackend.New(&api.Config{Address: c.consul.Addr()}, consulbackend.WithPrefix(prefix),
			consulbackend.WithSessionTTLMin(consulTTLMin), consulbackend.WithoutRestartGuard())
		if err != nil {
			t.Fatal(err)
		}
		c.view = cs
		t.Cleanup(func() { _ = cs.Close() })
	case "standalone":
		c.server = testenv.NewRedis(t, persistent)
		view = c.server.Client(t)
	case "sentinel":
		c.sentinel = testenv.NewSentinel(t, testenv.SentinelOptions{
			Redis: persistent,
			// Longer than any server pause of the schedule: the
			// failovers are the nemesis's, not the sentinels' own.
			DownAfter: 10 * time.Second,
		})
		view = c.sentinel.FailoverClient(t)
	case "cluster":
		c.rcluster = testenv.NewCluster(t, testenv.ClusterOptions{
			Redis: persistent,
			// Longer than any server pause of the schedule.
			NodeTimeout: 10 * time.Second,
		})
		view = c.rcluster.ClusterClient(t)
	default:
		t.Fatalf("unknown topology %q", topology)
	}
	if view != nil {
		store, err := redisbackend.New(view, redisbackend.WithPrefix(prefix), redisbackend.WithoutRestartGuard())
		if err != nil {
			t.Fatal(err)
		}
		c.view, c.viewClient = store, view
		t.Cleanup(func() { _ = store.Close() })
	}
	var err error
	if c.nemesis, err = chaos.Create(filepath.Join(dir, "nemesis.jsonl")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.nemesis.Close() })
	t.Cleanup(c.killAll) // by pid, also when the test fails
	return c
}

// server is a coordination server the nemesis strikes: a redis-server
// or a Consul agent.
type server interface {
	Addr() string
	Pause() error
	Resume() error
	Restart() error
	RestartEmpty() error
}

// dataServers returns the addresses of the coordination data servers.
func (c *cluster) dataServers() []string {
	var rs []*testenv.Redis
	switch {
	case c.consul != nil:
		return []string{c.consul.Addr()}
	case c.server != nil:
		rs = []*testenv.Redis{c.server}
	case c.sentinel != nil:
		rs = c.sentinel.Servers()
	default:
		rs = c.rcluster.Nodes()
	}
	var addrs []string
	for _, r := range rs {
		addrs = append(addrs, r.Addr())
	}
	return addrs
}

// addNode starts a node in a new slot.
func (c *cluster) addNode() *node {
	c.mu.Lock()
	n := &node{
		base:    fmt.Sprintf("n%d", len(c.nodes)+1),
		port:    basePort + len(c.nodes) + 1,
		proxies: map[string]*testenv.Proxy{},
	}
	c.nodes = append(c.nodes, n)
	c.mu.Unlock()
	for _, addr := range c.dataServers() {
		n.proxies[addr] = testenv.NewProxy(c.t, addr)
	}
	c.start(n)
	return n
}

// start starts the next incarnation of n.
func (c *cluster) start(n *node) {
	c.t.Helper()
	name := fmt.Sprintf("%s.%d", n.base, n.inc)
	args := []string{
		"-name", name, "-port", strconv.Itoa(n.port),
		"-ledger", c.ledgerAt, "-history", filepath.Join(c.dir, name+".jsonl"),
		"-prefix", prefix,
		"-role-ttl", roleTTL.String(), "-role-interval", roleInterval.String(),
		"-hold", lockHold.String(), "-retry", lockRetry.String(),
		"-job-at-most", jobAtMost.String(), "-job-at-least", jobAtLeast.String(),
	}
	if c.unfenced {
		args = append(args, "-unfenced")
	}
	args = append(args, c.args...)
	// Every dial of a data server goes through n's own proxy to it, so
	// a partition cuts n alone off; Sentinels are reached directly.
	var pairs []string
	for from, p := range n.proxies {
		pairs = append(pairs, from+"="+p.Addr())
	}
	args = append(args, "-dial-map", strings.Join(pairs, ","))
	switch {
	case c.consul != nil:
		args = append(args, "-consul", c.consul.Addr(), "-consul-ttl-min", consulTTLMin.String())
	case c.server != nil:
		args = append(args, "-redis", c.server.Addr())
	case c.sentinel != nil:
		args = append(args, "-sentinels", strings.Join(c.sentinel.SentinelAddrs(), ","),
			"-master-name", c.sentinel.MasterName())
	default:
		args = append(args, "-cluster", "-redis", strings.Join(c.rcluster.Addrs(), ","))
	}
	out, err := os.Create(filepath.Join(c.dir, name+".log"))
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(nodeBin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		c.t.Fatalf("start node %s: %v", name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		out.Close()
		close(exited)
	}()
	c.mu.Lock()
	n.cmd, n.exited = cmd, exited
	n.inc++
	c.mu.Unlock()
}

// signal sends sig to n's current process.
func (c *cluster) signal(n *node, sig syscall.Signal) {
	c.t.Helper()
	if err := syscall.Kill(n.pid(), sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		c.t.Fatalf("send %v to node %s (pid %d): %v", sig, n.name(), n.pid(), err)
	}
}

func (c *cluster) kill9(n *node) {
	c.t.Helper()
	c.signal(n, syscall.SIGKILL)
	<-n.exited
}

func (c *cluster) pause(n *node) {
	c.t.Helper()
	c.signal(n, syscall.SIGSTOP)
	if err := testenv.WaitStopped(n.pid(), 10*time.Second); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) resume(n *node) { c.signal(n, syscall.SIGCONT) }

// stopAll stops every node gracefully (SIGCONT, SIGTERM) and waits for
// it, killing any that does not exit in time. Nodes that failed are
// reported.
func (c *cluster) stopAll() {
	c.t.Helper()
	c.mu.Lock()
	nodes := append([]*node(nil), c.nodes...)
	c.mu.Unlock()
	for _, n := range nodes {
		if n.running() {
			_ = syscall.Kill(n.pid(), syscall.SIGCONT)
			_ = syscall.Kill(n.pid(), syscall.SIGTERM)
		}
	}
	deadline := time.After(20 * time.Second)
	for _, n := range nodes {
		select {
		case <-n.exited:
			if code := n.cmd.ProcessState.ExitCode(); code != 0 && code != -1 {
				c.t.Errorf("node %s exited with status %d; see %s", n.name(), code, filepath.Join(c.dir, n.name()+".log"))
			}
		case <-deadline:
			c.t.Errorf("node %s did not stop within 20s of SIGTERM; killing it", n.name())
			c.kill9(n)
		}
	}
}

// killAll kills every node process still running: the cleanup that runs
// also when the test failed half-way.
func (c *cluster) killAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if n.cmd != nil && n.running() {
			_ = syscall.Kill(n.pid(), syscall.SIGKILL)
			<-n.exited
		}
	}
}

// holderOf waits until key has a holder that is one of the running nodes
// and returns that node.
func (c *cluster) holderOf(ctx context.Context, key string) (*node, error) {
	var last error
	for {
		l, err := c.view.Get(ctx, key)
		if err == nil {
			if n := c.byOwner(l.Owner); n != nil && n.running() {
				return n, nil
			}
		} else if !errors.Is(err, backend.ErrNotFound) {
			last = err // the server may be down for a moment
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no running node holds %s (last error: %v): %w", key, last, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// byOwner returns the node whose instance ID starts owner.
func (c *cluster) byOwner(owner string) *node {
	id, _, _ := strings.Cut(owner, "#")
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.nodes {
		if id == "127.0.0.1:chaos:chaos:"+strconv.Itoa(n.port) {
			return n
		}
	}
	return nil
}

// target returns the node a step aims at: the master, the holder of the
// counter's lock, or for VariantLateFire a running node that is not the
// master (its pause ends no tenure, so what the fleet sees afterwards is
// its overdue fire of the locked job, started late).
func (c *cluster) target(ctx context.Context, variant string) (*node, error) {
	key := lockKey
	if variant == chaos.VariantMaster || variant == chaos.VariantLateFire {
		key = roleKey
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := c.holderOf(ctx, key)
	if err != nil || variant != chaos.VariantLateFire {
		return n, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range c.nodes {
		if o != n && o.running() {
			return o, nil
		}
	}
	return n, nil // a fleet of one: the master it is
}

// coordMaster returns the coordination server that takes the writes of
// the fleet's keys (on a cluster: the master of their hash slot).
func (c *cluster) coordMaster(ctx context.Context) (server, error) {
	switch {
	case c.consul != nil:
		return c.consul, nil
	case c.server != nil:
		return c.server, nil
	case c.sentinel != nil:
		return c.sentinel.Master(ctx)
	}
	cc, ok := c.viewClient.(*redis.ClusterClient)
	if !ok {
		return nil, fmt.Errorf("cluster topology without a cluster client")
	}
	m, err := cc.MasterForKey(ctx, c.view.(*redisbackend.Store).LeaseKey(roleKey))
	if err != nil {
		return nil, fmt.Errorf("find the master of %s: %w", roleKey, err)
	}
	addr := m.Options().Addr
	for _, n := range c.rcluster.Nodes() {
		if n.Addr() == addr {
			return n, nil
		}
	}
	return nil, fmt.Errorf("the master of %s is %s, not one of the cluster's nodes", roleKey, addr)
}

// inject runs one step and records it as a fault, from the moment it
// was injected to the moment it healed.
func (c *cluster) inject(ctx context.Context, s chaos.Step) error {
	f := chaos.Event{Kind: chaos.KindFault, Node: "nemesis", Fault: s.Fault, Detail: s.String()}
	var err error
	switch s.Fault {
	case chaos.FaultKill9, chaos.FaultSigstop, chaos.FaultPartition:
		err = c.nodeFault(ctx, s, &f)
	case chaos.FaultServerPause, chaos.FaultServerRestart, chaos.FaultServerRestartEmpty:
		err = c.serverFault(ctx, s, &f)
	case chaos.FaultSentinelFailover:
		if c.sentinel == nil {
			return fmt.Errorf("sentinel_failover on the %s topology", c.topology)
		}
		f.Start = time.Now().UnixNano()
		f.Target, err = c.sentinel.Failover(ctx)
		f.End = time.Now().UnixNano()
	default:
		return fmt.Errorf("unknown fault %q", s.Fault)
	}
	if err != nil {
		return err
	}
	if err := c.nemesis.Write(f); err != nil {
		return err
	}
	c.t.Logf("nemesis: %s at %s: %v", f.Detail, f.Target, time.Duration(f.End-f.Start).Round(time.Millisecond))
	return nil
}

// nodeFault strikes the node the step aims at (the master or the lock
// holder): kill -9 (and start it again at once with the same instance ID,
// a restart overlapping its old lease), SIGSTOP for the step's hold, or a
// cut between it and the coordination servers for the hold.
func (c *cluster) nodeFault(ctx context.Context, s chaos.Step, f *chaos.Event) error {
	n, err := c.target(ctx, s.Variant)
	if err != nil {
		return err
	}
	f.Target, f.Start = n.name(), time.Now().UnixNano()
	switch s.Fault {
	case chaos.FaultKill9:
		c.kill9(n)
		f.End = time.Now().UnixNano()
		c.start(n)
		return nil
	case chaos.FaultSigstop:
		c.pause(n)
		sleep(ctx, s.Hold)
		c.resume(n)
	case chaos.FaultPartition:
		for _, p := range n.proxies {
			p.Blackhole(true)
		}
		sleep(ctx, s.Hold)
		for _, p := range n.proxies {
			p.Blackhole(false)
		}
	}
	f.End = time.Now().UnixNano()
	return nil
}

// serverFault strikes the coordination server that holds the fleet's
// keys: SIGSTOP for the step's hold, a clean restart (it comes back with
// its data), or a restart without its data, plain, while a brand-new
// instance starts, or while the lock holder is paused across it.
func (c *cluster) serverFault(ctx context.Context, s chaos.Step, f *chaos.Event) error {
	srv, err := c.coordMaster(ctx)
	if err != nil {
		return err
	}
	var paused *node
	if s.Variant == chaos.VariantPausedHolder {
		if paused, err = c.target(ctx, chaos.VariantHolder); err != nil {
			return err
		}
		c.pause(paused)
	}
	f.Target, f.Start = srv.Addr(), time.Now().UnixNano()
	switch s.Fault {
	case chaos.FaultServerPause:
		if err := srv.Pause(); err != nil {
			return err
		}
		sleep(ctx, s.Hold)
		err = srv.Resume()
	case chaos.FaultServerRestart:
		err = srv.Restart()
	case chaos.FaultServerRestartEmpty:
		err = srv.RestartEmpty()
	}
	if err != nil {
		return err
	}
	switch s.Variant {
	case chaos.VariantNewNode:
		f.Detail += "; " + c.addNode().name() + " started"
	case chaos.VariantPausedHolder:
		sleep(ctx, s.Hold)
		c.resume(paused)
		f.Detail += "; " + paused.name() + " paused across it"
	}
	f.End = time.Now().UnixNano()
	return nil
}

// waitLive waits until the fleet has a master and the counter moved.
func (c *cluster) waitLive(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := c.holderOf(ctx, roleKey); err != nil {
		return err
	}
	for {
		v, err := c.ledger.Value(ctx, chaos.ResCounter)
		if err != nil {
			return err
		}
		if v > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the counter did not move: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// history stops the nodes and returns the merged history (every node's,
// the nemesis's and the ledger's) and when the stop began.
func (c *cluster) history(ctx context.Context) ([]chaos.Event, int64) {
	c.t.Helper()
	stop := time.Now().UnixNano()
	c.stopAll()
	events, err := chaos.ReadDir(c.dir)
	if err != nil {
		c.t.Fatal(err)
	}
	ledger, err := c.ledger.History(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	return append(events, ledger...), stop
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
