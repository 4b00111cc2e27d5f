package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/testkit/testenv"
)

// Defaults of Options.
const (
	DefaultDuration   = 10 * time.Second
	DefaultRounds     = 3
	DefaultProcs      = 4
	DefaultGoroutines = 4
	DefaultCS         = time.Millisecond
	DefaultThink      = 2 * time.Millisecond
	// maxWarmup caps the default warm-up, a fifth of the run.
	maxWarmup = time.Second
)

// Scenario names.
const (
	Uncontended = "uncontended"
	// UncontendedUnpinned is the uncontended phase run again, when Run
	// pins, with the pinning undone: redis-server and the benchmark left
	// to the scheduler, as they run in production.
	UncontendedUnpinned = "uncontended-unpinned"
	// Contended is the contended run with one Redis client and one lock
	// client per goroutine: each goroutine is an instance of its own.
	Contended = "contended"
	// ContendedShared is the contended run again with one Redis client
	// and one lock client per process, shared by its goroutines: the
	// shape of a service, whose goroutines share one synclock.Locker.
	ContendedShared = "contended-shared"
)

// Values of Options.Clients: which contended runs a round makes.
const (
	// ClientsBoth runs Contended and then ContendedShared.
	ClientsBoth = "both"
	// ClientsGoroutine runs Contended only.
	ClientsGoroutine = "goroutine"
	// ClientsProcess runs ContendedShared only.
	ClientsProcess = "process"
)

// Options configures Run. The zero value runs every implementation with
// the defaults above.
type Options struct {
	// Impls names the implementations to run, in order; nil means all.
	Impls []string
	// Duration is, in each round, the measured time of each
	// implementation (and of the round-trip reference) in the uncontended
	// phase, and the length of each contended run, warm-up included.
	// Default 10 s.
	Duration time.Duration
	// Warmup is the start of each contended run left out of the
	// statistics, and the length of the uncounted warm-up slice of each
	// implementation in the uncontended phase (at most one slice).
	// Default a fifth of Duration, at most 1 s. Negative means none.
	Warmup time.Duration
	// Rounds repeats the whole sequence: the uncontended phase, then the
	// contended runs of every implementation, starting one implementation
	// later each round. The samples of all rounds are pooled.
	// Default 3.
	Rounds int
	// Procs and Goroutines shape the contended run. Default 4 and 4.
	Procs, Goroutines int
	// CS is the contended critical section (default 1 ms) and Think the
	// pause after a release (default 2 ms).
	CS, Think time.Duration
	// Clients says which contended runs each round makes, for each
	// implementation: ClientsBoth (the default) runs Contended (a Redis
	// client and an implementation client per goroutine) and then
	// ContendedShared (one of each per process, which its goroutines
	// share); ClientsGoroutine runs the first only, ClientsProcess the
	// second only.
	Clients string
	// Pin puts redis-server on one CPU and this process, with the workers
	// it starts, on the others (Linux, two CPUs or more), for the length of
	// Run. Left to the scheduler, a client lands now on the server's CPU,
	// now on another, and on virtual machines the round trip differs by
	// as much as 3x between the two. When it pins, each round also runs
	// the uncontended phase with the pinning undone (UncontendedUnpinned).
	Pin bool
	// Exe is the program started as a contended worker; it must call
	// WorkerMain when IsWorker. Default: this program (os.Executable).
	Exe string
	// Progress receives a line per step; nil means none.
	Progress io.Writer
	// WorkerStderr receives the workers' standard error; nil means
	// os.Stderr.
	WorkerStderr io.Writer
	// Quick is recorded in the results' setup.
	Quick bool
}

func (o Options) withDefaults() (Options, error) {
	if o.Impls == nil {
		o.Impls = ImplNames()
	}
	for _, n := range o.Impls {
		if _, err := LookupImpl(n); err != nil {
			return o, err
		}
	}
	o = o.filled()
	errs := o.invalid()
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			errs = append(errs, fmt.Errorf("bench: find this program to start workers: %w", err))
		}
		o.Exe = exe
	}
	return o, errors.Join(errs...)
}

