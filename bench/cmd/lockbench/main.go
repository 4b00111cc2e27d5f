// Command lockbench compares baton's cross-instance lock with redsync,
// bsm/redislock, a minimal fenced lock, a 1 ms poller and the seed's
// sleep-and-retry loop on a private
// redis-server: uncontended lock+unlock cycles, and a contended run of
// several processes with several goroutines each. It then measures baton
// on Consul, lock throughput on a Redis Cluster of one master and of
// three, and the cost of WithReplicaAck(1). It prints a table and writes
// the results as JSON to a scratch file (lockbench-results.json in the
// system's temporary directory), never to the published results.json
// unless asked: -out results.json publishes a run, after which the
// README's figures are regenerated (go test -run TestReadmeFigures
// -update). See the bench package for what is measured.
//
//	go run ./cmd/lockbench                  # 3 rounds of 10 s per run, about 5 minutes
//	go run ./cmd/lockbench -out results.json  # the same, published
//	go run ./cmd/lockbench -quick           # 2 rounds of 4 s per run, about 80 s
//	go run ./cmd/lockbench -impls baton,redislock -rounds 1 -duration 5s -out ''
//	go run ./cmd/lockbench -show results.json   # the table of an earlier run
//	go run ./cmd/lockbench -impls baton,baton-store,redislock -out ''   # what synclock adds to the store
//	go run ./cmd/lockbench -impls baton,baton-functions,redislock -out ''   # FCALL instead of EVALSHA
//	go run ./cmd/lockbench -redis=false -cluster=false -out ''        # the Consul figures only
//
// It exits 1 when a run failed or any run saw overlapping holders, 2 on
// bad flags. Targets that are missed are reported, not failed: they are
// judged by reading the results.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/baton-go/baton/bench"
)

func main() {
	if bench.IsWorker() {
		os.Exit(bench.WorkerMain())
	}
	os.Exit(run())
}

// scratchOut is where a run's results go unless -out says otherwise: a
// benchmark run on a developer's machine must not rewrite the published
// figures (results.json), which the README's tests compare.
func scratchOut() string {
	return filepath.Join(os.TempDir(), "lockbench-results.json")
}

func run() int {
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	var (
		quick      = fs.Bool("quick", false, "short: -rounds 2 -duration 4s (flags given explicitly win)")
		duration   = fs.Duration("duration", bench.DefaultDuration, "per round: each implementation's measured uncontended time, and the length of each contended run")
		rounds     = fs.Int("rounds", bench.DefaultRounds, "times the whole sequence runs, one implementation later each time; samples are pooled")
		warmup     = fs.Duration("warmup", 0, "start of each run left out of the statistics (default a fifth of -duration, at most 1s)")
		impls      = fs.String("impls", strings.Join(bench.ImplNames(), ","), "comma-separated implementations to run; "+bench.StoreName+" (baton's store without synclock) and "+bench.BatonFunctionsName+" (baton on its Redis functions) run only when named")
		out        = fs.String("out", scratchOut(), "file to write the results to; empty for none (results.json publishes the run: the README's figures come from it)")
		procs      = fs.Int("procs", bench.DefaultProcs, "contended: worker processes")
		goroutines = fs.Int("goroutines", bench.DefaultGoroutines, "contended: goroutines per process")
		cs         = fs.Duration("cs", bench.DefaultCS, "contended: critical section")
		think      = fs.Duration("think", bench.DefaultThink, "contended: pause after each release")
		pin        = fs.Bool("pin", true, "put redis-server on one CPU and the benchmark on the others (Linux, 2+ CPUs)")
		show       = fs.String("show", "", "print the table of an earlier results file and exit")
		clients    = fs.String("clients", "goroutine", "contended: one Redis client and lock client per 'goroutine' or per 'process'")
		consul     = fs.Bool("consul", true, "also measure baton on a private Consul dev agent (needs the consul binary of `make deps`) beside Consul's lock recipe and a bare KV cycle")
		terms      = fs.Int("terms", 5, "-consul: role handovers and crash failovers timed")
		consulImps = fs.String("consul-impls", "", "-consul: comma-separated implementations to run on Consul (baton, consul-lock, consul-kv); empty for all")
		requests   = fs.Bool("consul-requests", false, "-consul: after each measurement, print the requests per op by method, path and status")
		onRedis    = fs.Bool("redis", true, "measure on a private redis-server (-redis=false -cluster=false: the Consul figures only)")
		cluster    = fs.Bool("cluster", true, "also measure lock throughput on a Redis Cluster of 1 master and of 3, and the cost of WithReplicaAck(1) on a master with one replica")
	)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if *show != "" {
		return showResults(*show)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		if !set["duration"] {
			*duration = 4 * time.Second
		}
		if !set["rounds"] {
			*rounds = 2
		}
	}
	if *clients != "goroutine" && *clients != "process" {
		fmt.Fprintf(os.Stderr, "lockbench: -clients %q: want goroutine or process\n", *clients)
		return 2
	}
	opts := bench.Options{
		Impls:         strings.Split(*impls, ","),
		Duration:      *duration,
		Warmup:        *warmup,
		Rounds:        *rounds,
		Procs:         *procs,
		Goroutines:    *goroutines,
		CS:            *cs,
		Think:         *think,
		SharedClients: *clients == "process",
		Pin:           *pin,
		Progress:      os.Stderr,
		Quick:         *quick,
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := &bench.Results{}, error(nil)
	if *onRedis {
		res, err = bench.Run(ctx, opts)
	}
	if err == nil && res != nil && *consul {
		var names []string
		if *consulImps != "" {
			names = strings.Split(*consulImps, ",")
		}
		co := bench.ConsulOptions{
			Duration: *duration, Rounds: *rounds, Impls: names, Procs: *procs, Goroutines: *goroutines, CS: *cs, Terms: *terms, Progress: os.Stderr}
		if *requests {
			co.Requests = os.Stderr
		}
		res.Consul, err = bench.RunConsul(ctx, co)
	}
	if err == nil && res != nil && *cluster {
		// As long as the rounds of the other runs together.
		d := *duration * time.Duration(*rounds)
		res.Cluster, err = bench.RunCluster(ctx, bench.ClusterOptions{Duration: d, Progress: os.Stderr})
		if err == nil {
			res.ReplicaAck, err = bench.RunReplicaAck(ctx, bench.ReplicaAckOptions{Duration: d, Progress: os.Stderr})
		}
	}
	if res != nil {
		fmt.Println()
		if werr := res.WriteTable(os.Stdout); werr != nil {
			fmt.Fprintln(os.Stderr, "lockbench:", werr)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		return 1
	}
	if *out != "" {
		js, err := json.MarshalIndent(res, "", "  ")
		if err == nil {
			err = os.WriteFile(*out, append(js, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockbench: write results:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "lockbench: wrote %s\n", *out)
	}
	if n := res.Overlaps(); n > 0 {
		fmt.Fprintf(os.Stderr, "lockbench: %d overlapping holders: mutual exclusion was broken\n", n)
		return 1
	}
	return 0
}

// showResults prints the table of a results file.
func showResults(path string) int {
	js, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		return 1
	}
	var res bench.Results
	if err := json.Unmarshal(js, &res); err != nil {
		fmt.Fprintf(os.Stderr, "lockbench: %s: %v\n", path, err)
		return 1
	}
	if err := res.WriteTable(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		return 1
	}
	return 0
}
