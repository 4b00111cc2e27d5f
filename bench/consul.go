package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/testenv"
)

// ConsulOptions configures RunConsul.
type ConsulOptions struct {
	// Duration is how long each lock measurement runs.
	Duration time.Duration
	// Procs and Goroutines shape the contended run: Procs stores, each
	// with Goroutines workers.
	Procs, Goroutines int
	// CS is the contended run's critical section.
	CS time.Duration
	// Rounds is how many times each lock measurement runs, one
	// implementation later each round; the rounds are pooled.
	Rounds int
	// Impls names the implementations to run (baton, consul-lock,
	// consul-kv); empty for all.
	Impls []string
	// Terms is how many handovers and failovers of the role are timed;
	// 0 for none.
	Terms int
	// Progress receives a line per measurement; nil for none.
	Progress io.Writer
	// Requests, if set, receives after each measurement the requests
	// per op by method, path and status.
	Requests io.Writer
}

// ConsulResults is what RunConsul measured, on a private Consul dev agent
// (one server, in memory: Raft commits without a disk).
type ConsulResults struct {
	Version string `json:"consul_version"`
	// Uncontended lock+unlock cycles per second of one goroutine.
	Uncontended []ConsulRun `json:"uncontended"`
	// Contended operations per second of Procs x Goroutines workers
	// around one key, with a CS critical section.
	Contended []ConsulRun `json:"contended"`
	// HandoverP50MS and HandoverMaxMS: from a master's Stop until
	// another elector's OnElected.
	HandoverP50MS float64 `json:"handover_p50_ms"`
	HandoverMaxMS float64 `json:"handover_max_ms"`
	// FailoverP50MS and FailoverMaxMS: from a master's crash (its store
	// stops answering) until another elector's OnElected, with a role TTL
	// of FailoverTTLMS.
	FailoverP50MS float64 `json:"failover_p50_ms"`
	FailoverMaxMS float64 `json:"failover_max_ms"`
	FailoverTTLMS float64 `json:"failover_ttl_ms"`
	Terms         int     `json:"terms"`
}

// ConsulRun is one implementation's figure.
type ConsulRun struct {
	Impl     string  `json:"impl"`
	Setup    string  `json:"setup"`
	OpsPerS  float64 `json:"ops_per_s"`
	Ops      int     `json:"ops"`
	Overlaps int     `json:"overlaps"`
	// RequestsPerOp, WritesPerOp and WakeupsPerOp count, per
	// acquisition, the HTTP requests the clients sent to the agent, those
	// Consul committed through Raft, and the blocking queries that
	// returned (see consulCounts).
	RequestsPerOp float64 `json:"requests_per_op,omitempty"`
	WritesPerOp   float64 `json:"raft_writes_per_op,omitempty"`
	WakeupsPerOp  float64 `json:"wakeups_per_op,omitempty"`
	// FailedPerOp counts the Raft writes that Consul refused (a
	// transaction that failed a check, which a client then tries again
	// after reading), ReadsPerOp the reads that did not block.
	FailedPerOp float64 `json:"failed_writes_per_op,omitempty"`
	ReadsPerOp  float64 `json:"reads_per_op,omitempty"`

	seconds float64 // the time measured, to pool rounds
}

// pool adds the run r of another round to p.
func (p *ConsulRun) pool(r ConsulRun) {
	ops := p.Ops + r.Ops
	if ops > 0 {
		w := func(a, b float64) float64 { return (a*float64(p.Ops) + b*float64(r.Ops)) / float64(ops) }
		p.RequestsPerOp, p.WritesPerOp, p.WakeupsPerOp = w(p.RequestsPerOp, r.RequestsPerOp), w(p.WritesPerOp, r.WritesPerOp), w(p.WakeupsPerOp, r.WakeupsPerOp)
		p.FailedPerOp, p.ReadsPerOp = w(p.FailedPerOp, r.FailedPerOp), w(p.ReadsPerOp, r.ReadsPerOp)
	}
	p.Ops, p.Overlaps, p.seconds = ops, p.Overlaps+r.Overlaps, p.seconds+r.seconds
	p.OpsPerS = float64(p.Ops) / p.seconds
}

// consulLocker is a lock implementation on Consul: Lock returns the
// unlock function.
type consulLocker func(ctx context.Context) (func() error, error)

