package chaos

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"time"
)

// Report is one run's figures as chaos-report.json holds them: one per
// backend and topology.
type Report struct {
	Seed       int64          `json:"seed"`
	DurationS  float64        `json:"duration_s"`
	Backend    string         `json:"backend"`
	Topology   string         `json:"topology"`
	Nodes      int            `json:"nodes"`
	Operations int            `json:"operations"`
	Faults     map[string]int `json:"faults"`
	Violations int            `json:"violations"`

	MaxNoMasterMs        float64 `json:"max_no_master_ms"`
	MaxLockUnavailableMs float64 `json:"max_lock_unavailable_ms"`
	MaxTwoMastersMs      float64 `json:"max_two_masters_ms"`

	Accepted      map[string]int `json:"accepted"`
	StaleRejected int            `json:"stale_rejected"`
	WriteErrors   int            `json:"write_errors"`
	Indeterminate int            `json:"indeterminate"`
	Increments    int            `json:"increments"`
	FinalCounter  int64          `json:"final_counter"`
	HealsChecked  int            `json:"heals_checked"`
	HealsSkipped  int            `json:"heals_skipped"`

	ViolationDetails []ViolationDetail `json:"violation_details"`
}

// ViolationDetail is one violation in a report.
type ViolationDetail struct {
	Check   string `json:"check"`
	Message string `json:"message"`
}

