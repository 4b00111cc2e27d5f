// Command lockbench compares baton's cross-instance lock with redsync,
// bsm/redislock, a minimal fenced lock, a 1 ms poller and the seed's
// sleep-and-retry loop on a private
// redis-server: uncontended lock+unlock cycles, and contended runs of
// several processes with several goroutines each, with a client per
// goroutine (contended) and one per process (contended-shared). It then measures baton
// on Consul, lock throughput on a Redis Cluster of one master and of
// three, and the cost of WithReplicaAck(1). It prints a table and writes
// the results as JSON to a scratch file (lockbench-results.json in the
// system's temporary directory), never to the published results.json
// unless asked: -out results.json publishes a run, after which the
// README's figures are regenerated (go test -run TestReadmeFigures
// -update). See the bench package for what is measured.
//
//	go run ./cmd/lockbench                  # 3 rounds of 10 s per run, about 8 minutes, 3.5 more unpinned
//	go run ./cmd/lockbench -out results.json  # the same, published
//	go run ./cmd/lockbench -quick           # 2 rounds of 4 s per run, about 2 minutes, 1 more unpinned
//	go run ./cmd/lockbench -clients goroutine   # contended with a client per goroutine only, not contended-shared
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
	f, err := parseFlags(os.Args[1:])
	if err != nil {
		return 2
	}
	if f.show != "" {
		return showResults(f.show)
	}
	if f.clients != bench.ClientsBoth && f.clients != bench.ClientsGoroutine && f.clients != bench.ClientsProcess {
		fmt.Fprintf(os.Stderr, "lockbench: -clients %q: want %s, %s or %s\n", f.clients, bench.ClientsBoth, bench.ClientsGoroutine, bench.ClientsProcess)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := measure(ctx, f)
	return report(res, err, f.out)
}

// flags holds lockbench's command line.
type flags struct {
	quick                     bool
	duration, warmup, cs      time.Duration
	think                     time.Duration
	rounds, procs, goroutines int
	impls, out, show, clients string
	pin, consul, requests     bool
	terms                     int
	consulImpls               string
	onRedis, cluster          bool
}

// parseFlags parses args; -quick shortens what the command line leaves
// at its default.
func parseFlags(args []string) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("lockbench", flag.ContinueOnError)
	fs.BoolVar(&f.quick, "quick", false, "short: -rounds 2 -duration 4s (flags given explicitly win)")
	fs.DurationVar(&f.duration, "duration", bench.DefaultDuration, "per round: each implementation's measured uncontended time, and the length of each contended run")
	fs.IntVar(&f.rounds, "rounds", bench.DefaultRounds, "times the whole sequence runs, one implementation later each time; samples are pooled")
	fs.DurationVar(&f.warmup, "warmup", 0, "start of each run left out of the statistics (default a fifth of -duration, at most 1s)")
	fs.StringVar(&f.impls, "impls", strings.Join(bench.ImplNames(), ","), "comma-separated implementations to run; "+bench.StoreName+" (baton's store without synclock) and "+bench.BatonFunctionsName+" (baton on its Redis functions) run only when named")
	fs.StringVar(&f.out, "out", scratchOut(), "file to write the results to; empty for none (results.json publishes the run: the README's figures come from it)")
	fs.IntVar(&f.procs, "procs", bench.DefaultProcs, "contended: worker processes")
	fs.IntVar(&f.goroutines, "goroutines", bench.DefaultGoroutines, "contended: goroutines per process")
	fs.DurationVar(&f.cs, "cs", bench.DefaultCS, "contended: critical section")
	fs.DurationVar(&f.think, "think", bench.DefaultThink, "contended: pause after each release")
	fs.BoolVar(&f.pin, "pin", true, "put redis-server on one CPU and the benchmark on the others (Linux, 2+ CPUs); the uncontended phase then also runs unpinned (uncontended-unpinned)")
	fs.StringVar(&f.show, "show", "", "print the table of an earlier results file and exit")
	fs.StringVar(&f.clients, "clients", bench.ClientsBoth, "contended runs: 'goroutine' (contended: one Redis client and lock client per goroutine), 'process' (contended-shared: one per process, shared by its goroutines) or 'both', one after the other")
	fs.BoolVar(&f.consul, "consul", true, "also measure baton on a private Consul dev agent (needs the consul binary of `make deps`) beside Consul's lock recipe and a bare KV cycle")
	fs.IntVar(&f.terms, "terms", 5, "-consul: role handovers and crash failovers timed")
	fs.StringVar(&f.consulImpls, "consul-impls", "", "-consul: comma-separated implementations to run on Consul (baton, consul-lock, consul-kv); empty for all")
	fs.BoolVar(&f.requests, "consul-requests", false, "-consul: after each measurement, print the requests per op by method, path and status")
	fs.BoolVar(&f.onRedis, "redis", true, "measure on a private redis-server (-redis=false -cluster=false: the Consul figures only)")
	fs.BoolVar(&f.cluster, "cluster", true, "also measure lock throughput on a Redis Cluster of 1 master and of 3, and the cost of WithReplicaAck(1) on a master with one replica")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if f.quick {
		if !set["duration"] {
			f.duration = 4 * time.Second
		}
		if !set["rounds"] {
			f.rounds = 2
		}
	}
	return f, nil
}

