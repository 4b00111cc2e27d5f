package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// ReadmeLockFigures renders docs/benchmarks.md's table of lock figures
// against the targets of DESIGN.md, and the sentence under it that dates
// them, from r: the figures there come from results.json, and
// TestReadmeFigures fails when they differ (-update writes them).
func ReadmeLockFigures(r *Results) string {
	var b strings.Builder
	b.WriteString("| lock | figure | goal (DESIGN §5) |\n|---|---|---|\n")
	run := func(impl, scenario string) RunResult { v, _ := r.Run(impl, scenario); return v }
	baton, rl, fm := run("baton", "uncontended"), run("redislock", "uncontended"), run("fenced-min", "uncontended")
	fmt.Fprintf(&b, "| uncontended | %s cycles/s = %.0f %% of the round-trip limit, %.2f× redislock (%s), %.2f× the minimal fenced lock (%s); redsync %s, seed %s | ≥ the best owner-checked peer and the minimal fenced lock |\n",
		thousands(baton.OpsPerS), 100*baton.OpsPerS/r.RTTLimit, baton.OpsPerS/rl.OpsPerS, thousands(rl.OpsPerS),
		baton.OpsPerS/fm.OpsPerS, thousands(fm.OpsPerS),
		thousands(run("redsync", "uncontended").OpsPerS), thousands(run("seed-sleep", "uncontended").OpsPerS))
	b.WriteString(unpinnedFigures(r))
	bc, rc, pc := run("baton", "contended"), run("redislock", "contended"), run("poller-1ms", "contended")
	fmt.Fprintf(&b, "| contended (%d processes × %d goroutines, %g ms section) | %s ops/s = %.0f %% of ideal (%s needed), %.2f× redislock (%s), %.2f× a plain 1 ms poller (%s; %s needed); wait p99 %s ms, max %s ms (redislock %s / %s ms, the poller %s / %s ms) | ≥ 90 %%, ≥ 1.3× best peer, p99 ≤ 2× fair share (%.0f ms) |\n",
		r.Setup.Procs, r.Setup.Goroutines, r.Setup.CSMS,
		thousands(bc.OpsPerS), 100*bc.OpsPerS/r.IdealContended, thousands(0.9*r.IdealContended),
		bc.OpsPerS/rc.OpsPerS, thousands(rc.OpsPerS), bc.OpsPerS/pc.OpsPerS, thousands(pc.OpsPerS), thousands(1.3*pc.OpsPerS),
		fmtMS(bc.WaitP99MS), fmtMS(bc.WaitMaxMS), fmtMS(rc.WaitP99MS), fmtMS(rc.WaitMaxMS), fmtMS(pc.WaitP99MS), fmtMS(pc.WaitMaxMS),
		2*r.FairShareWaitMS)
	overlaps := "0 for every implementation"
	if n := r.Overlaps(); n > 0 {
		overlaps = fmt.Sprintf("%d in all (see bench/README.md)", n)
	}
	fmt.Fprintf(&b, "| overlapping holders | %s | 0 |\n", overlaps)
	if c := r.Cluster; c != nil && len(c.Runs) == 2 {
		fmt.Fprintf(&b, "| on a Redis Cluster, 1 master → 3 (%d goroutines, keys spread over the shards) | %.2f× (%s → %s cycles/s) with the client and all servers on %d CPUs; %.2f× in cycles/s per CPU of the busiest master | close to linear (issue 20): not measurable on %d CPUs, see [Redis in production](redis.md#redis-in-production) |\n",
			c.Workers, c.Ratio, thousands(c.Runs[0].OpsPerS), thousands(c.Runs[1].OpsPerS), c.CPUs, c.ServerBoundRatio, c.CPUs)
	}
	if a := r.ReplicaAck; a != nil && len(a.Runs) == 2 {
		fmt.Fprintf(&b, "| `WithReplicaAck(1)`, uncontended, master + 1 replica | %.2f× the rate without (%.0f µs a cycle against %.0f µs) | measured, no target |\n",
			a.Ratio, a.Runs[1].CycleUS, a.Runs[0].CycleUS)
	}
	var met, missed []string
	for _, t := range r.Targets {
		if t.Pass {
			met = append(met, t.Name)
		} else {
			missed = append(missed, t.Name)
		}
	}
	fmt.Fprintf(&b, "\nThese lock figures are bench/results.json's, from the run of %s, whose round trip was %.1f µs on a shared\nvirtual machine; compare ratios within the run. Met: %s. Missed: %s.\n",
		r.Setup.Date, r.RTTMicros, orNone(met), orNone(missed))
	return b.String()
}