// NewReport summarises one run: its seed and length, where it ran, and
// what Check found in its history.
func NewReport(seed int64, duration time.Duration, backend, topology string, r Result, events []Event) Report {
	rep := Report{
		Seed: seed, DurationS: math.Round(duration.Seconds()*10) / 10, Backend: backend, Topology: topology,
		Operations: r.Operations, Faults: map[string]int{}, Violations: len(r.Violations),
		MaxNoMasterMs: round1(r.MaxNoMasterMs), MaxLockUnavailableMs: round1(r.MaxLockUnavailableMs),
		MaxTwoMastersMs: round1(r.MaxTwoMastersMs),
		Accepted:        r.Accepted, StaleRejected: r.StaleRejected, WriteErrors: r.WriteErrors,
		Indeterminate: r.Indeterminate, Increments: r.Increments, FinalCounter: r.FinalCounter,
		HealsChecked: r.HealsChecked, HealsSkipped: r.HealsSkipped,
		ViolationDetails: []ViolationDetail{},
	}
	for _, k := range FaultKinds {
		rep.Faults[k] = r.Faults[k]
	}
	nodes := map[string]bool{}
	for _, e := range events {
		if e.Kind == KindStart {
			nodes[e.Node] = true
		}
	}
	rep.Nodes = len(nodes)
	for _, v := range r.Violations {
		rep.ViolationDetails = append(rep.ViolationDetails, ViolationDetail{v.Check, v.Message})
	}
	return rep
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// WriteReports writes reports to path as an indented JSON array, and
// their tables to the same path with the extension .txt.
func WriteReports(path string, reports []Report) error {
	b, err := json.MarshalIndent(reports, "", "  ")
	if err != nil {
		return fmt.Errorf("chaos: encode report: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("chaos: write report: %w", err)
	}
	var t strings.Builder
	for _, r := range reports {
		t.WriteString(r.Table())
		t.WriteByte('\n')
	}
	txt := strings.TrimSuffix(path, ".json") + ".txt"
	if err := os.WriteFile(txt, []byte(t.String()), 0o644); err != nil {
		return fmt.Errorf("chaos: write report: %w", err)
	}
	return nil
}

// Table renders the report for people.
func (r Report) Table() string {
	var b strings.Builder
	row := func(k, format string, args ...any) {
		fmt.Fprintf(&b, "  %-26s "+format+"\n", append([]any{k}, args...)...)
	}
	fmt.Fprintf(&b, "chaos: %s %s, seed %d, %.0f s of faults, %d node processes\n", r.Backend, r.Topology, r.Seed, r.DurationS, r.Nodes)
	var faults []string
	for _, k := range FaultKinds {
		if r.Faults[k] > 0 {
			faults = append(faults, fmt.Sprintf("%s %d", k, r.Faults[k]))
		}
	}
	row("faults", "%s", strings.Join(faults, ", "))
	row("fenced operations", "%d attempted; writes accepted: counter %d, role %d, job %d", r.Operations,
		r.Accepted[ResCounter], r.Accepted[ResRole], r.Accepted[ResJob])
	row("stale operations rejected", "%d", r.StaleRejected)
	row("counter", "%d for %d acknowledged increments (%d indeterminate)", r.FinalCounter, r.Increments, r.Indeterminate)
	row("longest without master", "%.0f ms", r.MaxNoMasterMs)
	row("longest lock standstill", "%.0f ms", r.MaxLockUnavailableMs)
	row("two masters at once", "%.1f ms", r.MaxTwoMastersMs)
	row("heals checked for liveness", "%d (skipped %d)", r.HealsChecked, r.HealsSkipped)
	row("violations", "%d", r.Violations)
	for _, v := range r.ViolationDetails {
		fmt.Fprintf(&b, "    [%s] %s\n", v.Check, v.Message)
	}
	return b.String()
}

// ReadmeTable renders the chaos table of README.md and docs/safety.md, and the
// sentence that introduces it, from the reports of one run (what
// docs/chaos-report.json holds): the figures there come from that file,
// and TestReadmeTable fails when they differ (go test ./internal/chaos
// -run TestReadmeTable -update writes them).
func ReadmeTable(reports []Report) string {
	var b strings.Builder
	if len(reports) == 0 {
		return "No chaos report yet: run `make chaos` and copy its chaos-report.json to docs/.\n"
	}
	first := reports[0]
	faultTime := time.Duration(first.DurationS * float64(time.Second))
	flag, words := fmt.Sprintf("%.0fs", faultTime.Seconds()), fmt.Sprintf("%.0f s", faultTime.Seconds())
	if m := int(faultTime.Round(time.Minute).Minutes()); m >= 1 {
		flag, words = fmt.Sprintf("%dm", m), fmt.Sprintf("%d minutes", m)
	}
	fmt.Fprintf(&b, "The latest long run (`make chaos CHAOS_DURATION=%s CHAOS_SEED=%d`, %s of faults per topology; the whole\n", flag, first.Seed, words)
	b.WriteString("report is `docs/chaos-report.json`, its table `docs/chaos-report.txt`):\n\n")

	row := func(name string, cell func(r Report) string) {
		b.WriteString(strings.TrimSpace("| "+name) + " |")
		for _, r := range reports {
			b.WriteString(" " + cell(r) + " |")
		}
		b.WriteByte('\n')
	}
	row("", func(r Report) string { return topologyName(r) })
	b.WriteString("|---|" + strings.Repeat("---|", len(reports)) + "\n")
	row("faults injected", func(r Report) string {
		n := 0
		for _, k := range FaultKinds {
			n += r.Faults[k]
		}
		return count(n)
	})
	row("kill -9 / SIGSTOP / restart / restart empty / cut / server pause / failover", func(r Report) string {
		var s []string
		for _, k := range FaultKinds {
			if n := r.Faults[k]; n > 0 {
				s = append(s, count(n))
			} else {
				s = append(s, "–")
			}
		}
		return strings.Join(s, " / ")
	})
	row("node processes (restarts included)", func(r Report) string { return count(r.Nodes) })
	row("fenced operations attempted (reads and writes)", func(r Report) string { return count(r.Operations) })
	row("counter vs acknowledged increments", func(r Report) string {
		rel := "="
		if r.FinalCounter != int64(r.Increments) {
			rel = "≠"
		}
		s := fmt.Sprintf("%s %s %s", count(int(r.FinalCounter)), rel, count(r.Increments))
		if r.Indeterminate > 0 {
			s += fmt.Sprintf(" (+ %s indeterminate)", count(r.Indeterminate))
		}
		return s
	})
	row("stale operations the ledger refused", func(r Report) string { return count(r.StaleRejected) })
	row("longest with two masters", func(r Report) string { return millis(r.MaxTwoMastersMs) })
	row("longest with no master", func(r Report) string { return millis(r.MaxNoMasterMs) })
	row("longest with no lock increment", func(r Report) string { return millis(r.MaxLockUnavailableMs) })
	row("heals checked for recovery", func(r Report) string { return count(r.HealsChecked) })
	row("violations", func(r Report) string { return count(r.Violations) })
	for _, r := range reports {
		for _, v := range r.ViolationDetails {
			fmt.Fprintf(&b, "\n%s: [%s] %s", topologyName(r), v.Check, v.Message)
		}
	}
	return b.String()
}

// topologyName names a report's column: the Redis topology, or the
// backend when it has only one.
func topologyName(r Report) string {
	switch {
	case r.Backend == "consul":
		return "Consul"
	case r.Topology == "sentinel":
		return "Sentinel"
	case r.Topology == "cluster":
		return "Cluster"
	}
	return r.Topology
}

// count formats n with commas between groups of three digits.
func count(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// millis formats a time in milliseconds, whole.
func millis(v float64) string { return count(int(math.Round(v))) + " ms" }
