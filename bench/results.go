package bench

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Results is what a Run measured; it is written as results.json.
type Results struct {
	// RTTLimit is the most lock+unlock cycles per second a two-round-trip
	// lock can run from one client: SET NX PX + DEL cycles per second, in
	// turns with the uncontended runs.
	RTTLimit float64 `json:"rtt_limit_cycles_per_s"`
	// IdealContended is 1/(cs + 2 RTT): one release and one acquisition
	// per handoff, nothing lost in between.
	IdealContended float64 `json:"ideal_contended_ops_per_s"`
	// FairShareWaitMS is holders x (cs + 2 RTT): the wait of each holder
	// when all are served in turn.
	FairShareWaitMS float64     `json:"fair_share_wait_ms"`
	Runs            []RunResult `json:"runs"`
	// RTTMicros is the round trip behind the figures above: 1/(2 RTTLimit).
	RTTMicros float64  `json:"rtt_us"`
	Setup     Setup    `json:"setup"`
	Machine   Machine  `json:"machine"`
	Targets   []Target `json:"targets,omitempty"`
	// RTTLimitUnpinned and RTTMicrosUnpinned are RTTLimit and RTTMicros
	// of the uncontended phase run with the pinning undone
	// (UncontendedUnpinned); zero when it did not run.
	RTTLimitUnpinned  float64 `json:"rtt_limit_unpinned_cycles_per_s,omitempty"`
	RTTMicrosUnpinned float64 `json:"rtt_unpinned_us,omitempty"`
	// Consul holds the Consul figures of the same run (RunConsul).
	Consul *ConsulResults `json:"consul,omitempty"`
	// Cluster holds lock throughput on a Redis Cluster of one master and
	// of three (RunCluster).
	Cluster *ClusterResults `json:"cluster,omitempty"`
	// ReplicaAck holds the cost of redisbackend.WithReplicaAck(1)
	// (RunReplicaAck).
	ReplicaAck *ReplicaAckResults `json:"replica_ack,omitempty"`
}

// RunResult is one implementation in one scenario.
type RunResult struct {
	Impl     string  `json:"impl"`
	Scenario string  `json:"scenario"`
	OpsPerS  float64 `json:"ops_per_s"`
	// Waits: from calling Lock to holding the lock.
	WaitP50MS float64 `json:"wait_p50_ms"`
	WaitP99MS float64 `json:"wait_p99_ms"`
	WaitMaxMS float64 `json:"wait_max_ms"`
	// Handoffs: from one holder's Unlock call to the next holder's Lock
	// returning. The p99 is left out below 100 handoffs.
	HandoffP50MS float64  `json:"handoff_p50_ms"`
	HandoffP99MS *float64 `json:"handoff_p99_ms,omitempty"`
	Overlaps     int      `json:"overlaps"`
	// Counts behind the figures.
	Ops             int `json:"ops"`
	Waits           int `json:"waits"`
	UnfinishedWaits int `json:"unfinished_waits"`
	Handoffs        int `json:"handoffs"`
	// HoldMeanMS is the mean time from acquisition to Unlock.
	HoldMeanMS float64 `json:"hold_mean_ms"`
	// RedisCallsPerOp and RedisCPUUsPerOp are the commands redis-server
	// ran (as INFO commandstats counts them: a script and each command it
	// calls) and the CPU time it used, per acquisition, over the whole
	// run. In the contended run they include the harness's three
	// bookkeeping commands (INCR, INCR, DECR) per acquisition.
	RedisCallsPerOp float64 `json:"redis_calls_per_op"`
	RedisCPUUsPerOp float64 `json:"redis_cpu_us_per_op"`
	// RedisScriptUsPerOp is the server's time in scripts (EVAL, EVALSHA
	// and FCALL, the commands they call included) per acquisition, as
	// INFO commandstats counts it: the share of the CPU time that the
	// scripts' own work costs, apart from reading and answering requests.
	RedisScriptUsPerOp float64 `json:"redis_script_us_per_op,omitempty"`
	// RedisCommands is INFO commandstats per acquisition, by command
	// (harness included): where the calls of RedisCallsPerOp go.
	RedisCommands map[string]CommandLoad `json:"redis_commands,omitempty"`
	// RedisReadsPerOp and RedisWritesPerOp are the server's socket reads
	// and writes per acquisition (INFO stats total_reads_processed and
	// total_writes_processed; the harness's and INFO's own included): a
	// message published to n subscribed clients is n writes. Zero in
	// results from before they were measured.
	RedisReadsPerOp  float64 `json:"redis_reads_per_op,omitempty"`
	RedisWritesPerOp float64 `json:"redis_writes_per_op,omitempty"`
}