// unpinnedFigures renders the lock figures' row of the uncontended runs
// made with the pinning undone, or nothing when r has none (a run
// without pinning, or one from before they were measured).
func unpinnedFigures(r *Results) string {
	baton, ok := r.Run(BatonName, UncontendedUnpinned)
	if !ok || r.RTTLimitUnpinned <= 0 {
		return ""
	}
	rl, _ := r.Run(RedislockName, UncontendedUnpinned)
	fm, _ := r.Run(FencedMinName, UncontendedUnpinned)
	rs, _ := r.Run(RedsyncName, UncontendedUnpinned)
	return fmt.Sprintf("| uncontended, redis-server and the benchmark left to the scheduler | %s cycles/s = %.0f %% of that placement's round-trip limit, %.2f× redislock (%s), %.2f× the minimal fenced lock (%s); redsync %s; Redis CPU %.1f µs a cycle, %s redislock's | the same, and Redis CPU ≤ 1.1× redislock's |\n",
		thousands(baton.OpsPerS), 100*baton.OpsPerS/r.RTTLimitUnpinned, baton.OpsPerS/rl.OpsPerS, thousands(rl.OpsPerS),
		baton.OpsPerS/fm.OpsPerS, thousands(fm.OpsPerS), thousands(rs.OpsPerS),
		baton.RedisCPUUsPerOp, strings.Replace(ratio(baton.RedisCPUUsPerOp, rl.RedisCPUUsPerOp), "x", "×", 1))
}

