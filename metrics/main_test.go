package metrics_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
)

// The tests start their servers through testkit/storetest; goleak checks
// that the electors, lockers and schedulers they start are all stopped.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const patience = 15 * time.Second

// sample finds the series of family name whose labels include want and
// returns its value: a counter's or gauge's value, a histogram's sample
// count. ok is false when there is no such series.
func sample(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) (v float64, ok bool) {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabels(m, want) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// value is sample for a series that must exist.
func value(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	v, ok := sample(t, g, name, want)
	if !ok {
		t.Fatalf("no series %s%v; have:\n%s", name, want, dump(t, g, name))
	}
	return v
}

// await waits until the series exists and cond holds for its value.
func await(t testing.TB, g prometheus.Gatherer, name string, want map[string]string, what string, cond func(float64) bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		if v, ok := sample(t, g, name, want); ok && cond(v) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s%v: %s; have:\n%s", name, want, what, dump(t, g, name))
		}
		time.Sleep(time.Millisecond)
	}
}

// dump lists the series of family name, for failure messages.
func dump(t testing.TB, g prometheus.Gatherer, name string) string {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		return err.Error()
	}
	var lines []string
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + float64(m.GetHistogram().GetSampleCount())
			lines = append(lines, fmt.Sprintf("  {%s} %g", strings.Join(ls, ","), v))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