// CommandLoad is one command's share of a run: calls per acquisition and
// the server's mean time per call (µs; a script's includes the commands
// it calls).
type CommandLoad struct {
	CallsPerOp float64 `json:"calls_per_op"`
	UsPerCall  float64 `json:"us_per_call"`
}

// scriptCommands are the commands that run a Lua script.
var scriptCommands = []string{"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"}

// setLoad fills r's server figures from load, the work of ops
// acquisitions.
func (r *RunResult) setLoad(load serverLoad, ops int) {
	n := float64(ops)
	r.RedisCallsPerOp = round(float64(load.calls)/n, 2)
	r.RedisCPUUsPerOp = round(load.cpuUsec/n, 1)
	r.RedisReadsPerOp = round(float64(load.reads)/n, 2)
	r.RedisWritesPerOp = round(float64(load.writes)/n, 2)
	var script int64
	for name, c := range load.cmds {
		if r.RedisCommands == nil {
			r.RedisCommands = map[string]CommandLoad{}
		}
		r.RedisCommands[name] = CommandLoad{
			CallsPerOp: round(float64(c.calls)/n, 2),
			UsPerCall:  round(float64(c.usec)/float64(c.calls), 2),
		}
		if slices.Contains(scriptCommands, name) {
			script += c.usec
		}
	}
	r.RedisScriptUsPerOp = round(float64(script)/n, 1)
}

// Setup records how the runs were made.
type Setup struct {
	Date       string      `json:"date"`
	Quick      bool        `json:"quick"`
	RunSeconds float64     `json:"run_duration_s"`
	WarmupS    float64     `json:"warmup_s"`
	Rounds     int         `json:"rounds"`
	Procs      int         `json:"procs"`
	Goroutines int         `json:"goroutines_per_proc"`
	Clients    string      `json:"clients"` // per-goroutine (contended), per-process (contended-shared) or both
	Pinning    string      `json:"pinning"`
	CSMS       float64     `json:"cs_ms"`
	ThinkMS    float64     `json:"think_ms"`
	HoldTTLS   float64     `json:"hold_ttl_s"`
	RTTMethod  string      `json:"rtt_method"`
	Impls      []ImplSetup `json:"impls"`
}

// ImplSetup says how one implementation was configured.
type ImplSetup struct {
	Name  string `json:"name"`
	Setup string `json:"setup"`
}

func newSetup(o Options) Setup {
	s := Setup{
		Date:       time.Now().UTC().Format(time.RFC3339),
		Quick:      o.Quick,
		RunSeconds: o.Duration.Seconds(),
		WarmupS:    o.Warmup.Seconds(),
		Rounds:     o.Rounds,
		Procs:      o.Procs,
		Goroutines: o.Goroutines,
		Clients:    "per-goroutine",
		Pinning:    "none: left to the scheduler",
		CSMS:       ms(o.CS),
		ThinkMS:    ms(o.Think),
		HoldTTLS:   HoldTTL.Seconds(),
		RTTMethod:  "SET NX PX + DEL cycles from 1 client, taking turns with the implementations' uncontended runs",
	}
	switch o.Clients {
	case ClientsProcess:
		s.Clients = "per-process"
	case ClientsBoth:
		s.Clients = "per-goroutine and per-process"
	}
	for _, n := range o.Impls {
		im, _ := LookupImpl(n)
		s.Impls = append(s.Impls, ImplSetup{Name: im.Name, Setup: im.Setup})
	}
	return s
}

