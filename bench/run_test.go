package bench

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The unpinned uncontended phase is pooled over the rounds as its own
// scenario, apart from the pinned one: its own runs, round-trip limit,
// server figures per cycle and targets.
func TestRoundPoolUnpinned(t *testing.T) {
	pool := roundPool{}
	for range 2 { // rounds
		pool.add(referenceName, Uncontended, oneSecond(10000, 2, 40))
		pool.add(referenceName, UncontendedUnpinned, oneSecond(16000, 2, 30))
		pool.add(BatonName, Uncontended, oneSecond(9000, 9, 50))
		pool.add(BatonName, UncontendedUnpinned, oneSecond(12000, 9, 45))
		pool.add(BatonName, Contended, oneSecond(800, 31, 200))
		pool.add(RedislockName, Uncontended, oneSecond(8800, 5, 48))
		pool.add(RedislockName, UncontendedUnpinned, oneSecond(13000, 5, 30))
		pool.add(RedislockName, Contended, oneSecond(600, 14, 130))
	}
	res := &Results{}
	pool.finish(res, Options{Impls: []string{BatonName, RedislockName}, Procs: 4, Goroutines: 4, CS: time.Millisecond})

	if res.RTTLimit != 10000 || res.RTTLimitUnpinned != 16000 || res.RTTMicrosUnpinned != 31.25 {
		t.Errorf("round-trip limits %v and %v unpinned (%v µs); want 10000 and 16000 (31.25 µs)", res.RTTLimit, res.RTTLimitUnpinned, res.RTTMicrosUnpinned)
	}
	checkRunOrder(t, res, "baton uncontended", "baton uncontended-unpinned", "baton contended",
		"redislock uncontended", "redislock uncontended-unpinned", "redislock contended")
	if run, _ := res.Run(BatonName, UncontendedUnpinned); run.OpsPerS != 12000 || run.Ops != 24000 || run.RedisCallsPerOp != 9 || run.RedisCPUUsPerOp != 45 {
		t.Errorf("baton unpinned: %v ops/s, %d ops, %v calls and %v µs per cycle; want 12000, 24000, 9, 45",
			run.OpsPerS, run.Ops, run.RedisCallsPerOp, run.RedisCPUUsPerOp)
	}
	checkPasses(t, res.Targets, map[string]bool{
		"uncontended ops/s vs the best owner-checked peer (redislock)":          true,
		"uncontended Redis CPU µs per cycle vs 1.1x redislock's":                true,
		"uncontended-unpinned ops/s vs the best owner-checked peer (redislock)": false,
		"uncontended-unpinned Redis CPU µs per cycle vs 1.1x redislock's":       false,
	})
}

