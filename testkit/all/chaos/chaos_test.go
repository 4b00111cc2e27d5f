//go:build chaos

package chaos_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-go/baton/testkit/all/chaos"
)

var (
	flagSeed       = flag.Int64("chaos.seed", 0, "seed of the fault schedule; 0 takes one from the clock (the report names it)")
	flagDuration   = flag.Duration("chaos.duration", 0, "length of the fault schedule per topology beyond one fault of each kind")
	flagReport     = flag.String("chaos.report", "", "write the report (JSON) here and its table beside it (.txt)")
	flagTopologies = flag.String("chaos.topologies", "", "comma-separated topologies to run (default: all of the table)")
	flagOut        = flag.String("chaos.out", "", "keep the histories and node logs under this directory")
	flagRace       = flag.Bool("chaos.race", false, "build the node program with the race detector (slower nodes: for quiet machines)")
)

// nodeBin is the node program, built once by TestMain.
var nodeBin string

var (
	reportsMu sync.Mutex
	reports   []chaos.Report
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "baton-chaos-node-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nodeBin = filepath.Join(dir, "node")
	args := []string{"build", "-o", nodeBin}
	if *flagRace {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "./node")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos: build the node program:", err)
		os.Exit(1)
	}
	code := m.Run()
	for _, r := range reports {
		fmt.Print(r.Table())
	}
	if *flagReport != "" && len(reports) > 0 {
		if err := chaos.WriteReports(*flagReport, reports); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func seed() int64 {
	if *flagSeed != 0 {
		return *flagSeed
	}
	return time.Now().UnixNano() % 1_000_000
}

// topology is one row of the table of backends the suite runs on, as
// the conformance suite has one: a backend and its server shape, and the
// fault kinds that apply to it.
type topology struct {
	backend, name string
	kinds         []string
	// bound is how soon after a fault heals the fleet must have a master
	// and the counter must move again.
	bound time.Duration
}

// faultsEverywhere apply to every topology.
var faultsEverywhere = []string{chaos.FaultKill9, chaos.FaultSigstop, chaos.FaultServerRestart,
	chaos.FaultServerRestartEmpty, chaos.FaultPartition, chaos.FaultServerPause}

var topologies = []topology{
	{"redis", "standalone", faultsEverywhere, bound},
	{"redis", "sentinel", append(slices.Clone(faultsEverywhere), chaos.FaultSentinelFailover), bound},
	{"redis", "cluster", faultsEverywhere, bound},
	// A Consul dev agent keeps its data in memory: every restart is an
	// empty one.
	{"consul", "consul", slices.DeleteFunc(slices.Clone(faultsEverywhere), func(k string) bool { return k == chaos.FaultServerRestart }), consulBound},
}

// TestChaos runs the fleet on every topology under a seeded schedule that
// injects every fault kind of the topology at least once, then checks the
// merged history.
func TestChaos(t *testing.T) {
	s := seed()
	only := map[string]bool{}
	for name := range strings.SplitSeq(*flagTopologies, ",") {
		if name == "" {
			continue
		}
		if !slices.ContainsFunc(topologies, func(tp topology) bool { return tp.name == name }) {
			t.Fatalf("-chaos.topologies: unknown topology %q", name)
		}
		only[name] = true
	}
	for i, topo := range topologies {
		if len(only) > 0 && !only[topo.name] {
			continue
		}
		// Each topology's first pass takes other variants, so that one
		// run over the table injects every variant of every fault.
		t.Run(topo.name, func(t *testing.T) { runChaos(t, topo, s, i) })
	}
}

func runChaos(t *testing.T, topo topology, seed int64, rotate int) {
	kinds := topo.kinds
	steps, err := chaos.Schedule(seed, chaos.ScheduleOptions{
		Kinds: kinds, Duration: *flagDuration, TTL: longest, Quiet: topo.bound + 500*time.Millisecond, Rotate: rotate,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: %d faults on %s %s: %v", seed, len(steps), topo.backend, topo.name, steps)

	ctx := t.Context()
	c := newCluster(t, topo.name, false)
	for range 3 {
		c.addNode()
	}
	if err := c.waitLive(ctx); err != nil {
		t.Fatalf("fleet not live before the first fault: %v", err)
	}
	began := time.Now()
	for _, s := range steps {
		if err := c.inject(ctx, s); err != nil {
			t.Fatalf("inject %v: %v", s, err)
		}
		sleep(ctx, s.Quiet)
	}
	events, stop := c.history(ctx)
	res := chaos.Check(events, chaos.CheckOptions{MasterBound: topo.bound, LockBound: topo.bound, End: stop})
	rep := chaos.NewReport(seed, time.Since(began), topo.backend, topo.name, res, events)
	reportsMu.Lock()
	reports = append(reports, rep)
	reportsMu.Unlock()
	t.Log("\n" + rep.Table())
	for _, k := range kinds {
		if rep.Faults[k] == 0 {
			t.Errorf("fault kind %s was never injected", k)
		}
	}
	if len(res.Violations) > 0 {
		t.Errorf("%d violations (histories in %s):\n%s", len(res.Violations), c.dir, res.Summary())
	}
}

// bound is how soon after a fault heals the fleet must have a master
// and the counter must move again: the restart guard (the longest lease
// plus a second), a TTL for the last holder's lease to run out, and slack
// for a busy machine, where every round trip waits for a CPU.
const bound = longest + time.Second + roleTTL + 3*time.Second

// consulBound is bound on Consul, which keeps a session up to twice its
// TTL: the restart guard's session and the crashed holder's lease may
// each last twice as long.
const consulBound = 2*longest + time.Second + 2*roleTTL + 3*time.Second

func checkOptions(end int64) chaos.CheckOptions {
	return chaos.CheckOptions{MasterBound: bound, LockBound: bound, End: end}
}