// ReadmeComparison renders the measured comparison with the peers that
// the top-level README and docs/benchmarks.md show, from r: every figure
// in it comes from one lockbench run, and TestReadmeFigures fails when
// either document and results.json differ.
func ReadmeComparison(r *Results) string {
	var b strings.Builder
	peers := []string{"baton", "redsync", "redislock", "poller-1ms"}
	b.WriteString("| measured in one run | baton | redsync (gocron's Redis locker is redsync) | bsm/redislock | a plain 1 ms poller | Consul's lock recipe |\n|---|---|---|---|---|---|\n")
	// onRedis writes a row of the Redis peers' figures for scenario; the
	// Consul recipe's cell is empty.
	onRedis := func(label, scenario string, cell func(RunResult) string) {
		b.WriteString("| " + label + " |")
		for _, impl := range peers {
			if v, ok := r.Run(impl, scenario); ok {
				b.WriteString(" " + cell(v) + " |")
			} else {
				b.WriteString(" – |")
			}
		}
		b.WriteString(" – |\n")
	}
	ops := func(v RunResult) string { return thousands(v.OpsPerS) }
	onRedis("Redis, uncontended: lock+unlock cycles/s", "uncontended", ops)
	if _, ok := r.Run(BatonName, UncontendedUnpinned); ok {
		onRedis("Redis, uncontended, redis-server and the benchmark left to the scheduler: cycles/s", UncontendedUnpinned, ops)
	}
	onRedis(fmt.Sprintf("Redis, contended (%d processes × %d goroutines, %g ms section): ops/s, ideal %s", r.Setup.Procs, r.Setup.Goroutines, r.Setup.CSMS, thousands(r.IdealContended)), "contended", ops)
	onRedis("Redis, contended: wait p99 / max", "contended", func(v RunResult) string { return fmtMS(v.WaitP99MS) + " / " + fmtMS(v.WaitMaxMS) + " ms" })
	onRedis("Redis, contended: server commands per acquisition", "contended", func(v RunResult) string { return fmt.Sprintf("%.1f", v.RedisCallsPerOp) })
	if _, ok := r.Run(BatonName, ContendedShared); ok {
		onRedis("Redis, contended, one client per process shared by its goroutines: ops/s", ContendedShared, ops)
	}
	overlaps := make([]int, len(peers)+1)
	for i, impl := range peers {
		for _, sc := range scenarios {
			v, _ := r.Run(impl, sc)
			overlaps[i] += v.Overlaps
		}
	}
	if c := r.Consul; c != nil {
		// onConsul writes a row of baton's and the recipe's figures on
		// Consul.
		onConsul := func(label string, runs []ConsulRun) {
			cells := map[string]string{"baton": "–", "consul-lock": "–"}
			for _, run := range runs {
				cells[run.Impl] = thousands(run.OpsPerS)
				switch run.Impl {
				case "baton":
					overlaps[0] += run.Overlaps
				case "consul-lock":
					overlaps[len(peers)] += run.Overlaps
				}
			}
			fmt.Fprintf(&b, "| %s | %s | – | – | – | %s |\n", label, cells["baton"], cells["consul-lock"])
		}
		onConsul("Consul "+c.Version+", uncontended: cycles/s", c.Uncontended)
		onConsul("Consul "+c.Version+", contended: ops/s", c.Contended)
		if c.Terms > 0 {
			fmt.Fprintf(&b, "| Consul %s, role: graceful handover p50 / max (%d handovers) | %s / %s ms | – | – | – | – |\n",
				c.Version, c.Terms, fmtMS(c.HandoverP50MS), fmtMS(c.HandoverMaxMS))
			fmt.Fprintf(&b, "| Consul %s, role: crash failover with a %s role TTL, p50 / max (%d failovers) | %.2f / %.2f s | – | – | – | – |\n",
				c.Version, time.Duration(c.FailoverTTLMS*float64(time.Millisecond)), c.Terms, c.FailoverP50MS/1000, c.FailoverMaxMS/1000)
		}
	}
	b.WriteString("| overlapping holders |")
	for _, n := range overlaps {
		fmt.Fprintf(&b, " %d |", n)
	}
	fmt.Fprintf(&b, "\n\nFrom the lockbench run of %s (bench/results.json). A server command per acquisition counts a script\nand each command it calls, and includes the harness's 3.\n", r.Setup.Date)
	return b.String()
}