// The contended run with clients shared per process is pooled over the
// rounds as its own scenario, right after the contended one of each
// implementation: its own runs, server figures per acquisition and
// targets, apart from the contended run with a client per goroutine.
func TestRoundPoolContendedShared(t *testing.T) {
	pool := roundPool{}
	for range 2 { // rounds
		pool.add(referenceName, Uncontended, oneSecond(10000, 2, 40))
		pool.add(BatonName, Uncontended, oneSecond(9000, 9, 50))
		pool.add(BatonName, Contended, oneSecond(800, 21, 300))
		pool.add(BatonName, ContendedShared, oneSecond(850, 11, 120))
		pool.add(RedislockName, Uncontended, oneSecond(8800, 5, 48))
		pool.add(RedislockName, Contended, oneSecond(600, 14, 280))
		pool.add(RedislockName, ContendedShared, oneSecond(500, 16, 150))
	}
	res := &Results{}
	pool.finish(res, Options{Impls: []string{BatonName, RedislockName}, Procs: 4, Goroutines: 4, CS: time.Millisecond})

	checkRunOrder(t, res, "baton uncontended", "baton contended", "baton contended-shared",
		"redislock uncontended", "redislock contended", "redislock contended-shared")
	if run, _ := res.Run(BatonName, ContendedShared); run.OpsPerS != 850 || run.Ops != 1700 || run.RedisCallsPerOp != 11 || run.RedisCPUUsPerOp != 120 {
		t.Errorf("baton contended-shared: %v ops/s, %d ops, %v calls and %v µs per acquisition; want 850, 1700, 11, 120",
			run.OpsPerS, run.Ops, run.RedisCallsPerOp, run.RedisCPUUsPerOp)
	}
	// The ideal is 1/(1 ms + 2 x 50 µs) = 909.1 ops/s: 90 % is 818.2.
	checkPasses(t, res.Targets, map[string]bool{
		"contended ops/s vs 90% of the ideal":                          false,
		"contended Redis CPU µs per acquisition vs redislock's":        false,
		"contended Redis calls per acquisition":                        false,
		"contended-shared ops/s vs 90% of the ideal":                   true,
		"contended-shared Redis CPU µs per acquisition vs redislock's": true,
		"contended-shared Redis calls per acquisition":                 true,
		"contended-shared wait p99 ms vs 2x the fair share":            true,
		"uncontended Redis CPU µs per cycle vs 1.1x redislock's":       true,
		"contended ops/s vs 1.3x the best peer (redislock)":            true,
		"overlapping holders, every run":                               true,
	})
}

// Options.Clients chooses the contended runs of a round: both by default,
// one of them when asked; the setup records it, and another value is an
// error that names it.
func TestOptionsClients(t *testing.T) {
	for _, c := range []struct {
		clients, setup string
		want           []string
	}{
		{"", "per-goroutine and per-process", []string{Contended, ContendedShared}},
		{ClientsBoth, "per-goroutine and per-process", []string{Contended, ContendedShared}},
		{ClientsGoroutine, "per-goroutine", []string{Contended}},
		{ClientsProcess, "per-process", []string{ContendedShared}},
	} {
		o, err := Options{Clients: c.clients, Exe: "lockbench"}.withDefaults()
		if err != nil {
			t.Fatalf("clients %q: %v", c.clients, err)
		}
		if got := o.contendedScenarios(); !slices.Equal(got, c.want) {
			t.Errorf("clients %q: contended scenarios %q, want %q", c.clients, got, c.want)
		}
		if got := newSetup(o).Clients; got != c.setup {
			t.Errorf("clients %q: setup's clients %q, want %q", c.clients, got, c.setup)
		}
	}
	_, err := Options{Clients: "thread", Exe: "lockbench"}.withDefaults()
	if err == nil || !strings.Contains(err.Error(), `clients "thread"`) {
		t.Errorf("clients \"thread\": error %v, want one naming it", err)
	}
}

// oneSecond is a turn's or a run's summary: ops acquisitions in 1 s,
// costing the server calls commands and cpu µs per acquisition.
func oneSecond(ops int, calls int64, cpu float64) summary {
	return summary{ops: ops, seconds: 1, loadOps: ops, load: serverLoad{calls: calls * int64(ops), cpuUsec: cpu * float64(ops)}}
}

// checkRunOrder checks that res has the runs want ("impl scenario"), in
// that order.
func checkRunOrder(t *testing.T, res *Results, want ...string) {
	t.Helper()
	var got []string
	for _, run := range res.Runs {
		got = append(got, run.Impl+" "+run.Scenario)
	}
	if !slices.Equal(got, want) {
		t.Errorf("runs %q, want %q", got, want)
	}
}

// checkPasses checks that each target of want was judged in ts, passed
// or missed as want says.
func checkPasses(t *testing.T, ts []Target, want map[string]bool) {
	t.Helper()
	judged := map[string]bool{}
	for _, tg := range ts {
		judged[tg.Name] = tg.Pass
	}
	for name, pass := range want {
		if p, ok := judged[name]; !ok || p != pass {
			t.Errorf("target %q: pass %v (judged %v), want %v", name, p, ok, pass)
		}
	}
}