// filled returns o with the defaults in place of its zero durations,
// counts and writers.
func (o Options) filled() Options {
	if o.Duration == 0 {
		o.Duration = DefaultDuration
	}
	if o.Warmup == 0 {
		o.Warmup = min(o.Duration/5, maxWarmup)
	}
	o.Warmup = max(o.Warmup, 0)
	if o.Rounds == 0 {
		o.Rounds = DefaultRounds
	}
	if o.Procs == 0 {
		o.Procs = DefaultProcs
	}
	if o.Goroutines == 0 {
		o.Goroutines = DefaultGoroutines
	}
	if o.CS == 0 {
		o.CS = DefaultCS
	}
	if o.Think == 0 {
		o.Think = DefaultThink
	}
	if o.Clients == "" {
		o.Clients = ClientsBoth
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.WorkerStderr == nil {
		o.WorkerStderr = os.Stderr
	}
	return o
}

// invalid returns what is wrong with the (filled) durations and counts
// of o.
func (o Options) invalid() []error {
	var errs []error
	if o.Duration <= 0 || o.Warmup >= o.Duration {
		errs = append(errs, fmt.Errorf("bench: duration %v must be positive and longer than the warm-up %v", o.Duration, o.Warmup))
	}
	if o.Rounds < 1 {
		errs = append(errs, fmt.Errorf("bench: %d rounds: want at least 1", o.Rounds))
	}
	if o.Procs < 1 || o.Procs > 64 || o.Goroutines < 1 || o.Goroutines > 256 {
		errs = append(errs, fmt.Errorf("bench: %d processes x %d goroutines: want 1..64 x 1..256", o.Procs, o.Goroutines))
	}
	if o.CS < 0 || o.Think < 0 {
		errs = append(errs, fmt.Errorf("bench: critical section %v and think time %v must not be negative", o.CS, o.Think))
	}
	if o.contendedScenarios() == nil {
		errs = append(errs, fmt.Errorf("bench: clients %q: want %s, %s or %s", o.Clients, ClientsBoth, ClientsGoroutine, ClientsProcess))
	}
	return errs
}

// contendedScenarios returns the contended scenarios that o.Clients (filled)
// asks for, in the order a round runs them; nil for an unknown value.
func (o Options) contendedScenarios() []string {
	switch o.Clients {
	case ClientsBoth:
		return []string{Contended, ContendedShared}
	case ClientsGoroutine:
		return []string{Contended}
	case ClientsProcess:
		return []string{ContendedShared}
	}
	return nil
}

// Run starts a private redis-server and, in each round, runs the
// uncontended phase (every implementation and the round-trip reference,
// interleaved in slices), again unpinned if it pins, and then the
// contended runs of every implementation (Options.Clients). It returns the pooled results
// with the targets judged. On a failed run it returns what it has so far
// and the error.
func Run(ctx context.Context, o Options) (*Results, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	srv, err := testenv.StartRedis(testenv.RedisOptions{})
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer admin.Close()

	res := &Results{Setup: newSetup(o)}
	if res.Machine, err = detectMachine(ctx, admin); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Progress, "lockbench: redis-server %s on %s\n", res.Machine.RedisVersion, srv.Addr())
	var place *placement
	if o.Pin {
		if place, err = pin(srv.PID(), &res.Setup); err != nil {
			return nil, err
		}
		if place != nil {
			defer func() { _ = place.spread() }()
		}
		fmt.Fprintf(o.Progress, "lockbench: %s\n", res.Setup.Pinning)
	}

	pooled := roundPool{}
	for round := range o.Rounds {
		if err := runRound(ctx, o, admin, srv.Addr(), round, place, pooled); err != nil {
			pooled.finish(res, o)
			return res, err
		}
	}
	pooled.finish(res, o)
	return res, nil
}