// options returns the options of the runs on redis-server.
func (f flags) options() bench.Options {
	return bench.Options{
		Impls:      strings.Split(f.impls, ","),
		Duration:   f.duration,
		Warmup:     f.warmup,
		Rounds:     f.rounds,
		Procs:      f.procs,
		Goroutines: f.goroutines,
		CS:         f.cs,
		Think:      f.think,
		Clients:    f.clients,
		Pin:        f.pin,
		Progress:   os.Stderr,
		Quick:      f.quick,
	}
}

// consulOptions returns the options of the runs on Consul.
func (f flags) consulOptions() bench.ConsulOptions {
	var names []string
	if f.consulImpls != "" {
		names = strings.Split(f.consulImpls, ",")
	}
	co := bench.ConsulOptions{
		Duration: f.duration, Rounds: f.rounds, Impls: names, Procs: f.procs, Goroutines: f.goroutines, CS: f.cs, Terms: f.terms, Progress: os.Stderr}
	if f.requests {
		co.Requests = os.Stderr
	}
	return co
}

// measure runs what f asks for in turn: on redis-server, on Consul, on a
// Redis Cluster and with WithReplicaAck(1). It stops at the first error
// and returns what it has so far.
func measure(ctx context.Context, f flags) (*bench.Results, error) {
	res, err := &bench.Results{}, error(nil)
	if f.onRedis {
		res, err = bench.Run(ctx, f.options())
	}
	if err == nil && res != nil && f.consul {
		res.Consul, err = bench.RunConsul(ctx, f.consulOptions())
	}
	if err == nil && res != nil && f.cluster {
		// As long as the rounds of the other runs together.
		d := f.duration * time.Duration(f.rounds)
		res.Cluster, err = bench.RunCluster(ctx, bench.ClusterOptions{Duration: d, Progress: os.Stderr})
		if err == nil {
			res.ReplicaAck, err = bench.RunReplicaAck(ctx, bench.ReplicaAckOptions{Duration: d, Progress: os.Stderr})
		}
	}
	return res, err
}

// report prints the table of res, then err if any, writes res to out
// (empty: nowhere) and returns the exit code: 1 when a run failed, the
// results could not be written or holders overlapped.
func report(res *bench.Results, err error, out string) int {
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
	if out != "" {
		js, err := json.MarshalIndent(res, "", "  ")
		if err == nil {
			err = os.WriteFile(out, append(js, '\n'), 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "lockbench: write results:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "lockbench: wrote %s\n", out)
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