type consulImpl struct {
	name, setup string
	// open returns a locker on key for one goroutine, on its own client
	// of the agent cfg names, and a function that closes what it opened.
	open func(cfg *api.Config, key string, n int) (consulLocker, func(), error)
}

func consulImpls() []consulImpl {
	return []consulImpl{
		{"baton", "synclock.Locker on consulbackend (a session per lease, KV transactions)", openBatonConsul},
		{"consul-lock", "consul/api's lock recipe (api.Lock: a session per Lock, then KV acquire; Unlock releases and destroys)", openConsulLock},
		{"consul-kv", "reference: one session made up front, then KV acquire + KV release per cycle, no fencing, no owner check beyond the session", openConsulKV},
	}
}

func openBatonConsul(cfg *api.Config, key string, n int) (consulLocker, func(), error) {
	store, err := consulbackend.New(cfg, consulbackend.WithSessionTTLMin(time.Second), consulbackend.WithoutRestartGuard())
	if err != nil {
		return nil, nil, err
	}
	id, err := instanceid.New("127.0.0.1", "bench", "bench", n)
	if err != nil {
		return nil, nil, err
	}
	lk, err := synclock.NewLocker(store, id, synclock.Config{})
	if err != nil {
		return nil, nil, err
	}
	m := lk.Mutex(key)
	return func(ctx context.Context) (func() error, error) {
		if err := m.Lock(ctx); err != nil {
			return nil, err
		}
		return func() error { return m.Unlock(context.WithoutCancel(ctx)) }, nil
	}, func() { store.Close() }, nil
}

func openConsulLock(cfg *api.Config, key string, _ int) (consulLocker, func(), error) {
	cli, err := api.NewClient(cfg)
	if err != nil {
		return nil, nil, err
	}
	return func(ctx context.Context) (func() error, error) {
		l, err := cli.LockOpts(&api.LockOptions{Key: "bench-lock/" + key, SessionTTL: HoldTTL.String()})
		if err != nil {
			return nil, err
		}
		lost, err := l.Lock(ctx.Done())
		if err != nil {
			return nil, err
		}
		if lost == nil {
			return nil, ctx.Err()
		}
		return l.Unlock, nil
	}, func() {}, nil
}

func openConsulKV(cfg *api.Config, key string, _ int) (consulLocker, func(), error) {
	cli, err := api.NewClient(cfg)
	if err != nil {
		return nil, nil, err
	}
	sess, _, err := cli.Session().Create(&api.SessionEntry{TTL: HoldTTL.String(), Behavior: api.SessionBehaviorDelete, LockDelay: time.Millisecond}, nil)
	if err != nil {
		return nil, nil, err
	}
	kv := cli.KV()
	pair := &api.KVPair{Key: "bench-kv/" + key, Session: sess}
	return func(ctx context.Context) (func() error, error) {
			for {
				ok, _, err := kv.Acquire(pair, (&api.WriteOptions{}).WithContext(ctx))
				if err != nil {
					return nil, err
				}
				if ok {
					return func() error { _, _, err := kv.Release(pair, nil); return err }, nil
				}
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(time.Millisecond):
				}
			}
		}, func() {
			_, _ = cli.Session().Destroy(sess, nil)
		}, nil
}

// RunConsul measures baton on a private Consul dev agent beside Consul's
// lock recipe and a bare KV acquire/release cycle, then times the role's
// graceful handover and crash failover on Consul.
func RunConsul(ctx context.Context, o ConsulOptions) (*ConsulResults, error) {
	progress := o.Progress
	if progress == nil {
		progress = io.Discard
	}
	impls, err := selectConsulImpls(o.Impls)
	if err != nil {
		return nil, err
	}
	agent, err := testenv.StartConsul(testenv.ConsulOptions{SessionTTLMin: time.Second})
	if err != nil {
		return nil, err
	}
	defer agent.Close()
	res := &ConsulResults{Version: "1.22.2", Terms: o.Terms}
	addr := agent.Addr()

	for _, contended := range []bool{false, true} {
		runs, err := consulScenario(ctx, o, impls, addr, contended, progress)
		if err != nil {
			return res, err
		}
		if contended {
			res.Contended = append(res.Contended, runs...)
		} else {
			res.Uncontended = append(res.Uncontended, runs...)
		}
	}
	if o.Terms > 0 {
		if err := consulTerms(ctx, addr, o.Terms, res); err != nil {
			return res, err
		}
		fmt.Fprintf(progress, "consul role: handover p50 %.1f ms, failover p50 %.0f ms (TTL %.0f ms)\n",
			res.HandoverP50MS, res.FailoverP50MS, res.FailoverTTLMS)
	}
	return res, nil
}

