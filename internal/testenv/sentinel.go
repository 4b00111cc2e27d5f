package testenv

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultMasterName is the name sentinels monitor the master under.
const DefaultMasterName = "baton"

// DefaultTopologyTimeout bounds the wait for a whole Sentinel or Cluster
// topology to become ready, and for Failover.
const DefaultTopologyTimeout = 30 * time.Second

// SentinelOptions configures a Sentinel topology. Zero fields take the
// defaults named on each.
type SentinelOptions struct {
	// MasterName is the name the sentinels monitor. Default DefaultMasterName.
	MasterName string
	// Replicas is the number of replicas of the master. Default 1.
	Replicas int
	// Sentinels is the number of redis-sentinel processes; the quorum is a
	// majority of them. Default 3.
	Sentinels int
	// DownAfter is sentinel down-after-milliseconds: how long the master may
	// be silent before a sentinel deems it down. Default 2 s.
	DownAfter time.Duration
	// FailoverTimeout is sentinel failover-timeout. Default 10 s.
	FailoverTimeout time.Duration
	// Redis configures the master and the replicas. With Redis.TLS set the
	// whole topology speaks TLS: the replicas replicate and the sentinels
	// monitor over the servers' TLS ports, the sentinels listen with TLS
	// too (SentinelTLSAddrs) with the same certificates, and they report
	// the servers' TLS addresses. The plain ports stay, for testenv's own
	// commands.
	Redis RedisOptions
	// StartTimeout bounds the wait for the whole topology to be ready.
	// Default DefaultTopologyTimeout.
	StartTimeout time.Duration
}

func (o SentinelOptions) withDefaults() SentinelOptions {
	if o.MasterName == "" {
		o.MasterName = DefaultMasterName
	}
	if o.Replicas <= 0 {
		o.Replicas = 1
	}
	if o.Sentinels <= 0 {
		o.Sentinels = 3
	}
	if o.DownAfter <= 0 {
		o.DownAfter = 2 * time.Second
	}
	if o.FailoverTimeout <= 0 {
		o.FailoverTimeout = 10 * time.Second
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultTopologyTimeout
	}
	return o
}

// Sentinel is a master, its replicas and the redis-sentinel processes that
// watch them, all on loopback.
type Sentinel struct {
	name      string
	servers   []*Redis // data servers; servers[0] started as the master
	sentinels []*Redis
}

// StartSentinel starts a Sentinel topology (by default one master, one
// replica and three sentinels monitoring DefaultMasterName) and waits until
// it is ready: replication is up and every sentinel knows the master, the
// replicas and the other sentinels. The caller must Close it.
func StartSentinel(opts SentinelOptions) (*Sentinel, error) {
	o := opts.withDefaults()
	s := &Sentinel{name: o.MasterName}
	ok := false
	defer func() {
		if !ok {
			_ = s.Close()
		}
	}()

	var sentinelTLS []string
	if o.Redis.TLS != nil {
		sentinelTLS = []string{"tls-replication yes"}
		o.Redis.Config = append(slices.Clone(o.Redis.Config), sentinelTLS...)
	}
	master, err := StartRedis(o.Redis)
	if err != nil {
		return nil, err
	}
	s.servers = append(s.servers, master)
	replicaOf := fmt.Sprintf("replicaof 127.0.0.1 %d", master.linkPort())
	for range o.Replicas {
		r, err := startServer(serverSpec{
			program: "redis-server",
			opts:    o.Redis,
			config: func(*Redis) ([]string, error) {
				return append(dataConfig(o.Redis), replicaOf), nil
			},
		})
		if err != nil {
			return nil, err
		}
		s.servers = append(s.servers, r)
	}

	ctx, cancel := context.WithTimeout(context.Background(), o.StartTimeout)
	defer cancel()
	// Sentinels learn the replicas from the master's INFO: start them only
	// once the replicas are attached.
	if err := poll(ctx, "wait for replication", func(ctx context.Context) error {
		return checkReplication(ctx, master, s.servers[1:])
	}); err != nil {
		return nil, err
	}

	monitor := []string{
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d", o.MasterName, master.linkPort(), o.Sentinels/2+1),
		fmt.Sprintf("sentinel down-after-milliseconds %s %d", o.MasterName, o.DownAfter.Milliseconds()),
		fmt.Sprintf("sentinel failover-timeout %s %d", o.MasterName, o.FailoverTimeout.Milliseconds()),
		fmt.Sprintf("sentinel parallel-syncs %s 1", o.MasterName),
	}
	for range o.Sentinels {
		sn, err := startServer(serverSpec{
			program: "redis-sentinel",
			opts:    RedisOptions{StartTimeout: o.Redis.StartTimeout, TLS: o.Redis.TLS, TLSAuthClients: o.Redis.TLSAuthClients},
			config:  func(*Redis) ([]string, error) { return append(sentinelTLS, monitor...), nil },
		})
		if err != nil {
			return nil, err
		}
		s.sentinels = append(s.sentinels, sn)
	}
	if err := s.WaitReady(ctx); err != nil {
		return nil, err
	}
	ok = true
	return s, nil
}

