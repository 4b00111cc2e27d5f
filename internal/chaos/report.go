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