// runID names one run: an implementation in a scenario.
type runID struct{ impl, scenario string }

// roundPool holds the summaries of every round so far, pooled by run.
type roundPool map[runID]*summary

// add pools s, measured for impl in scenario, with the earlier rounds'.
func (p roundPool) add(impl, scenario string, s summary) {
	id := runID{impl, scenario}
	if p[id] == nil {
		p[id] = &summary{}
	}
	p[id].merge(s)
}

// scenarios are the scenarios of a run on redis-server, in the order of
// the results.
var scenarios = []string{Uncontended, UncontendedUnpinned, Contended, ContendedShared}

// finish puts the pooled figures into res: the round-trip limits, the
// derived figures, one run per implementation and scenario, the targets.
func (p roundPool) finish(res *Results, o Options) {
	if ref := p[runID{referenceName, Uncontended}]; ref != nil {
		ref.finish()
		res.RTTLimit = ref.opsPerS
	}
	if ref := p[runID{referenceName, UncontendedUnpinned}]; ref != nil {
		ref.finish()
		res.RTTLimitUnpinned = ref.opsPerS
	}
	res.derive(o)
	res.Runs = nil
	for _, name := range o.Impls {
		for _, sc := range scenarios {
			if s := p[runID{name, sc}]; s != nil {
				s.finish()
				res.Runs = append(res.Runs, newRunResult(name, sc, *s))
			}
		}
	}
	res.Targets = judge(res)
}

// runRound runs round (from 0) on the server at addr: the uncontended
// phase, again with place's pinning undone (nil: Run does not pin), then
// each implementation contended (in each of o's contended scenarios, one
// right after the other), starting one further along each round. It adds
// the summaries to pooled.
func runRound(ctx context.Context, o Options, admin *redis.Client, addr string, round int, place *placement, pooled roundPool) error {
	tag := "lockbench:"
	if o.Rounds > 1 {
		tag = fmt.Sprintf("lockbench: round %d/%d:", round+1, o.Rounds)
	}
	phase := func(scenario string) error {
		fmt.Fprintf(o.Progress, "%s %s: the round-trip reference and %d implementations, %v each in %v slices\n",
			tag, scenario, len(o.Impls), o.Duration, sliceLen)
		sums, err := runUncontended(ctx, o, admin, addr, round)
		if err != nil {
			return fmt.Errorf("bench: %s: %w", scenario, err)
		}
		for name, s := range sums {
			pooled.add(name, scenario, s)
		}
		return nil
	}
	if err := phase(Uncontended); err != nil {
		return err
	}
	if place != nil {
		if err := place.unpinned(func() error { return phase(UncontendedUnpinned) }); err != nil {
			return err
		}
	}
	for i := range o.Impls {
		name := o.Impls[(i+round)%len(o.Impls)]
		im, _ := LookupImpl(name)
		for _, sc := range o.contendedScenarios() {
			fmt.Fprintf(o.Progress, "%s %s %s for %v\n", tag, name, sc, o.Duration)
			s, err := runContended(ctx, im, admin, addr, o, sc)
			if err != nil {
				return fmt.Errorf("bench: %s %s: %w", name, sc, err)
			}
			pooled.add(name, sc, s)
		}
	}
	return nil
}

// placement is where Run puts redis-server and the benchmark's
// processes: the server on one CPU, this process (and the workers it
// starts, which inherit its CPUs) on the others.
type placement struct {
	serverPID int
	server    int
	clients   []int
}

// pin puts the server's process on one CPU and this process on the
// others. It records the placement in setup and returns it, or nil when
// there is nothing to pin (fewer than two CPUs, or not Linux).
func pin(serverPID int, setup *Setup) (*placement, error) {
	server, clients, ok := splitCPUs()
	if !ok {
		setup.Pinning = "none: fewer than two CPUs, or not Linux"
		return nil, nil
	}
	p := &placement{serverPID: serverPID, server: server, clients: clients}
	if err := p.pin(); err != nil {
		return nil, err
	}
	setup.Pinning = fmt.Sprintf("redis-server on CPU %d, the benchmark's processes on CPUs %s", server, cpuList(clients))
	return p, nil
}