// NewSentinel starts a Sentinel topology for one test and closes it when the
// test ends. It fails t on error. At most one SentinelOptions may be given.
func NewSentinel(t testing.TB, opts ...SentinelOptions) *Sentinel {
	t.Helper()
	skipShort(t, "redis-sentinel")
	s, err := StartSentinel(single(t, opts))
	if err != nil {
		t.Fatal(err)
	}
	cleanupServer(t, append(slices.Clone(s.sentinels), s.servers...)...)
	return s
}

// MasterName returns the name the sentinels monitor.
func (s *Sentinel) MasterName() string { return s.name }

// SentinelTLSAddrs returns the sentinels' TLS addresses, for a topology
// started with Redis.TLS; nil otherwise.
func (s *Sentinel) SentinelTLSAddrs() []string {
	var out []string
	for _, sn := range s.sentinels {
		if a := sn.TLSAddr(); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// SentinelAddrs returns the addresses of the sentinels.
func (s *Sentinel) SentinelAddrs() []string { return addrs(s.sentinels) }

// Sentinels returns the sentinel processes, for fault injection.
func (s *Sentinel) Sentinels() []*Redis { return slices.Clone(s.sentinels) }

// Servers returns the data servers. The first one started as the master;
// after a failover any of them may be.
func (s *Sentinel) Servers() []*Redis { return slices.Clone(s.servers) }

// Server returns the data server listening on addr (its plain or its TLS
// address), or nil.
func (s *Sentinel) Server(addr string) *Redis {
	for _, r := range s.servers {
		if r.Addr() == addr || r.TLSAddr() == addr {
			return r
		}
	}
	return nil
}

// MasterAddr returns the master's address as reported by a majority of the
// sentinels.
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	votes := map[string]int{}
	var errs []error
	for _, sn := range s.sentinels {
		addr, err := s.askMaster(ctx, sn)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		votes[addr]++
		if votes[addr] > len(s.sentinels)/2 {
			return addr, nil
		}
	}
	return "", fmt.Errorf("testenv: no majority of sentinels agrees on master %q (votes %v): %w",
		s.name, votes, errors.Join(errs...))
}

// Master returns the data server the sentinels currently report as master.
func (s *Sentinel) Master(ctx context.Context) (*Redis, error) {
	addr, err := s.MasterAddr(ctx)
	if err != nil {
		return nil, err
	}
	if r := s.Server(addr); r != nil {
		return r, nil
	}
	return nil, fmt.Errorf("testenv: sentinels report master %s, which is not one of ours", addr)
}

// FailoverOptions returns go-redis options for a client that finds the
// master through the sentinels.
func (s *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{MasterName: s.name, SentinelAddrs: s.SentinelAddrs()}
}

// FailoverClient returns a new Sentinel-aware client, closed when t ends.
func (s *Sentinel) FailoverClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(s.FailoverOptions())
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Failover forces a failover (SENTINEL FAILOVER) and returns the new
// master's address once every running sentinel reports it, it has taken
// the master role and every sentinel has ended the failover. The old
// master, if it is still up, is made a replica of the new one (as Sentinel
// itself would do some seconds later), so that the topology is whole again
// and Failover can be called again, or the new master killed. Without a
// deadline on ctx, Failover gives up after DefaultTopologyTimeout.
func (s *Sentinel) Failover(ctx context.Context) (string, error) {
	ctx, cancel := withDefaultTimeout(ctx, DefaultTopologyTimeout)
	defer cancel()

	old, err := s.MasterAddr(ctx)
	if err != nil {
		return "", err
	}
	if err := s.sendFailover(ctx); err != nil {
		return "", err
	}
	newAddr, err := s.awaitNewMaster(ctx, old)
	if err != nil {
		return "", err
	}
	newMaster := s.Server(newAddr)
	if newMaster == nil {
		return "", fmt.Errorf("testenv: sentinels report master %s, which is not one of ours", newAddr)
	}
	if err := awaitMasterRole(ctx, newMaster, newAddr); err != nil {
		return "", err
	}

	if oldMaster := s.Server(old); oldMaster != nil && oldMaster.Running() {
		if err := reattach(ctx, oldMaster, newMaster); err != nil {
			return "", err
		}
	}
	if err := poll(ctx, "wait for every sentinel to end the failover", s.checkFailoverEnded); err != nil {
		return "", err
	}
	return newAddr, nil
}

// sendFailover sends SENTINEL FAILOVER until a running sentinel accepts
// it. A sentinel refuses while it has no fresh news of a replica or while
// a failover is in progress; both pass.
func (s *Sentinel) sendFailover(ctx context.Context) error {
	return poll(ctx, "send SENTINEL FAILOVER", func(ctx context.Context) error {
		var errs []error
		for _, sn := range running(s.sentinels) {
			c := redis.NewSentinelClient(sn.adminOptions())
			err := c.Failover(ctx, s.name).Err()
			_ = c.Close()
			if err == nil {
				return nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", sn.Addr(), err))
		}
		return errors.Join(append(errs, errors.New("no sentinel accepted"))...)
	})
}

// awaitNewMaster waits until every running sentinel reports one master
// other than old, and returns its address.
func (s *Sentinel) awaitNewMaster(ctx context.Context, old string) (string, error) {
	var newAddr string
	err := poll(ctx, "wait for the sentinels to report a new master", func(ctx context.Context) error {
		seen := map[string]bool{}
		for _, sn := range running(s.sentinels) {
			addr, err := s.askMaster(ctx, sn)
			if err != nil {
				return err
			}
			seen[addr] = true
			newAddr = addr
		}
		if len(seen) != 1 || seen[old] {
			return fmt.Errorf("sentinels report %v, old master %s", slices.Sorted(maps.Keys(seen)), old)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return newAddr, nil
}

// awaitMasterRole waits until the promoted server, which the sentinels
// report at newAddr, reports the master role.
func awaitMasterRole(ctx context.Context, newMaster *Redis, newAddr string) error {
	return poll(ctx, "wait for the new master to take the role", func(ctx context.Context) error {
		f, err := info(ctx, newMaster, "replication")
		if err != nil {
			return err
		}
		if f["role"] != "master" {
			return fmt.Errorf("%s reports role %q", newAddr, f["role"])
		}
		return nil
	})
}

// checkFailoverEnded fails while a running sentinel still has a failover of
// the master in progress. Until it ends, the sentinel that led it answers
// the promoted replica's address; and should that replica die before the
// end, the leader never ends it (it waits for the promoted replica to be
// reachable) and goes on answering the dead address even after the other
// sentinels have failed over again (seen with Redis 7.0.15), so a client
// that asks it dials a dead master.
func (s *Sentinel) checkFailoverEnded(ctx context.Context) error {
	for _, sn := range running(s.sentinels) {
		c := redis.NewSentinelClient(sn.adminOptions())
		m, err := c.Master(ctx, s.name).Result()
		_ = c.Close()
		if err != nil {
			return fmt.Errorf("SENTINEL MASTER %s on %s: %w", s.name, sn.Addr(), err)
		}
		if strings.Contains(m["flags"], "failover_in_progress") {
			return fmt.Errorf("sentinel %s: failover of %s still in progress (flags %s, state %s)", sn.Addr(), s.name, m["flags"], m["failover-state"])
		}
	}
	return nil
}

// reattach makes r a replica of master the way Sentinel reconfigures an
// instance (REPLICAOF, CONFIG REWRITE and dropping its clients so they look
// for the new master, in one transaction) and waits for the link to come up.
// A server that does not answer at once, such as a paused one, is left alone.
func reattach(ctx context.Context, r, master *Redis) error {
	short, cancel := context.WithTimeout(ctx, time.Second)
	c := r.adminClient()
	_, err := c.TxPipelined(short, func(p redis.Pipeliner) error {
		p.ReplicaOf(short, "127.0.0.1", strconv.Itoa(master.linkPort()))
		p.ConfigRewrite(short)
		p.ClientKillByFilter(short, "TYPE", "normal")
		p.ClientKillByFilter(short, "TYPE", "pubsub")
		return nil
	})
	_ = c.Close()
	cancel()
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("testenv: make old master %s a replica of %s: %w", r.Addr(), master.Addr(), err)
	}
	return poll(ctx, "wait for the old master to follow the new one", func(ctx context.Context) error {
		return checkReplication(ctx, master, []*Redis{r})
	})
}

// WaitReady waits until the topology is whole: every sentinel reports the
// same master, which has the master role; every other data server replicates
// from it with its link up; and every sentinel sees the others and the
// replicas as healthy (so that a failover can start at once). All processes
// must be running. Without a deadline on ctx it gives up after
// DefaultTopologyTimeout.
func (s *Sentinel) WaitReady(ctx context.Context) error {
	ctx, cancel := withDefaultTimeout(ctx, DefaultTopologyTimeout)
	defer cancel()
	return poll(ctx, "wait for sentinel topology "+s.name, s.checkReady)
}

func (s *Sentinel) checkReady(ctx context.Context) error {
	var master string
	for _, sn := range s.sentinels {
		addr, err := s.askMaster(ctx, sn)
		if err != nil {
			return err
		}
		if master != "" && addr != master {
			return fmt.Errorf("sentinels disagree on the master: %s and %s", master, addr)
		}
		master = addr
	}
	m := s.Server(master)
	if m == nil {
		return fmt.Errorf("sentinels report master %s, which is not one of ours", master)
	}
	var replicas []*Redis
	for _, r := range s.servers {
		if r != m {
			replicas = append(replicas, r)
		}
	}
	if err := checkReplication(ctx, m, replicas); err != nil {
		return err
	}
	for _, sn := range s.sentinels {
		if err := s.checkSentinelView(ctx, sn, replicas); err != nil {
			return err
		}
	}
	return nil
}

// checkSentinelView checks that sn sees the other sentinels and the replicas
// as up, with recent INFO from each replica.
func (s *Sentinel) checkSentinelView(ctx context.Context, sn *Redis, replicas []*Redis) error {
	c := redis.NewSentinelClient(sn.adminOptions())
	defer c.Close()
	peers, err := c.Sentinels(ctx, s.name).Result()
	if err != nil {
		return fmt.Errorf("SENTINEL SENTINELS on %s: %w", sn.Addr(), err)
	}
	if n := countHealthy(peers, nil); n < len(s.sentinels)-1 {
		return fmt.Errorf("sentinel %s sees %d healthy peers, want %d", sn.Addr(), n, len(s.sentinels)-1)
	}
	seen, err := c.Replicas(ctx, s.name).Result()
	if err != nil {
		return fmt.Errorf("SENTINEL REPLICAS on %s: %w", sn.Addr(), err)
	}
	for _, r := range replicas {
		if countHealthy(seen, r) != 1 {
			return fmt.Errorf("sentinel %s does not yet see replica %s as healthy", sn.Addr(), r.Addr())
		}
	}
	return nil
}

// countHealthy counts the entries of a SENTINEL SENTINELS/REPLICAS reply
// that are up and, if only is set, are that server. A replica also needs
// INFO fresher than Sentinel's own 30 s validity limit.
func countHealthy(entries []map[string]string, only *Redis) int {
	n := 0
	for _, e := range entries {
		if only != nil && net.JoinHostPort(e["ip"], e["port"]) != only.linkAddr() {
			continue
		}
		flags := e["flags"]
		if strings.Contains(flags, "down") || strings.Contains(flags, "disconnected") {
			continue
		}
		if only != nil {
			if ms, err := strconv.ParseInt(e["info-refresh"], 10, 64); err != nil || ms > 30_000 {
				continue
			}
		}
		n++
	}
	return n
}

// checkReplication checks that master has the master role and every replica
// replicates from it with the link up.
func checkReplication(ctx context.Context, master *Redis, replicas []*Redis) error {
	f, err := info(ctx, master, "replication")
	if err != nil {
		return err
	}
	if f["role"] != "master" {
		return fmt.Errorf("%s reports role %q, want master", master.Addr(), f["role"])
	}
	for _, r := range replicas {
		f, err := info(ctx, r, "replication")
		if err != nil {
			return err
		}
		if f["role"] != "slave" || f["master_port"] != strconv.Itoa(master.linkPort()) || f["master_link_status"] != "up" {
			return fmt.Errorf("%s: role %q, master port %q, link %q; want replica of %s with link up",
				r.Addr(), f["role"], f["master_port"], f["master_link_status"], master.Addr())
		}
	}
	return nil
}

// askMaster asks one sentinel for the master's address.
func (s *Sentinel) askMaster(ctx context.Context, sn *Redis) (string, error) {
	c := redis.NewSentinelClient(sn.adminOptions())
	defer c.Close()
	hp, err := c.GetMasterAddrByName(ctx, s.name).Result()
	if err != nil {
		return "", fmt.Errorf("SENTINEL GET-MASTER-ADDR-BY-NAME %s on %s: %w", s.name, sn.Addr(), err)
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("sentinel %s answered %v for master %s", sn.Addr(), hp, s.name)
	}
	return net.JoinHostPort(hp[0], hp[1]), nil
}

// running returns the servers of rs whose process is alive.
func running(rs []*Redis) []*Redis {
	var up []*Redis
	for _, r := range rs {
		if r.Running() {
			up = append(up, r)
		}
	}
	return up
}

// Close kills every process of the topology and removes their directories.
func (s *Sentinel) Close() error {
	return closeAll(append(slices.Clone(s.sentinels), s.servers...))
}

func closeAll(rs []*Redis) error {
	var errs []error
	for _, r := range rs {
		errs = append(errs, r.Close())
	}
	return errors.Join(errs...)
}

func addrs(rs []*Redis) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Addr()
	}
	return out
}