// derive fills the figures that follow from the round trips.
func (r *Results) derive(o Options) {
	if r.RTTLimitUnpinned > 0 {
		r.RTTMicrosUnpinned = round(1e6/(2*r.RTTLimitUnpinned), 2)
		r.RTTLimitUnpinned = round(r.RTTLimitUnpinned, 1)
	}
	if r.RTTLimit <= 0 {
		return
	}
	rtt := 1 / (2 * r.RTTLimit) // seconds
	cycle := o.CS.Seconds() + 2*rtt
	r.RTTMicros = round(rtt*1e6, 2)
	r.IdealContended = round(1/cycle, 1)
	r.FairShareWaitMS = round(float64(o.Procs*o.Goroutines)*cycle*1e3, 3)
	r.RTTLimit = round(r.RTTLimit, 1)
}

func newRunResult(impl, scenario string, s summary) RunResult {
	r := RunResult{
		Impl:            impl,
		Scenario:        scenario,
		OpsPerS:         round(s.opsPerS, 1),
		WaitP50MS:       round(ms(percentile(s.wait, 50)), 3),
		WaitP99MS:       round(ms(percentile(s.wait, 99)), 3),
		WaitMaxMS:       round(ms(percentile(s.wait, 100)), 3),
		HandoffP50MS:    round(ms(percentile(s.handoff, 50)), 3),
		Overlaps:        s.overlaps,
		Ops:             s.ops,
		Waits:           len(s.wait),
		UnfinishedWaits: s.unfinished,
		Handoffs:        len(s.handoff),
		HoldMeanMS:      round(ms(s.holdMean), 3),
	}
	if s.loadOps > 0 {
		r.setLoad(s.load, s.loadOps)
	}
	if len(s.handoff) >= minP99Samples {
		p99 := round(ms(percentile(s.handoff, 99)), 3)
		r.HandoffP99MS = &p99
	}
	return r
}

// Run returns the result of impl in scenario, if it ran.
func (r *Results) Run(impl, scenario string) (RunResult, bool) {
	for _, run := range r.Runs {
		if run.Impl == impl && run.Scenario == scenario {
			return run, true
		}
	}
	return RunResult{}, false
}

// ran reports whether any implementation ran in scenario.
func (r *Results) ran(scenario string) bool {
	return slices.ContainsFunc(r.Runs, func(run RunResult) bool { return run.Scenario == scenario })
}

// Overlaps returns the overlapping holders seen in all runs.
func (r *Results) Overlaps() int {
	n := 0
	for _, run := range r.Runs {
		n += run.Overlaps
	}
	if c := r.Consul; c != nil {
		for _, run := range append(slices.Clone(c.Uncontended), c.Contended...) {
			n += run.Overlaps
		}
	}
	return n
}

// Target is one of the figures DESIGN.md §5 holds baton to, judged on
// these results.
type Target struct {
	Name string  `json:"name"`
	Got  float64 `json:"got"`
	Cmp  string  `json:"cmp"` // ">=" or "<="
	Want float64 `json:"want"`
	Pass bool    `json:"pass"`
}

// judge evaluates the targets for baton; it returns none unless baton ran
// uncontended and in a contended scenario. The uncontended targets are
// judged in each uncontended scenario that baton ran in, pinned and
// unpinned; the contended ones in each contended scenario, with clients
// per goroutine and shared per process.
func judge(r *Results) []Target {
	_, ok1 := r.Run(BatonName, Uncontended)
	_, ok2 := r.Run(BatonName, Contended)
	_, ok3 := r.Run(BatonName, ContendedShared)
	if !ok1 || !ok2 && !ok3 {
		return nil
	}
	ts := append(uncontendedTargets(r, Uncontended), uncontendedTargets(r, UncontendedUnpinned)...)
	ts = append(ts, contendedTargets(r, Contended)...)
	if con, ok := r.Run(BatonName, Contended); ok {
		if bestCon, conName := r.best(Contended, isPeer); conName != "" {
			ts = append(ts, newTarget("contended ops/s vs 1.3x the best peer ("+conName+")", con.OpsPerS, ">=", 1.3*bestCon))
		}
	}
	ts = append(ts, contendedTargets(r, ContendedShared)...)
	return append(ts, newTarget("overlapping holders, every run", float64(r.Overlaps()), "<=", 0))
}

