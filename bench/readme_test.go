package bench

import (
	"flag"
	"strings"
	"testing"

	"github.com/baton-go/baton/testkit/docgen"
)

var updateReadme = flag.Bool("update", false, "rewrite the figures of docs/benchmarks.md and the README's comparison from results.json and gobench.txt")

// The figures of docs/benchmarks.md and the measured comparison with the
// peers (there and in the top-level README) are ReadmeGoFigures of
// gobench.txt and ReadmeLockFigures and ReadmeComparison of results.json;
// with -update the test writes them there.
func TestReadmeFigures(t *testing.T) {
	var r Results
	docgen.ReadJSON(t, "results.json", &r)
	g, err := ReadGoBenchmarks("gobench.txt")
	if err != nil {
		t.Fatal(err)
	}
	goFigures, err := ReadmeGoFigures(g)
	if err != nil {
		t.Fatalf("%v\n(make bench-role writes every benchmark the table needs)", err)
	}
	const how = "cd bench && go test -run TestReadmeFigures -update"
	docgen.Check(t, "../docs/benchmarks.md", "go benchmark figures", how, goFigures, *updateReadme)
	docgen.Check(t, "../docs/benchmarks.md", "lock figures", how, ReadmeLockFigures(&r), *updateReadme)
	for _, doc := range []string{"../README.md", "../docs/benchmarks.md"} {
		docgen.Check(t, doc, "measured comparison", how, ReadmeComparison(&r), *updateReadme)
	}
}

// The table of Go figures from a sample of gobench.txt (sampleGoBench),
// targets met and missed.
func TestReadmeGoFigures(t *testing.T) {
	g, err := ParseGoBenchmarks(strings.NewReader(sampleGoBench))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadmeGoFigures(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 26.0 ns vs 24.0 ns: 1.08×, 0 allocs |", // the median of three IsMaster runs
		"| p50 0.18 ms |",
		"(`BenchmarkFailover`, TTL 300 ms) | p50 2.1 ms, p99 3.8 ms after the key expired (30 failovers) |",
		"| 10,000 electors, one client (`BenchmarkScale10k`) | 0.50 commands",
		"1,000 processes, defaults scaled 7.5×) | 0.83 commands per elector per heartbeat interval with `cfg.RedisStoreOptions()` (2.31 with",
		"from the run of 2026-11-25T09:00:00Z\nwith -benchtime 10s (AMD EPYC, GOMAXPROCS 2, go1.26.8, redis-server 7.0.15) on a shared\nvirtual machine;",
		"the medians of 3 runs each, taken in turn. Met: ",
		"Missed: none.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}

	g, err = ParseGoBenchmarks(strings.NewReader(strings.Replace(sampleGoBench, "0.8300 cmds", "1.2000 cmds", 1)))
	if err != nil {
		t.Fatal(err)
	}
	got, err = ReadmeGoFigures(g)
	if err != nil {
		t.Fatal(err)
	}
	if want := "Missed: the fleet with cfg.RedisStoreOptions() vs 1 command per interval."; !strings.Contains(got, want) {
		t.Errorf("a fleet at 1.2 commands: the table lacks %q:\n%s", want, got)
	}
}

// Every benchmark and line the table needs and the file lacks is named in
// the error; no row is left empty.
func TestReadmeGoFiguresMissing(t *testing.T) {
	var kept []string
	for _, line := range strings.Split(sampleGoBench, "\n") {
		if !strings.HasPrefix(line, "BenchmarkFleet/config") && !strings.HasPrefix(line, "BenchmarkMonotonicClock") && !strings.HasPrefix(line, "date:") {
			kept = append(kept, line)
		}
	}
	g, err := ParseGoBenchmarks(strings.NewReader(strings.Join(kept, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadmeGoFigures(g)
	if err == nil {
		t.Fatalf("no error without three of its sources; the table:\n%s", got)
	}
	for _, want := range []string{"no result of BenchmarkMonotonicClock", "no result of BenchmarkFleet/config", `no "date:" line`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := strings.Count(err.Error(), "no result of BenchmarkFleet/config"); n != 1 {
		t.Errorf("BenchmarkFleet/config named %d times in %q, want once", n, err)
	}
	if got != "" {
		t.Errorf("a table beside the error:\n%s", got)
	}
}

// The lock figures and the comparison show the unpinned uncontended runs
// in a row of their own when results.json has them, and are as before
// when it has not.
func TestReadmeUnpinnedFigures(t *testing.T) {
	r := unpinnedResults()
	r.Targets = judge(r)
	lacks(t, "the lock figures", ReadmeLockFigures(r),
		"| uncontended, redis-server and the benchmark left to the scheduler | 6,000 cycles/s = 75 % of that placement's round-trip limit, 0.94× redislock (6,400), 1.02× the minimal fenced lock (5,900); redsync 6,600; Redis CPU 70.0 µs a cycle, 1.40× redislock's | the same, and Redis CPU ≤ 1.1× redislock's |\n",
		"Missed: uncontended-unpinned ops/s vs the best owner-checked peer (redsync); uncontended-unpinned Redis CPU µs per cycle vs 1.1x redislock's.")
	lacks(t, "the comparison", ReadmeComparison(r),
		"| Redis, uncontended, redis-server and the benchmark left to the scheduler: cycles/s | 6,000 | 6,600 | 6,400 | – | – |\n")

	r.Runs, r.RTTLimitUnpinned, r.RTTMicrosUnpinned = dropScenario(r.Runs, UncontendedUnpinned), 0, 0
	r.Targets = judge(r)
	for _, doc := range []string{ReadmeLockFigures(r), ReadmeComparison(r)} {
		if strings.Contains(doc, "left to the scheduler") || strings.Contains(doc, UncontendedUnpinned) {
			t.Errorf("without unpinned runs, the figures speak of them:\n%s", doc)
		}
	}
}

// The comparison shows the contended runs with clients shared per
// process in one row of their own when results.json has them, and is as
// before when it has not.
func TestReadmeContendedSharedRow(t *testing.T) {
	r := sharedResults()
	const row = "| Redis, contended, one client per process shared by its goroutines: ops/s | 837 | – | 620 | – | – |\n"
	lacks(t, "the comparison", ReadmeComparison(r), row)

	r.Runs = dropScenario(r.Runs, ContendedShared)
	if doc := ReadmeComparison(r); strings.Contains(doc, "shared by its goroutines") {
		t.Errorf("without contended-shared runs, the comparison speaks of them:\n%s", doc)
	}
}