// selectConsulImpls returns the Consul implementations that names name,
// all of them when names is empty.
func selectConsulImpls(names []string) ([]consulImpl, error) {
	impls := consulImpls()
	if len(names) > 0 {
		impls = slices.DeleteFunc(impls, func(im consulImpl) bool { return !slices.Contains(names, im.name) })
		if len(impls) == 0 {
			return nil, fmt.Errorf("consul: none of the implementations %v is one of baton, consul-lock, consul-kv", names)
		}
	}
	return impls, nil
}

// consulScenario runs every one of impls (but the bare KV when
// contended) in each of o.Rounds rounds, starting one further along each
// round, and returns their runs, the rounds pooled, in the order of impls.
func consulScenario(ctx context.Context, o ConsulOptions, impls []consulImpl, addr string, contended bool, progress io.Writer) ([]ConsulRun, error) {
	scenario, procs, goroutines, cs := Uncontended, 1, 1, time.Duration(0)
	if contended {
		scenario, procs, goroutines, cs = Contended, o.Procs, o.Goroutines, o.CS
	}
	pooled := map[string]*ConsulRun{}
	for round := range max(o.Rounds, 1) {
		for i := range impls {
			im := impls[(i+round)%len(impls)]
			if contended && im.name == "consul-kv" {
				continue
			}
			key := fmt.Sprintf("%s-%s-%d", scenario, im.name, round)
			r, err := consulCycles(ctx, im, addr, key, procs, goroutines, cs, o.Duration, o.Requests)
			if err != nil {
				return nil, fmt.Errorf("consul %s %s: %w", scenario, im.name, err)
			}
			fmt.Fprintf(progress, "consul %-11s %-12s %8.0f ops/s, %d overlaps; per op %.1f requests, %.1f Raft writes (%.1f refused), %.1f wake-ups, %.1f reads\n",
				scenario, im.name, r.OpsPerS, r.Overlaps, r.RequestsPerOp, r.WritesPerOp, r.FailedPerOp, r.WakeupsPerOp, r.ReadsPerOp)
			if p := pooled[im.name]; p != nil {
				p.pool(r)
			} else {
				pooled[im.name] = &r
			}
		}
	}
	var runs []ConsulRun
	for _, im := range impls {
		if r := pooled[im.name]; r != nil {
			runs = append(runs, *r)
		}
	}
	return runs, nil
}

