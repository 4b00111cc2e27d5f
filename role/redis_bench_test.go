package role_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/testkit/testenv"
)

// These benchmarks run on a private redis-server and report latencies as
// custom metrics; compare them across runs, never assert them in tests.

func percentile(ms []float64, p float64) float64 {
	if len(ms) == 0 {
		return 0
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

func reportLatencies(b *testing.B, name string, ms []float64) {
	b.ReportMetric(percentile(ms, 0.50), name+"-p50-ms")
	b.ReportMetric(percentile(ms, 0.99), name+"-p99-ms")
	b.ReportMetric(float64(len(ms)), name+"-samples")
}

// electedAt returns an option that sends the time of each election.
func electedAt(ch chan<- time.Time) role.Option {
	return role.OnElected(func(context.Context) { ch <- time.Now() })
}

// BenchmarkHandover measures a graceful handover on real Redis: from the
// master's Stop to the other instance's election (its OnElected call).
// Goal: p50 <= 5 ms.
func BenchmarkHandover(b *testing.B) {
	r := testenv.NewRedis(b)
	cfg := role.Config{HeartbeatInterval: time.Second, HeartbeatExpiration: 3 * time.Second}
	elected := make(chan time.Time, 4)
	var els []*role.Elector
	for i := range 2 {
		el, err := role.NewElector(redisStore(b, r), id(b, 6000+i), cfg, quiet, electedAt(elected))
		if err != nil {
			b.Fatal(err)
		}
		if err := el.Launch(); err != nil {
			b.Fatal(err)
		}
		els = append(els, el)
	}
	defer stopAll(b, els...)
	<-elected
	var ms []float64
	b.ResetTimer()
	for range b.N {
		m := master(els)
		if m == nil {
			b.Fatal("no single master")
		}
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		if err := m.Halt(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		select {
		case at := <-elected:
			ms = append(ms, float64(at.Sub(start))/float64(time.Millisecond))
		case <-time.After(patience):
			b.Fatal("no handover")
		}
		if err := m.Launch(); err != nil { // rejoin as a slave
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportLatencies(b, "handover", ms)
}

// BenchmarkFailover measures a crash failover on real Redis: the master
// stops talking to Redis without releasing, and the metric is how long
// after its key expired on the server the next master was elected.
// Goal: <= 100 ms over the TTL. Each op is 10 failovers; the TTL is
// reported too (ttl-ms), for bench/gobench.txt's readers.
func BenchmarkFailover(b *testing.B) {
	r := testenv.NewRedis(b)
	cfg := role.Config{HeartbeatInterval: 100 * time.Millisecond, HeartbeatExpiration: 300 * time.Millisecond}
	elected := make(chan time.Time, 8)
	var els []*role.Elector
	var cuts []*role.Flaky
	for i := range 3 {
		c := &role.Flaky{Store: redisStore(b, r)}
		el, err := role.NewElector(c, id(b, 6100+i), cfg, quiet, electedAt(elected))
		if err != nil {
			b.Fatal(err)
		}
		if err := el.Launch(); err != nil {
			b.Fatal(err)
		}
		els, cuts = append(els, el), append(cuts, c)
	}
	defer stopAll(b, els...)
	<-elected
	probe := redisStore(b, r)
	var over []float64
	b.ResetTimer()
	for range b.N * 10 {
		var m *role.Elector
		deadline := time.Now().Add(patience)
		for m = master(els); m == nil; m = master(els) {
			if time.Now().After(deadline) {
				b.Fatal("no single master")
			}
			time.Sleep(time.Millisecond)
		}
		i := slices.Index(els, m)
		cuts[i].Cut(true)
		// Read when the key expires on the server: it can no longer be
		// renewed, so its remaining TTL is final.
		sent := time.Now()
		l, err := probe.Get(context.Background(), m.Status().Key)
		if err != nil {
			b.Fatal(err)
		}
		expires := sent.Add(l.TTL)
		select {
		case at := <-elected:
			over = append(over, float64(at.Sub(expires))/float64(time.Millisecond))
		case <-time.After(patience):
			b.Fatal("no failover")
		}
		// Bring the crashed instance back as a slave.
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		m.Halt(ctx)
		cancel()
		cuts[i].Cut(false)
		if err := m.Launch(); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	reportLatencies(b, "failover-over-ttl", over)
	b.ReportMetric(float64(cfg.HeartbeatExpiration)/float64(time.Millisecond), "ttl-ms")
}

// clientCommands sums the calls of the commands baton's clients send
// (scripts, subscriptions, pings), leaving out the commands the scripts
// run inside the server.
func clientCommands(b *testing.B, rdb *redis.Client) int64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "cmdstat_evalsha", "cmdstat_eval", "cmdstat_subscribe", "cmdstat_unsubscribe", "cmdstat_ping":
		default:
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		v, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			b.Fatalf("commandstats line %q: %v", line, err)
		}
		n += v
	}
	return n
}

// BenchmarkScale10k starts 10,000 electors in one process, sharing one
// client, against one redis-server, and reports the Redis commands each
// sends per heartbeat interval once the election is settled, beside the
// number of electors. Goal: <= 1 command per elector per interval.
func BenchmarkScale10k(b *testing.B) {
	const electors = 10000
	const intervals = 6
	r := testenv.NewRedis(b)
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr(), PoolSize: 64})
	defer rdb.Close()
	store, err := redisbackend.New(rdb, redisbackend.WithoutRestartGuard()) // a server started for the benchmark
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	cfg := role.Config{HeartbeatInterval: time.Second, HeartbeatExpiration: 3 * time.Second}
	for range b.N {
		els := make([]*role.Elector, electors)
		for i := range els {
			v, err := instanceidFor(i)
			if err != nil {
				b.Fatal(err)
			}
			el, err := role.NewElector(store, v, cfg, quiet)
			if err != nil {
				b.Fatal(err)
			}
			if err := el.Launch(); err != nil {
				b.Fatal(err)
			}
			els[i] = el
		}
		// Settled: one master, and every elector has claimed once.
		deadline := time.Now().Add(time.Minute)
		for {
			if master(els) != nil && allSeeMaster(els) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the election did not settle within a minute")
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(2 * cfg.HeartbeatInterval) // let the first member heartbeats pass
		before := clientCommands(b, rdb)
		time.Sleep(intervals * cfg.HeartbeatInterval)
		after := clientCommands(b, rdb)
		b.ReportMetric(float64(after-before)/electors/intervals, "cmds/elector/interval")
		b.ReportMetric(electors, "electors")
		if master(els) == nil {
			b.Fatal("no single master at the end")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var wg sync.WaitGroup
		for _, el := range els {
			wg.Go(func() { el.Halt(ctx) })
		}
		wg.Wait()
		cancel()
	}
}

func allSeeMaster(els []*role.Elector) bool {
	for _, el := range els {
		if el.Status().Master == "" {
			return false
		}
	}
	return true
}

// instanceidFor returns the ID of the i-th instance of the scale run, one
// per host.
func instanceidFor(i int) (instanceid.ID, error) {
	n := i + 1
	return instanceid.New(fmt.Sprintf("10.%d.%d.%d", n>>16&255, n>>8&255, n&255), "acme", "scale", 8080)
}

// BenchmarkFleet runs electors as a fleet runs them: one process each, so
// one client and one Store each (its own pub/sub connection, its own watch
// markers), against one redis-server, and reports the Redis commands each
// elector sends per heartbeat interval once the election has settled,
// beside the number of processes. Every duration is the default scaled
// down by 7.5 (heartbeat 2 s, TTL 6 s), and so are the store's:
// "store-defaults" has the fixed 30 s watch marker and 15 s pub/sub health
// check stores have by default (two and one default intervals), "config"
// the nine and two intervals that config.RedisStoreOptions sets.
// BATON_FLEET sets the number of processes (default 1,000). Goal (DESIGN
// §5): <= 1 command per elector per interval.
func BenchmarkFleet(b *testing.B) {
	processes := 1000
	if v := os.Getenv("BATON_FLEET"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			b.Fatalf("BATON_FLEET=%q: want a number of processes >= 2", v)
		}
		processes = n
	}
	const intervals = 6
	cfg := role.Config{HeartbeatInterval: 2 * time.Second, HeartbeatExpiration: 6 * time.Second}
	r := testenv.NewRedis(b, testenv.RedisOptions{Config: []string{"maxclients " + strconv.Itoa(4*processes+100)}})
	admin := r.Client(b)
	for _, m := range []struct {
		name           string
		marker, health time.Duration
	}{
		{"store-defaults", 2 * cfg.HeartbeatInterval, cfg.HeartbeatInterval},
		{"config", 9 * cfg.HeartbeatInterval, 2 * cfg.HeartbeatInterval},
	} {
		b.Run(m.name, func(b *testing.B) {
			for range b.N {
				cmds := runFleet(b, r, admin, processes, cfg, m.marker, m.health, intervals)
				b.ReportMetric(cmds, "cmds/elector/interval")
				b.ReportMetric(float64(processes), "processes")
			}
		})
	}
}

// runFleet starts one client, store and elector per process, waits until
// the election settled, and returns the commands per elector per interval
// over intervals heartbeat intervals.
func runFleet(b *testing.B, r *testenv.Redis, admin *redis.Client, processes int, cfg role.Config, marker, health time.Duration, intervals int) float64 {
	els := make([]*role.Elector, processes)
	var closers []func() error
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var wg sync.WaitGroup
		for _, el := range els {
			if el != nil {
				wg.Go(func() { el.Halt(ctx) })
			}
		}
		wg.Wait()
		for _, c := range slices.Backward(closers) {
			_ = c()
		}
	}()
	for i := range els {
		rdb := redis.NewClient(&redis.Options{Addr: r.Addr(), PoolSize: 2, ContextTimeoutEnabled: true})
		closers = append(closers, rdb.Close)
		store, err := redisbackend.New(rdb, redisbackend.WithoutRestartGuard(), // a server started for the benchmark
			redisbackend.WithMarkerTTL(marker), redisbackend.WithHealthCheck(health))
		if err != nil {
			b.Fatal(err)
		}
		closers = append(closers, store.Close)
		id, err := instanceidFor(i)
		if err != nil {
			b.Fatal(err)
		}
		if els[i], err = role.NewElector(store, id, cfg, quiet); err != nil {
			b.Fatal(err)
		}
		if err := els[i].Launch(); err != nil {
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for master(els) == nil || !allSeeMaster(els) {
		if time.Now().After(deadline) {
			b.Fatal("the election did not settle within two minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Past the first member heartbeats and marker refreshes.
	time.Sleep(max(2*cfg.HeartbeatInterval, marker))
	before := clientCommands(b, admin)
	time.Sleep(time.Duration(intervals) * cfg.HeartbeatInterval)
	after := clientCommands(b, admin)

	if master(els) == nil {
		b.Fatal("no single master at the end")
	}
	return float64(after-before) / float64(processes) / float64(intervals)
}
