package bench

import (
	"strings"
	"testing"
)

// sampleGoBench is what make bench-role writes, shortened: its own lines,
// go test's header, results (one run twice, a log line, sub-benchmarks)
// and go test's last lines.
const sampleGoBench = `date: 2026-11-25T09:00:00Z
redis-server: 7.0.15
go: go1.26.8
benchtime: 10s
goos: linux
goarch: amd64
pkg: github.com/baton-go/baton/role
cpu: AMD EPYC
BenchmarkMonotonicClock-2     	518051871	        24.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkIsMaster-2           	480202838	        25.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkIsMaster-2           	480202838	        26.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkIsMaster-2           	480202838	        40.00 ns/op	       0 B/op	       0 allocs/op
BenchmarkHandover-2           	   47401	    228074 ns/op	         0.1849 handover-p50-ms	         0.7400 handover-p99-ms	     47401 handover-samples	   11417 B/op	     218 allocs/op
--- BENCH: BenchmarkHandover-2
    redis_bench_test.go:90: a line the benchmark logged
BenchmarkFailover-2           	       3	3500000000 ns/op	         2.100 failover-over-ttl-p50-ms	         3.800 failover-over-ttl-p99-ms	        30.00 failover-over-ttl-samples	       300.0 ttl-ms
BenchmarkScale10k-2           	       1	20000000000 ns/op	         0.5000 cmds/elector/interval	     10000 electors
BenchmarkFleet/store-defaults-2         	       1	30000000000 ns/op	         2.310 cmds/elector/interval	      1000 processes
BenchmarkFleet/config-2                 	       1	30000000000 ns/op	         0.8300 cmds/elector/interval	      1000 processes
PASS
ok  	github.com/baton-go/baton/role	123.456s
`

func TestParseGoBenchmarks(t *testing.T) {
	g, err := ParseGoBenchmarks(strings.NewReader(sampleGoBench))
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{"date": "2026-11-25T09:00:00Z", "redis-server": "7.0.15", "pkg": "github.com/baton-go/baton/role", "cpu": "AMD EPYC"} {
		if got := g.Config[key]; got != want {
			t.Errorf("Config[%q] = %q, want %q", key, got, want)
		}
	}
	if _, ok := g.Config["ok"]; ok {
		t.Error(`the "ok" line was read as configuration`)
	}
	if len(g.Results) != 9 {
		t.Fatalf("%d results, want 9: %+v", len(g.Results), g.Results)
	}
	if r := g.Results[7]; r.Name != "BenchmarkFleet/store-defaults" || r.Procs != 2 || r.Iters != 1 || r.Values["processes"] != 1000 {
		t.Errorf("result 8 = %+v, want BenchmarkFleet/store-defaults, GOMAXPROCS 2, 1 iteration, 1000 processes", r)
	}
	for _, c := range []struct {
		name, unit string
		want       float64
	}{
		{"BenchmarkIsMaster", "ns/op", 26}, // the median of three runs
		{"BenchmarkIsMaster", "allocs/op", 0},
		{"BenchmarkHandover", "handover-p50-ms", 0.1849},
		{"BenchmarkFleet/config", "cmds/elector/interval", 0.83},
	} {
		got, err := g.Value(c.name, c.unit)
		if err != nil || got != c.want {
			t.Errorf("Value(%s, %s) = %g, %v; want %g", c.name, c.unit, got, err, c.want)
		}
	}
	if _, err := g.Value("BenchmarkFleet", "cmds/elector/interval"); err == nil || !strings.Contains(err.Error(), "no result of BenchmarkFleet") {
		t.Errorf("Value of the parent of sub-benchmarks: error %v, want no result", err)
	}
	if _, err := g.Value("BenchmarkHandover", "failover-over-ttl-p50-ms"); err == nil || !strings.Contains(err.Error(), "BenchmarkHandover reports no failover-over-ttl-p50-ms") {
		t.Errorf("Value of a unit the benchmark lacks: error %v", err)
	}
}

func TestParseGoBenchmarksWithoutProcs(t *testing.T) {
	g, err := ParseGoBenchmarks(strings.NewReader("BenchmarkFleet/store-defaults 1 2.31 cmds/elector/interval\nBenchmarkRetry-x 5 1 ns/op\n"))
	if err != nil {
		t.Fatal(err)
	}
	if r := g.Results[0]; r.Name != "BenchmarkFleet/store-defaults" || r.Procs != 1 {
		t.Errorf("without a GOMAXPROCS suffix: %+v", r)
	}
	if r := g.Results[1]; r.Name != "BenchmarkRetry-x" || r.Procs != 1 {
		t.Errorf("a dash that is not a GOMAXPROCS suffix: %+v", r)
	}
}

// A line that starts like a result but is not one fails the parse, naming
// its line: a result must not go missing unseen.
func TestParseGoBenchmarksMalformed(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{"BenchmarkIsMaster-2", "is not a result line"},
		{"BenchmarkIsMaster-2 \t--- FAIL: BenchmarkIsMaster-2", `iterations "---"`},
		{"BenchmarkIsMaster-2 100 25.8", "is not a result line"},
		{"BenchmarkIsMaster-2 100 25.8 ns/op 0", "is not a result line"},
		{"BenchmarkIsMaster-2 many 25.8 ns/op", `iterations "many"`},
		{"BenchmarkIsMaster-2 0 25.8 ns/op", `iterations "0"`},
		{"BenchmarkIsMaster-2 100 fast ns/op", `value "fast" of ns/op`},
		{"BenchmarkIsMaster-2 100 25.8 ns/op 26 ns/op", "unit ns/op given twice"},
	} {
		_, err := ParseGoBenchmarks(strings.NewReader("goos: linux\n" + c.line + "\nPASS\n"))
		if err == nil || !strings.Contains(err.Error(), "line 2: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want line 2 and %q", c.line, err, c.want)
		}
	}
}

func TestConfigLine(t *testing.T) {
	for _, c := range []struct {
		line, key, value string
		ok               bool
	}{
		{"goos: linux", "goos", "linux", true},
		{"redis-server: 7.0.15", "redis-server", "7.0.15", true},
		{"note:", "note", "", true},
		{"PASS", "", "", false},
		{"ok  \tgithub.com/baton-go/baton/role\t1.2s", "", "", false},
		{"Goos: linux", "", "", false},
		{"my key: value", "", "", false},
		{"url:http://x", "", "", false},
		{"    redis_bench_test.go:90: logged", "", "", false},
	} {
		key, value, ok := configLine(c.line)
		if key != c.key || value != c.value || ok != c.ok {
			t.Errorf("configLine(%q) = %q, %q, %v; want %q, %q, %v", c.line, key, value, ok, c.key, c.value, c.ok)
		}
	}
}
