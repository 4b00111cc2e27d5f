package chaos

import (
	"flag"
	"strings"
	"testing"

	"github.com/baton-go/baton/internal/docgen"
)

var updateReadme = flag.Bool("update", false, "rewrite the chaos table of README.md and docs/safety.md from docs/chaos-report.json")

// The chaos table in the Safety sections of README.md and docs/safety.md
// is ReadmeTable of docs/chaos-report.json; with -update the test writes
// it in both.
func TestReadmeTable(t *testing.T) {
	const path = "../../docs/chaos-report.json"
	var reports []Report
	docgen.ReadJSON(t, path, &reports)
	if len(reports) == 0 {
		t.Fatalf("%s holds no report", path)
	}
	for _, doc := range []string{"../../README.md", "../../docs/safety.md"} {
		docgen.Check(t, doc, "chaos table", "go test ./internal/chaos -run TestReadmeTable -update",
			ReadmeTable(reports), *updateReadme)
	}
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