// ReadmeGoFigures renders docs/benchmarks.md's table of role's Go
// benchmark figures against the targets of DESIGN.md, and the sentence
// under it that dates them, from g (bench/gobench.txt, which make
// bench-role writes): TestReadmeFigures fails when the document and the file
// differ (-update writes them). A benchmark or metric the table needs and
// g lacks is an error naming it, never an empty cell.
func ReadmeGoFigures(g *GoBenchmarks) (string, error) {
	var errs []error
	value := func(name, unit string) float64 {
		v, err := g.Value(name, unit)
		// A missing benchmark is named once, not once per figure of it.
		if err != nil && !slices.ContainsFunc(errs, func(e error) bool { return e.Error() == err.Error() }) {
			errs = append(errs, err)
		}
		return v
	}
	config := func(key string) string {
		v := g.Config[key]
		if v == "" {
			errs = append(errs, fmt.Errorf("no %q line (make bench-role writes one)", key+":"))
		}
		return v
	}
	clock, isMaster := value("BenchmarkMonotonicClock", "ns/op"), value("BenchmarkIsMaster", "ns/op")
	allocs := value("BenchmarkIsMaster", "allocs/op")
	handover := value("BenchmarkHandover", "handover-p50-ms")
	failP50, failP99 := value("BenchmarkFailover", "failover-over-ttl-p50-ms"), value("BenchmarkFailover", "failover-over-ttl-p99-ms")
	failovers, ttl := value("BenchmarkFailover", "failover-over-ttl-samples"), value("BenchmarkFailover", "ttl-ms")
	scale, electors := value("BenchmarkScale10k", "cmds/elector/interval"), value("BenchmarkScale10k", "electors")
	fleet, processes := value("BenchmarkFleet/config", "cmds/elector/interval"), value("BenchmarkFleet/config", "processes")
	fleetDefaults := value("BenchmarkFleet/store-defaults", "cmds/elector/interval")
	date, redis := config("date"), config("redis-server")
	if len(errs) > 0 {
		return "", fmt.Errorf("bench/gobench.txt: %w", errors.Join(errs...))
	}

	var b strings.Builder
	b.WriteString("| what | figure | goal (DESIGN §5) |\n|---|---|---|\n")
	ratio := isMaster / clock
	fmt.Fprintf(&b, "| `IsMaster` (`BenchmarkIsMaster` beside `BenchmarkMonotonicClock`) | %.1f ns vs %.1f ns: %.2f×, %g allocs | ≤ 1.2×, 0 allocs |\n",
		isMaster, clock, ratio, allocs)
	fmt.Fprintf(&b, "| graceful handover (`BenchmarkHandover`, real Redis) | p50 %s ms | p50 ≤ 5 ms |\n", fmtShortMS(handover))
	fmt.Fprintf(&b, "| crash failover (`BenchmarkFailover`, TTL %g ms) | p50 %s ms, p99 %s ms after the key expired (%g failovers) | ≤ TTL + 100 ms |\n",
		ttl, fmtShortMS(failP50), fmtShortMS(failP99), failovers)
	fmt.Fprintf(&b, "| %s electors, one client (`BenchmarkScale10k`) | %.2f commands per elector per heartbeat interval | ≤ 1 |\n",
		thousands(electors), scale)
	fmt.Fprintf(&b, "| a fleet: one client and store per process (`BenchmarkFleet`, %s processes, defaults scaled 7.5×) | %.2f commands per elector per heartbeat interval with `cfg.RedisStoreOptions()` (%.2f with the store's own marker and health-check defaults) | ≤ 1 |\n",
		thousands(processes), fleet, fleetDefaults)

	var met, missed []string
	judge := func(name string, pass bool) {
		if pass {
			met = append(met, name)
		} else {
			missed = append(missed, name)
		}
	}
	judge("IsMaster vs 1.2x the clock read, 0 allocs", ratio <= 1.2 && allocs == 0)
	judge("handover p50 vs 5 ms", handover <= 5)
	judge("failover p99 vs TTL + 100 ms", failP99 <= 100)
	judge(thousands(electors)+" electors vs 1 command per interval", scale <= 1)
	judge("the fleet with cfg.RedisStoreOptions() vs 1 command per interval", fleet <= 1)
	date, machine, clockNote := goRunNote(g, date, redis)
	fmt.Fprintf(&b, "\nThese Go figures are bench/gobench.txt's, from the run of %s (%s) on a shared\nvirtual machine; %s. Met: %s. Missed: %s.\n",
		date, machine, clockNote, orNone(met), orNone(missed))
	return b.String(), nil
}

// goRunNote returns what dates the figures of g: the run's date (with
// the -benchtime, if any), the machine it ran on with the redis-server
// version, and how IsMaster's runs compare with the clock read.
func goRunNote(g *GoBenchmarks, date, redis string) (when, machine, clockNote string) {
	var m []string
	if v := g.Config["cpu"]; v != "" {
		m = append(m, v)
	}
	runs := 0 // of IsMaster
	for _, r := range g.Results {
		if r.Name == "BenchmarkIsMaster" {
			if runs == 0 {
				m = append(m, fmt.Sprintf("GOMAXPROCS %d", r.Procs))
			}
			runs++
		}
	}
	if v := g.Config["go"]; v != "" {
		m = append(m, v)
	}
	m = append(m, "redis-server "+redis)
	if v := g.Config["benchtime"]; v != "" {
		date += "\nwith -benchtime " + v
	}
	clockNote = "compare IsMaster with the clock read beside it"
	if runs > 1 {
		clockNote = fmt.Sprintf("IsMaster and the clock read beside it are the medians of %d runs each, taken in turn", runs)
	}
	return date, strings.Join(m, ", "), clockNote
}

// fmtShortMS formats a latency in milliseconds with two decimals below
// 1 ms and one from there on.
func fmtShortMS(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "; ")
}

// thousands formats v rounded to a whole number, with commas between
// groups of three digits.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}