// consulCycles runs procs x goroutines workers of im around one key for
// d, each holding the lock for cs, and counts the cycles and any overlap.
// With kinds, it prints there the requests per op by kind.
func consulCycles(ctx context.Context, im consulImpl, addr, key string, procs, goroutines int, cs, d time.Duration, kinds io.Writer) (ConsulRun, error) {
	var ops, inside, overlaps atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	rctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	var counts consulCounts
	start := time.Now()
	for p := range procs {
		for g := range goroutines {
			lock, closeFn, err := im.open(counts.config(addr), key, 1+p*goroutines+g)
			if err != nil {
				return ConsulRun{}, err
			}
			closers = append(closers, closeFn)
			wg.Go(func() {
				for rctx.Err() == nil {
					unlock, err := lock(rctx)
					if err != nil {
						if rctx.Err() == nil {
							mu.Lock()
							firstErr = cmpErr(firstErr, err)
							mu.Unlock()
						}
						return
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					if cs > 0 {
						// time.Sleep would stretch a 1 ms section by
						// a third to two thirds, more when the process
						// has nothing else to do (see sleepUntil).
						sleepUntil(time.Now().Add(cs))
					}
					inside.Add(-1)
					if err := unlock(); err != nil {
						mu.Lock()
						firstErr = cmpErr(firstErr, err)
						mu.Unlock()
						return
					}
					ops.Add(1)
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := ConsulRun{Impl: im.name, Setup: im.setup, Ops: int(ops.Load()), Overlaps: int(overlaps.Load()),
		OpsPerS: float64(ops.Load()) / elapsed.Seconds(), seconds: elapsed.Seconds()}
	counts.perOp(&r)
	if kinds != nil {
		counts.writeKinds(kinds, r.Ops)
	}
	return r, firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// consulTerms times role handovers and crash failovers on Consul.
func consulTerms(ctx context.Context, addr string, terms int, res *ConsulResults) error {
	const ttl = 2 * time.Second
	cfg := role.Config{HeartbeatInterval: ttl / 4, HeartbeatExpiration: ttl}
	res.FailoverTTLMS = float64(ttl.Milliseconds())
	var handovers, failovers []time.Duration
	for term := range terms {
		for _, crash := range []bool{false, true} {
			d, err := consulTerm(ctx, addr, cfg, fmt.Sprintf("term%d-%v", term, crash), crash)
			if err != nil {
				return fmt.Errorf("consul role term %d (crash %v): %w", term, crash, err)
			}
			if crash {
				failovers = append(failovers, d)
			} else {
				handovers = append(handovers, d)
			}
		}
	}
	slices.Sort(handovers)
	slices.Sort(failovers)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	res.HandoverP50MS, res.HandoverMaxMS = ms(percentile(handovers, 0.5)), ms(handovers[len(handovers)-1])
	res.FailoverP50MS, res.FailoverMaxMS = ms(percentile(failovers, 0.5)), ms(failovers[len(failovers)-1])
	return nil
}

// cuttable is a store that fails every call once cut: a crashed process.
type cuttable struct {
	backend.Store
	cut atomic.Bool
}

var errCut = errors.New("bench: crashed")

func (c *cuttable) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	if c.cut.Load() {
		return backend.Lease{}, errCut
	}
	return c.Store.Acquire(ctx, key, owner, ttl, floor)
}

func (c *cuttable) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	if c.cut.Load() {
		return backend.Lease{}, errCut
	}
	return c.Store.Renew(ctx, key, owner, ttl)
}

func (c *cuttable) Release(ctx context.Context, key, owner string, keepFor time.Duration) error {
	if c.cut.Load() {
		return errCut
	}
	return c.Store.Release(ctx, key, owner, keepFor)
}

// consulTerm elects a master among two electors of a fresh app, then
// stops it (or crashes it) and returns how long until the other was
// elected.
func consulTerm(ctx context.Context, addr string, cfg role.Config, app string, crash bool) (time.Duration, error) {
	elected := make(chan *role.Elector, 4)
	var els []*role.Elector
	var stops []func() // end each elector's Run and wait for it
	var cuts []*cuttable
	var stores []*consulbackend.Store
	defer func() {
		// The electors first: a stopping master releases the role
		// through its store.
		for _, stop := range stops {
			stop()
		}
		for _, s := range stores {
			_ = s.Close()
		}
	}()
	quiet := role.WithLogger(slog.New(slog.DiscardHandler))
	for i := range 2 {
		store, err := consulbackend.New(&api.Config{Address: addr}, consulbackend.WithSessionTTLMin(time.Second), consulbackend.WithoutRestartGuard())
		if err != nil {
			return 0, err
		}
		stores = append(stores, store)
		id, err := instanceid.New("127.0.0.1", "bench", app, 9000+i)
		if err != nil {
			return 0, err
		}
		c := &cuttable{Store: store}
		var el *role.Elector
		el, err = role.NewElector(c, id, cfg, quiet, role.OnElected(func(context.Context) { elected <- el }))
		if err != nil {
			return 0, err
		}
		rctx, end := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() { _ = el.Run(rctx); close(done) }()
		stops = append(stops, func() {
			end()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
			}
		})
		els, cuts = append(els, el), append(cuts, c)
	}
	wait := func() (*role.Elector, error) {
		select {
		case el := <-elected:
			return el, nil
		case <-time.After(3*cfg.HeartbeatExpiration + 10*time.Second):
			return nil, errors.New("no master elected")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	m, err := wait()
	if err != nil {
		return 0, err
	}
	at := time.Now()
	if crash {
		cuts[slices.Index(els, m)].cut.Store(true)
	} else {
		stops[slices.Index(els, m)]() // ends its Run: it releases the role at once
	}
	if _, err := wait(); err != nil {
		return 0, err
	}
	return time.Since(at), nil
}