// maxContendedCalls is the most Redis calls per contended acquisition,
// the harness's three included, that DESIGN.md §5 allows.
const maxContendedCalls = 12

// contendedTargets judges baton's run in scenario, a contended one
// (DESIGN.md §5): at least 90 % of the ideal rate, wait p99 at most twice
// the fair share, Redis CPU per acquisition at most redislock's in the
// same scenario and at most maxContendedCalls Redis calls per
// acquisition. The server figures are judged only when they were
// measured; nothing is when baton did not run in scenario.
func contendedTargets(r *Results, scenario string) []Target {
	baton, ok := r.Run(BatonName, scenario)
	if !ok {
		return nil
	}
	ts := []Target{
		newTarget(scenario+" ops/s vs 90% of the ideal", baton.OpsPerS, ">=", 0.9*r.IdealContended),
		newTarget(scenario+" wait p99 ms vs 2x the fair share", baton.WaitP99MS, "<=", 2*r.FairShareWaitMS),
	}
	if rl, ok := r.Run(RedislockName, scenario); ok && rl.RedisCPUUsPerOp > 0 && baton.RedisCPUUsPerOp > 0 {
		ts = append(ts, newTarget(scenario+" Redis CPU µs per acquisition vs redislock's", baton.RedisCPUUsPerOp, "<=", rl.RedisCPUUsPerOp))
	}
	if baton.RedisCallsPerOp > 0 {
		ts = append(ts, newTarget(scenario+" Redis calls per acquisition", baton.RedisCallsPerOp, "<=", maxContendedCalls))
	}
	return ts
}

// uncontendedTargets judges baton's run in scenario, an uncontended one,
// against the peers' in the same scenario (DESIGN.md §5): its rate at
// least the best owner-checked library's and the minimal fenced lock's,
// its Redis CPU per cycle at most 1.1x redislock's. A peer that did not
// run is no target; neither is anything when baton did not run.
func uncontendedTargets(r *Results, scenario string) []Target {
	baton, ok := r.Run(BatonName, scenario)
	if !ok {
		return nil
	}
	var ts []Target
	ownerChecked := func(impl string) bool { return slices.Contains(ownerCheckedPeers, impl) }
	if best, name := r.best(scenario, ownerChecked); name != "" {
		ts = append(ts, newTarget(scenario+" ops/s vs the best owner-checked peer ("+name+")", baton.OpsPerS, ">=", best))
	}
	if fm, ok := r.Run(FencedMinName, scenario); ok {
		ts = append(ts, newTarget(scenario+" ops/s vs the minimal fenced lock", baton.OpsPerS, ">=", fm.OpsPerS))
	}
	if rl, ok := r.Run(RedislockName, scenario); ok && rl.RedisCPUUsPerOp > 0 {
		ts = append(ts, newTarget(scenario+" Redis CPU µs per cycle vs 1.1x redislock's", baton.RedisCPUUsPerOp, "<=", 1.1*rl.RedisCPUUsPerOp))
	}
	return ts
}

// newTarget judges got against want: cmp is ">=" or "<=".
func newTarget(name string, got float64, cmp string, want float64) Target {
	pass := got >= want
	if cmp == "<=" {
		pass = got <= want
	}
	return Target{Name: name, Got: got, Cmp: cmp, Want: round(want, 3), Pass: pass}
}

// best returns the highest ops/s in scenario among the implementations
// that among selects, and whose it is.
func (r *Results) best(scenario string, among func(impl string) bool) (float64, string) {
	best, name := 0.0, ""
	for _, run := range r.Runs {
		if run.Scenario == scenario && among(run.Impl) && run.OpsPerS > best {
			best, name = run.OpsPerS, run.Impl
		}
	}
	return best, name
}

