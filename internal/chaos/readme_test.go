package chaos

import (
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
)

var updateReadme = flag.Bool("update", false, "rewrite the top-level README's chaos table from docs/chaos-report.json")

const (
	readmePath   = "../../README.md"
	reportPath   = "../../docs/chaos-report.json"
	tableBegins  = "<!-- chaos table: generated from docs/chaos-report.json; go test ./internal/chaos -run TestReadmeTable -update rewrites it -->\n"
	tableEndsTag = "<!-- end of the chaos table -->"
)

// The chaos table in the README's Safety section is ReadmeTable of
// docs/chaos-report.json, between two comment lines; with -update the test writes it there.
func TestReadmeTable(t *testing.T) {
	data, err := os.ReadFile(reportPath)
	if err != nil {
		t.Fatal(err)
	}
	var reports []Report
	if err := json.Unmarshal(data, &reports); err != nil {
		t.Fatalf("%s: %v", reportPath, err)
	}
	if len(reports) == 0 {
		t.Fatalf("%s holds no report", reportPath)
	}
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	start := strings.Index(readme, tableBegins)
	end := strings.Index(readme, tableEndsTag)
	if start < 0 || end < start {
		t.Fatalf("%s has no chaos table between %q and %q", readmePath, strings.TrimSpace(tableBegins), tableEndsTag)
	}
	start += len(tableBegins)
	// Blank lines around it keep the markers out of the table's block.
	got, want := readme[start:end], "\n"+ReadmeTable(reports)+"\n"
	if got == want {
		return
	}
	if *updateReadme {
		if err := os.WriteFile(readmePath, []byte(readme[:start]+want+readme[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(gl), len(wl)) {
		if gl[i] != wl[i] {
			t.Fatalf("%s's chaos table differs from %s at line %d:\nREADME: %s\nreport: %s\n(run go test ./internal/chaos -run TestReadmeTable -update)", readmePath, reportPath, i+1, gl[i], wl[i])
		}
	}
	t.Fatalf("%s's chaos table has %d lines, the report's %d (run go test ./internal/chaos -run TestReadmeTable -update)", readmePath, len(gl), len(wl))
}

// A run that lost an increment or broke a check shows it: the table is
// not a fixed text with the numbers filled in.
func TestReadmeTableShowsFailures(t *testing.T) {
	good := Report{Seed: 3, DurationS: 59.8, Backend: "redis", Topology: "standalone", Nodes: 4, Operations: 1234,
		Faults: map[string]int{FaultKill9: 2, FaultPartition: 1}, Increments: 1000, FinalCounter: 1000, MaxNoMasterMs: 1499.6}
	bad := Report{Seed: 3, DurationS: 60.1, Backend: "consul", Topology: "consul", Nodes: 3, Operations: 99,
		Faults: map[string]int{}, Increments: 50, FinalCounter: 49, Indeterminate: 2, Violations: 1,
		ViolationDetails: []ViolationDetail{{"counter", "counter 49, 50 acknowledged"}}}
	got := ReadmeTable([]Report{good, bad})
	for _, want := range []string{
		"`make chaos CHAOS_DURATION=1m CHAOS_SEED=3`",
		"| | standalone | Consul |",
		"| faults injected | 3 | 0 |",
		"| kill -9 / SIGSTOP / restart / restart empty / cut / server pause / failover | 2 / – / – / – / 1 / – / – | – / – / – / – / – / – / – |",
		"| fenced operations attempted (reads and writes) | 1,234 | 99 |",
		"| counter vs acknowledged increments | 1,000 = 1,000 | 49 ≠ 50 (+ 2 indeterminate) |",
		"| longest with no master | 1,500 ms | 0 ms |",
		"| violations | 0 | 1 |",
		"Consul: [counter] counter 49, 50 acknowledged",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the table lacks %q:\n%s", want, got)
		}
	}
}