// pin puts the server on its CPU and this process on the others.
func (p *placement) pin() error {
	if err := pinProcess(p.serverPID, []int{p.server}); err != nil {
		return err
	}
	return pinProcess(os.Getpid(), p.clients)
}

// spread lets the server and this process run on every CPU of the
// placement: the scheduler places them.
func (p *placement) spread() error {
	all := append(slices.Clone(p.clients), p.server)
	return errors.Join(pinProcess(p.serverPID, all), pinProcess(os.Getpid(), all))
}

// unpinned runs f with the placement undone and pins again after it.
func (p *placement) unpinned(f func() error) error {
	if err := p.spread(); err != nil {
		return err
	}
	err := f()
	return errors.Join(err, p.pin())
}

func cpuList(cpus []int) string {
	s := make([]string, len(cpus))
	for i, c := range cpus {
		s[i] = strconv.Itoa(c)
	}
	return strings.Join(s, ",")
}

// runKey returns a fresh lock key for one run.
func runKey(impl, scenario string) string {
	return fmt.Sprintf("lockbench:%s:%s:%d", impl, scenario, time.Now().UnixNano())
}

// sliceLen is the length of one turn in the uncontended phase.
const sliceLen = 250 * time.Millisecond

// referenceName names the round-trip reference among the uncontended
// summaries: SET NX PX + DEL cycles from one client, the two round trips a
// lock+unlock cycle cannot do without.
const referenceName = "round-trip-limit"