// WriteTable prints the results for people: the machine, the limits, one
// line per run and the targets.
func (r *Results) WriteTable(w io.Writer) error {
	var b strings.Builder
	if len(r.Runs) > 0 {
		if err := r.writeRedis(&b); err != nil {
			return err
		}
	}
	if c := r.Consul; c != nil {
		if len(r.Runs) > 0 {
			b.WriteString("\n")
		}
		if err := c.writeTable(&b); err != nil {
			return err
		}
	}
	if c := r.Cluster; c != nil {
		if err := c.writeTable(&b); err != nil {
			return err
		}
	}
	if a := r.ReplicaAck; a != nil && len(a.Runs) == 2 {
		if err := a.writeTable(&b); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTable prints the figures measured on a Consul dev agent: one line
// per run, each against the bare KV reference and the lock recipe.
func (c *ConsulResults) writeTable(b *strings.Builder) error {
	fmt.Fprintf(b, "Consul %s (a private dev agent: one server, Raft in memory):\n", c.Version)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "impl\tscenario\tops/s\tvs bare KV\tvs lock recipe\toverlaps\trequests/op\tRaft writes/op\trefused/op\twake-ups/op\treads/op\t")
	ref, recipe := c.references()
	for _, set := range []struct {
		name string
		runs []ConsulRun
	}{{Uncontended, c.Uncontended}, {Contended, c.Contended}} {
		for _, run := range set.runs {
			writeConsulRun(tw, set.name, run, ref, recipe[set.name])
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("(per op: the HTTP requests the clients sent, those Consul committed through Raft and of them the ones it refused\n" +
		" (a transaction whose check failed), the blocking queries that returned, and the reads that did not block)\n")
	if c.Terms > 0 {
		fmt.Fprintf(b, "role on Consul (%d terms): graceful handover p50 %s ms (max %s); crash failover p50 %s ms (max %s), TTL %g ms\n",
			c.Terms, fmtMS(c.HandoverP50MS), fmtMS(c.HandoverMaxMS), fmtMS(c.FailoverP50MS), fmtMS(c.FailoverMaxMS), c.FailoverTTLMS)
	}
	return nil
}

// references returns the uncontended ops/s of the bare KV reference
// (consul-kv) and, per scenario, those of the lock recipe (consul-lock).
func (c *ConsulResults) references() (float64, map[string]float64) {
	var ref float64
	recipe := map[string]float64{}
	for _, run := range c.Uncontended {
		if run.Impl == "consul-kv" {
			ref = run.OpsPerS
		}
		if run.Impl == "consul-lock" {
			recipe[Uncontended] = run.OpsPerS
		}
	}
	for _, run := range c.Contended {
		if run.Impl == "consul-lock" {
			recipe[Contended] = run.OpsPerS
		}
	}
	return ref, recipe
}

// writeConsulRun prints one Consul run of scenario: ref is the bare KV's
// uncontended ops/s and recipe the lock recipe's in scenario (0: none).
func writeConsulRun(tw io.Writer, scenario string, run ConsulRun, ref, recipe float64) {
	of, ofRecipe := "-", "-"
	if scenario == Uncontended && ref > 0 {
		of = fmt.Sprintf("%.2fx kv", run.OpsPerS/ref)
	}
	if recipe > 0 {
		ofRecipe = fmt.Sprintf("%.2fx", run.OpsPerS/recipe)
	}
	fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", run.Impl, scenario, run.OpsPerS, of, ofRecipe, run.Overlaps,
		perOp(run.RequestsPerOp), perOp(run.WritesPerOp), perOp(run.FailedPerOp), perOp(run.WakeupsPerOp), perOp(run.ReadsPerOp))
}

// perOp formats a per-operation count, "-" when there is none.
func perOp(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

// writeTable prints the Redis Cluster runs: one line per number of
// masters and the ratio of three masters to one.
func (c *ClusterResults) writeTable(b *strings.Builder) error {
	fmt.Fprintf(b, "\nRedis Cluster: %d workers, each locking its own app's key, the keys spread over the masters' slots:\n", c.Workers)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "masters\tops/s\tserver CPU (each)\tclient CPU\tops/s at a busy server\t")
	for _, run := range c.Runs {
		cpus := make([]string, len(run.ServerCPU))
		for i, v := range run.ServerCPU {
			cpus[i] = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(tw, "%d\t%.1f\t%s\t%.2f\t%.0f\t\n", run.Masters, run.OpsPerS, strings.Join(cpus, " "), run.ClientCPU, run.ServerBoundOpsPerS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(b, "3 masters / 1 master: %.2fx measured on %d CPUs shared by the client and every server; %.2fx at a busy server\n"+
		"(CPU in CPUs used while measured; ops/s at a busy server = ops/s / the busiest server's CPU)\n",
		c.Ratio, c.CPUs, c.ServerBoundRatio)
	return nil
}

// writeTable prints the WithReplicaAck(1) comparison: with and without.
func (a *ReplicaAckResults) writeTable(b *strings.Builder) error {
	b.WriteString("\nWithReplicaAck(1) on a master with one replica, one goroutine uncontended:\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\tops/s\tcycle µs\tmaster µs/op\treplica µs/op\t")
	for _, run := range a.Runs {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t\n", run.Name, run.OpsPerS, run.CycleUS, run.MasterCPUUSPerOp, run.ReplicaCPUUSPerOp)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(b, "with / without: %.2fx\n", a.Ratio)
	return nil
}

// writeCommands prints, for each run that has them, the server's
// commands per acquisition with their mean time per call (commandstats),
// and the time in scripts per acquisition.
func writeCommands(b *strings.Builder, runs []RunResult) {
	head := false
	for _, run := range runs {
		if len(run.RedisCommands) == 0 {
			continue
		}
		if !head {
			b.WriteString("\nserver commands per acquisition (calls x µs per call, INFO commandstats; a script's µs include the commands it calls;\n" +
				" socket reads/writes: INFO stats, a message published to n clients is n writes):\n")
			head = true
		}
		names := slices.Sorted(maps.Keys(run.RedisCommands))
		fmt.Fprintf(b, "  %s %s: scripts %.1f µs/op;", run.Impl, run.Scenario, run.RedisScriptUsPerOp)
		if run.RedisWritesPerOp > 0 {
			fmt.Fprintf(b, " socket reads/writes %.2f/%.2f;", run.RedisReadsPerOp, run.RedisWritesPerOp)
		}
		for _, name := range names {
			c := run.RedisCommands[name]
			fmt.Fprintf(b, " %s %.2fx%.2f", name, c.CallsPerOp, c.UsPerCall)
		}
		b.WriteString("\n")
	}
}

// writeRedis prints the figures measured on redis-server.
func (r *Results) writeRedis(b *strings.Builder) error {
	m := r.Machine
	fmt.Fprintf(b, "machine: %d CPUs (%s), %s, %s, %s, redis-server %s\n",
		m.CPUs, m.CPUModel, m.memory(), m.OS, m.GoVersion, m.RedisVersion)
	fmt.Fprintf(b, "round trip: %.1f µs (%s) -> round-trip limit %.0f lock+unlock cycles/s\n",
		r.RTTMicros, r.Setup.RTTMethod, r.RTTLimit)
	if r.RTTLimitUnpinned > 0 {
		fmt.Fprintf(b, "round trip unpinned: %.1f µs -> round-trip limit %.0f lock+unlock cycles/s (of the %s runs)\n",
			r.RTTMicrosUnpinned, r.RTTLimitUnpinned, UncontendedUnpinned)
	}
	s := r.Setup
	fmt.Fprintf(b, "contended: %d processes x %d goroutines, clients %s, cs %gms, think %gms; ideal %.0f ops/s, fair-share wait %.2f ms\n",
		s.Procs, s.Goroutines, s.Clients, s.CSMS, s.ThinkMS, r.IdealContended, r.FairShareWaitMS)
	if r.ran(ContendedShared) {
		fmt.Fprintf(b, "  %s: one Redis client and one lock client per process, shared by its goroutines (%s: one of each per goroutine)\n",
			ContendedShared, Contended)
	}
	fmt.Fprintf(b, "placement: %s\n", s.Pinning)
	if r.RTTLimitUnpinned > 0 {
		fmt.Fprintf(b, "  and %s: the uncontended phase again, redis-server and the benchmark left to the scheduler\n", UncontendedUnpinned)
	}
	fmt.Fprintf(b, "each run %gs (first %gs not counted), %d round(s) pooled\n\n", s.RunSeconds, s.WarmupS, s.Rounds)

	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "impl\tscenario\tops/s\tof bound\twait p50\twait p99\twait max\thandoff p50\thandoff p99\toverlaps\tredis calls/op\tredis µs/op\t")
	for _, run := range r.Runs {
		p99 := "-"
		if run.HandoffP99MS != nil {
			p99 = fmtMS(*run.HandoffP99MS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%.1f\t%.1f\t\n",
			run.Impl, run.Scenario, run.OpsPerS, r.ofBound(run), fmtMS(run.WaitP50MS), fmtMS(run.WaitP99MS),
			fmtMS(run.WaitMaxMS), fmtMS(run.HandoffP50MS), p99, run.Overlaps, run.RedisCallsPerOp, run.RedisCPUUsPerOp)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	bound := "uncontended vs the round-trip limit"
	if r.RTTLimitUnpinned > 0 {
		bound += " (unpinned: the unpinned one)"
	}
	b.WriteString("(of bound: " + bound + ", contended vs the ideal; times in ms;\n" +
		" redis calls/op and µs/op: the server's commands (a script and the commands it calls) and CPU time per acquisition;\n" +
		" the contended ones include the harness's 3 bookkeeping commands)\n")
	writeCommands(b, r.Runs)
	r.writeBeside(b)
	writeTargets(b, r.Targets)
	return nil
}

// ofBound returns run's rate as a share of its bound: the round-trip
// limit of its uncontended scenario, or the ideal contended rate; "-"
// when that was not measured.
func (r *Results) ofBound(run RunResult) string {
	bound := r.RTTLimit
	switch run.Scenario {
	case Contended, ContendedShared:
		bound = r.IdealContended
	case UncontendedUnpinned:
		bound = r.RTTLimitUnpinned
	}
	if bound <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*run.OpsPerS/bound)
}

// writeBeside prints baton's rate and Redis CPU per acquisition as ratios
// to each peer's in the same scenario, one line per scenario.
func (r *Results) writeBeside(b *strings.Builder) {
	head := false
	for _, sc := range scenarios {
		baton, ok := r.Run(BatonName, sc)
		if !ok {
			continue
		}
		var cells []string
		for _, run := range r.Runs {
			if run.Scenario == sc && isPeer(run.Impl) && run.OpsPerS > 0 {
				cells = append(cells, fmt.Sprintf("%s %.2fx (CPU %s)", run.Impl, baton.OpsPerS/run.OpsPerS, ratio(baton.RedisCPUUsPerOp, run.RedisCPUUsPerOp)))
			}
		}
		if len(cells) == 0 {
			continue
		}
		if !head {
			b.WriteString("\nbaton beside each peer in the same scenario (ops/s ratio; Redis CPU per acquisition ratio):\n")
			head = true
		}
		fmt.Fprintf(b, "  %s: %s of bound; %s\n", sc, r.ofBound(baton), strings.Join(cells, ", "))
	}
}

// ratio formats a/b as "1.23x", or "-" when b is not positive.
func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// writeTargets prints the judged targets, if any.
func writeTargets(b *strings.Builder, ts []Target) {
	if len(ts) == 0 {
		return
	}
	b.WriteString("\ntargets for baton (DESIGN.md §5):\n")
	for _, t := range ts {
		verdict := "PASS"
		if !t.Pass {
			verdict = "FAIL"
		}
		fmt.Fprintf(b, "  %s  %s: %g %s %g\n", verdict, t.Name, t.Got, t.Cmp, t.Want)
	}
}

func fmtMS(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3f", v)
	}
}

// round rounds x to d decimals.
func round(x float64, d int) float64 {
	p := math.Pow(10, float64(d))
	return math.Round(x*p) / p
}