// runUncontended opens one client per implementation, plus the reference,
// and lets each run lock+unlock cycles back to back in turns of sliceLen,
// until each has had o.Duration. Taking turns exposes all to the same
// moments of the machine, so the comparison with each other and with the
// reference holds even when the machine's speed drifts. One uncounted
// slice per implementation warms up first. It returns the summaries by
// implementation name.
func runUncontended(ctx context.Context, o Options, admin *redis.Client, addr string, round int) (map[string]summary, error) {
	type entry struct {
		name string
		l    Locker
		rdb  *redis.Client
	}
	ref := redis.NewClient(&redis.Options{Addr: addr})
	defer ref.Close()
	entries := []entry{{referenceName, refLocker{rdb: ref, key: runKey("reference", Uncontended)}, ref}}
	for _, name := range o.Impls {
		im, _ := LookupImpl(name)
		t, err := newTeam(im, addr, 1, false, runKey(im.Name, Uncontended), 1)
		if err != nil {
			return nil, err
		}
		defer t.close()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = t.warmUp(wctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		entries = append(entries, entry{name, t.lockers[0], t.rdb(0)})
	}

	sums := map[string]summary{}
	turn := func(e entry, d time.Duration, count bool) error {
		before, err := readLoad(ctx, admin)
		if err != nil {
			return err
		}
		start := time.Now()
		end := start.Add(d)
		lr := runLoop(ctx, e.l, e.rdb, loopConfig{End: end, Uncancelled: true})
		if lr.Err != "" {
			return fmt.Errorf("%s: %s", e.name, lr.Err)
		}
		after, err := readLoad(ctx, admin)
		if err != nil {
			return err
		}
		if count {
			one := summarize(lr.Records, lr.Unfinished, 0, window{from: start.UnixNano(), to: end.UnixNano()}, true)
			// The INFO that ends the turn is counted; leave it out.
			one.load, one.loadOps = after.sub(before), len(lr.Records)
			one.load.calls--
			s := sums[e.name]
			s.merge(one)
			sums[e.name] = s
		}
		return ctx.Err()
	}
	if o.Warmup > 0 {
		for _, e := range entries {
			if err := turn(e, min(o.Warmup, sliceLen), false); err != nil {
				return nil, err
			}
		}
	}
	for done := time.Duration(0); done < o.Duration; done += sliceLen {
		d := min(sliceLen, o.Duration-done)
		for i := range entries {
			// Start each lap with another entry, so none is always first.
			if err := turn(entries[(i+round+int(done/sliceLen))%len(entries)], d, true); err != nil {
				return nil, err
			}
		}
	}
	return sums, nil
}

// refLocker is the round-trip reference: SET NX PX to lock, DEL to unlock,
// no retry (it is used uncontended only).
type refLocker struct {
	rdb *redis.Client
	key string
}

func (l refLocker) Lock(ctx context.Context) (func(context.Context) error, error) {
	ok, err := l.rdb.SetNX(ctx, l.key, "x", HoldTTL).Result()
	if err != nil {
		return nil, fmt.Errorf("reference SET: %w", err)
	}
	if !ok {
		return nil, fmt.Errorf("reference key %s is taken", l.key)
	}
	return func(ctx context.Context) error { return l.rdb.Del(ctx, l.key).Err() }, nil
}

// runContended starts o.Procs worker processes for scenario (Contended,
// or ContendedShared: the goroutines of a process share its clients),
// starts them together and merges their reports.
func runContended(ctx context.Context, im Impl, admin *redis.Client, addr string, o Options, scenario string) (summary, error) {
	key := runKey(im.Name, scenario)
	spec := workerSpec{
		Impl: im.Name, Addr: addr, Goroutines: o.Goroutines, Shared: scenario == ContendedShared,
		Key: key, Marker: key + ":marker", Seq: key + ":seq",
		CS: o.CS, Think: o.Think, Duration: o.Duration,
	}
	ctx, cancel := context.WithTimeout(ctx, o.Duration+2*time.Minute)
	defer cancel()

	workers := make([]*worker, o.Procs)
	defer func() {
		for _, w := range workers {
			if w != nil {
				w.kill()
			}
		}
	}()
	for i := range workers {
		spec.Proc = i
		w, err := startWorker(ctx, o, spec)
		if err != nil {
			return summary{}, err
		}
		workers[i] = w
	}
	for i, w := range workers {
		if err := w.ready(); err != nil {
			return summary{}, fmt.Errorf("worker %d: %w", i, err)
		}
	}
	before, err := readLoad(ctx, admin)
	if err != nil {
		return summary{}, err
	}
	start := time.Now().Add(20 * time.Millisecond)
	for i, w := range workers {
		if err := w.start(start); err != nil {
			return summary{}, fmt.Errorf("worker %d: %w", i, err)
		}
	}

	recs, unfinished, overlaps, err := collectReports(workers)
	if err != nil {
		return summary{}, err
	}
	after, err := readLoad(ctx, admin)
	if err != nil {
		return summary{}, err
	}
	w := window{from: start.Add(o.Warmup).UnixNano(), to: start.Add(o.Duration).UnixNano()}
	s := summarize(recs, unfinished, overlaps, w, false)
	s.load, s.loadOps = after.sub(before), len(recs)
	s.load.calls--
	return s, nil
}

// collectReports waits for each worker's report and returns the records,
// the unfinished acquisitions and the overlaps of all their goroutines,
// or what went wrong in any of them.
func collectReports(workers []*worker) (recs []Record, unfinished []int64, overlaps int, err error) {
	var errs []error
	for i, w := range workers {
		rep, err := w.report()
		if err != nil {
			errs = append(errs, fmt.Errorf("worker %d: %w", i, err))
			continue
		}
		for g, lr := range rep.Goroutines {
			recs = append(recs, lr.Records...)
			unfinished = append(unfinished, lr.Unfinished...)
			overlaps += lr.Overlaps
			if lr.Err != "" {
				errs = append(errs, fmt.Errorf("worker %d goroutine %d: %s", i, g, lr.Err))
			}
		}
	}
	return recs, unfinished, overlaps, errors.Join(errs...)
}
