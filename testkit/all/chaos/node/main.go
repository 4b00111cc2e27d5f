// Command node is one instance of the service the chaos suite runs: it
// uses baton as an application would and records everything it does in
// a history file (testkit/all/chaos's format) for the checker.
//
// It runs an Elector; a master-only gocron job that writes the ledger's
// "role" resource with its epoch; a ShedLock-style locked job, fired on
// every whole second, that writes the "job" resource with its lock token
// and its fire time (gocron's scheduled time, however late the run);
// and synclock workers that increment the "counter" resource
// read-modify-write under one lock, each write carrying the lock's token.
// Every write goes through the ledger's check-and-set script, which
// rejects a token older than the last one it accepted. IsMaster is sampled
// every millisecond.
//
// The coordination store is reached through the addresses the test gives
// (-redis, or -sentinels with -master-name, or -consul for a Consul agent);
// -dial-map sends the dials of
// some addresses elsewhere (through the test's partition proxies). The
// ledger is reached directly. SIGTERM stops the node gracefully; the test
// also kills it with SIGKILL and pauses it with SIGSTOP.
//
// -unfenced turns the ledger's token check off: a deliberately broken
// build the chaos tests use to show that the checker catches what fencing
// prevents. Nothing else should ever set it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/config"
	"github.com/baton-go/baton/config/consulconfig"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/all/chaos"
)

// options are the node's flags.
type options struct {
	name       string
	port       int
	redis      string
	cluster    bool
	sentinels  string
	masterName string
	consul     string
	consulMin  time.Duration
	dialMap    string
	ledger     string
	history    string
	prefix     string

	roleTTL      time.Duration
	roleInterval time.Duration
	hold         time.Duration
	retry        time.Duration
	workers      int
	think        time.Duration
	masterEvery  time.Duration
	jobAtMost    time.Duration
	jobAtLeast   time.Duration
	unfenced     bool
}

func main() {
	var o options
	flag.StringVar(&o.name, "name", "", "node incarnation name, such as n2.1 (required)")
	flag.IntVar(&o.port, "port", 0, "service port: the instance ID is 127.0.0.1:chaos:chaos:<port> (required)")
	flag.StringVar(&o.redis, "redis", "", "address of the coordination Redis (standalone), or comma-separated seed nodes with -cluster")
	flag.BoolVar(&o.cluster, "cluster", false, "the -redis addresses are a Redis Cluster")
	flag.StringVar(&o.sentinels, "sentinels", "", "comma-separated Sentinel addresses (with -master-name)")
	flag.StringVar(&o.masterName, "master-name", "", "Sentinel master set name")
	flag.StringVar(&o.consul, "consul", "", "address of the coordination Consul agent (instead of Redis)")
	flag.DurationVar(&o.consulMin, "consul-ttl-min", 10*time.Second, "with -consul: the agent's session_ttl_min")
	flag.StringVar(&o.dialMap, "dial-map", "", "comma-separated from=to address pairs: dials of from go to to")
	flag.StringVar(&o.ledger, "ledger", "", "address of the ledger Redis (required)")
	flag.StringVar(&o.history, "history", "", "history file to append to (required)")
	flag.StringVar(&o.prefix, "prefix", "baton-chaos", "key prefix on the coordination Redis")
	flag.DurationVar(&o.roleTTL, "role-ttl", 2*time.Second, "role key TTL")
	flag.DurationVar(&o.roleInterval, "role-interval", 500*time.Millisecond, "heartbeat interval")
	flag.DurationVar(&o.hold, "hold", 2*time.Second, "synclock hold duration")
	flag.DurationVar(&o.retry, "retry", 200*time.Millisecond, "synclock retry interval")
	flag.IntVar(&o.workers, "workers", 2, "counter workers")
	flag.DurationVar(&o.think, "think", 10*time.Millisecond, "time between reading and writing the counter")
	flag.DurationVar(&o.masterEvery, "master-every", 100*time.Millisecond, "period of the master-only job")
	flag.DurationVar(&o.jobAtMost, "job-at-most", 1500*time.Millisecond, "lockAtMostFor of the locked job")
	flag.DurationVar(&o.jobAtLeast, "job-at-least", 500*time.Millisecond, "lockAtLeastFor of the locked job")
	flag.BoolVar(&o.unfenced, "unfenced", false, "TEST ONLY: the ledger accepts stale tokens (a broken build)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "chaos node:", err)
		os.Exit(1)
	}
}

func (o options) validate() error {
	switch {
	case o.name == "":
		return fmt.Errorf("-name is required")
	case o.port <= 0 || o.port > 65535:
		return fmt.Errorf("-port %d: want 1..65535", o.port)
	case o.ledger == "":
		return fmt.Errorf("-ledger is required")
	case o.history == "":
		return fmt.Errorf("-history is required")
	case btoi(o.redis != "")+btoi(o.sentinels != "")+btoi(o.consul != "") != 1:
		return fmt.Errorf("give exactly one of -redis, -sentinels and -consul")
	case o.sentinels != "" && o.masterName == "":
		return fmt.Errorf("-sentinels needs -master-name")
	case o.workers < 0:
		return fmt.Errorf("-workers %d: want >= 0", o.workers)
	}
	return nil
}

// node is one running instance.
type node struct {
	o      options
	hist   *chaos.Writer
	ledger *chaos.Ledger
	ops    atomic.Uint64 // write sequence
	holds  atomic.Uint64 // holding sequence
}

func run(o options) error {
	if err := o.validate(); err != nil {
		return err
	}
	hist, err := chaos.Create(o.history)
	if err != nil {
		return err
	}
	defer hist.Close()
	n := &node{o: o, hist: hist}
	n.log(chaos.Event{Kind: chaos.KindStart, Pid: os.Getpid(), Detail: strings.Join(os.Args[1:], " ")})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	lc := redis.NewClient(&redis.Options{
		Addr: o.ledger, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		ContextTimeoutEnabled: true,
	})
	defer lc.Close()
	n.ledger = chaos.NewLedger(lc)
	n.ledger.Unfenced = o.unfenced

	cfg, err := o.config()
	if err != nil {
		return err
	}
	id, err := instanceid.Detect(cfg.Instance)
	if err != nil {
		return err
	}
	store, closeStore, err := o.openStore(cfg)
	if err != nil {
		return err
	}
	defer closeStore()

	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	el, err := role.NewElector(store, id, cfg.Role, role.WithLogger(quiet))
	if err != nil {
		return err
	}
	lk, err := synclock.NewLocker(store, id, cfg.SyncLock, synclock.WithLogger(quiet))
	if err != nil {
		return err
	}
	s, err := n.schedule(store, id, el)
	if err != nil {
		return err
	}

	var wg sync.WaitGroup
	wg.Go(func() { n.sample(ctx, el) })
	runErr := make(chan error, 1)
	go func() { runErr <- el.Run(ctx) }()
	s.Start()
	for i := range o.workers {
		wg.Go(func() { n.work(ctx, lk, i) })
	}

	<-ctx.Done()
	_ = s.Shutdown()
	wg.Wait()
	return ignoreCanceled(<-runErr)
}

// config is the baton configuration the flags describe, validated.
func (o options) config() (config.Config, error) {
	cfg := config.Default()
	cfg.Instance = instanceid.Options{IP: "127.0.0.1", Tenant: "chaos", App: "chaos", Port: o.port}
	cfg.Role.HeartbeatExpiration = o.roleTTL
	cfg.Role.HeartbeatInterval = o.roleInterval
	cfg.SyncLock.HoldDuration = o.hold
	cfg.SyncLock.RetryInterval = o.retry
	cfg.Redis.KeyPrefix = o.prefix
	if o.sentinels != "" {
		cfg.Redis.Addrs = strings.Split(o.sentinels, ",")
		cfg.Redis.MasterName = o.masterName
	} else if o.redis != "" {
		cfg.Redis.Addrs = strings.Split(o.redis, ",")
		cfg.Redis.Cluster = o.cluster
	}
	if err := cfg.Validate(); err != nil {
		return config.Config{}, err
	}
	return cfg, nil
}

// dialer returns the dial function that sends the addresses of -dial-map
// elsewhere, or nil without -dial-map.
func (o options) dialer() (func(ctx context.Context, network, addr string) (net.Conn, error), error) {
	if o.dialMap == "" {
		return nil, nil
	}
	m, err := parseDialMap(o.dialMap)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if to, ok := m[addr]; ok {
			addr = to
		}
		return d.DialContext(ctx, network, addr)
	}, nil
}

// openStore opens the coordination store the flags name, Consul or Redis,
// with a restart guard as long as the longest lease; the returned function
// closes it.
func (o options) openStore(cfg config.Config) (backend.Store, func(), error) {
	dial, err := o.dialer()
	if err != nil {
		return nil, nil, err
	}
	guard := max(o.roleTTL, o.hold, o.jobAtMost)
	if o.consul != "" {
		ac := consulconfig.APIConfig(cfg.Consul)
		ac.Address = o.consul
		if dial != nil {
			ac.Transport = &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 64}
		}
		cs, err := consulbackend.New(ac, consulbackend.WithPrefix(o.prefix), consulbackend.WithSessionTTLMin(o.consulMin),
			consulbackend.WithRestartGuard(guard))
		if err != nil {
			return nil, nil, err
		}
		return cs, func() { cs.Close() }, nil
	}
	ro := cfg.Redis.UniversalOptions()
	ro.DialTimeout = 500 * time.Millisecond
	ro.ReadTimeout = time.Second
	ro.WriteTimeout = time.Second
	if dial != nil {
		ro.Dialer = dial
	}
	rdb := redis.NewUniversalClient(ro)
	rs, err := redisbackend.New(rdb, append(cfg.RedisStoreOptions(), redisbackend.WithRestartGuard(guard))...)
	if err != nil {
		rdb.Close()
		return nil, nil, err
	}
	return rs, func() { rs.Close(); rdb.Close() }, nil
}

// schedule creates the scheduler with the node's two jobs: the
// master-only job and the locked job fired on every whole second.
func (n *node) schedule(store backend.Store, id instanceid.ID, el *role.Elector) (gocron.Scheduler, error) {
	s, err := gocron.NewScheduler()
	if err != nil {
		return nil, err
	}
	observe := schedlock.WithObserver(n.gateEvent)
	if _, err := s.NewJob(gocron.DurationJob(n.o.masterEvery),
		watched(n.masterJob), schedlock.MasterOnly(el, observe),
		gocron.WithSingletonMode(gocron.LimitModeReschedule), gocron.WithName("master-job")); err != nil {
		return nil, err
	}
	if _, err := s.NewJob(gocron.CronJob("* * * * * *", true),
		watched(n.lockedJob),
		schedlock.Locked(store, "chaos-job", n.o.jobAtMost, n.o.jobAtLeast, schedlock.WithInstance(id), schedlock.WithScheduler(s), observe),
		gocron.WithSingletonMode(gocron.LimitModeReschedule), gocron.WithName("locked-job")); err != nil {
		return nil, err
	}
	return s, nil
}

// watched is a task that runs fn with the run's loss-aware context
// (schedlock.Context, called in the task).
func watched(fn func(ctx context.Context) error) gocron.Task {
	return gocron.NewTask(func(ctx context.Context) error {
		ctx, cancel := schedlock.Context(ctx)
		defer cancel()
		return fn(ctx)
	})
}

func ignoreCanceled(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// log appends e to the history, stamped with this node and the time.
// A history that cannot be written is fatal: the run's evidence is gone.
func (n *node) log(e chaos.Event) {
	e.Node = n.o.name
	if e.Start == 0 {
		e.Start = time.Now().UnixNano()
	}
	if err := n.hist.Write(e); err != nil {
		fmt.Fprintln(os.Stderr, "chaos node:", err)
		os.Exit(2)
	}
}

// sample reads IsMaster every millisecond and records each interval in
// which it read true, rewriting the interval every 50 ms while it lasts.
// Each read is bracketed by two clock readings, before and after, and the
// interval runs from the "after" of its first true read to the "before"
// of its last: IsMaster was surely true throughout it, however late this
// goroutine ran, so an overlap of two nodes' intervals is a real one.
func (n *node) sample(ctx context.Context, el *role.Elector) {
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	var on, last, written int64 // on == 0: not in a true interval
	var epoch uint64
	flush := func() {
		if last > on && last > written {
			n.log(chaos.Event{Kind: chaos.KindMaster, Start: on, End: last, Token: epoch})
			written = last
		}
	}
	for {
		select {
		case <-ctx.Done():
			flush()
			return
		case <-t.C:
		}
		before := time.Now().UnixNano()
		master := el.IsMaster()
		after := time.Now().UnixNano()
		switch {
		case master && on == 0:
			on, last, written, epoch = after, 0, 0, el.Status().Epoch
		case master:
			if e := el.Status().Epoch; e != epoch {
				// A new tenure without a false read in between.
				flush()
				on, last, written, epoch = after, 0, 0, e
				continue
			}
			last = before
			if last-written >= int64(50*time.Millisecond) {
				flush()
			}
		case on != 0:
			flush()
			on = 0
		}
	}
}

// masterJob writes the role resource with the tenure's epoch.
func (n *node) masterJob(ctx context.Context) error {
	epoch, ok := schedlock.Token(ctx) // a master-only run's token is its epoch
	if !ok {
		n.logError("master-job", schedlock.Assert(ctx)) // lost its tenure already: nothing to write
		return nil
	}
	n.write(ctx, chaos.ResRole, epoch, fmt.Sprintf("%s/epoch-%d", n.o.name, epoch), 0, 0)
	return nil
}

// lockedJob writes the job resource with its lock token and its fire
// time: the time gocron scheduled the run for, however late it started
// (a node paused over a fire starts it when it wakes up).
func (n *node) lockedJob(ctx context.Context) error {
	token, ok := schedlock.Token(ctx)
	if !ok {
		n.logError("locked-job", fmt.Errorf("locked run without a token"))
		return nil
	}
	at, ok := schedlock.Fire(ctx)
	if !ok {
		n.logError("locked-job", fmt.Errorf("locked run without a fire time"))
		return nil
	}
	fire := at.UnixMilli()
	holding := fmt.Sprintf("%s/job-%d", n.o.name, n.holds.Add(1))
	n.log(chaos.Event{Kind: chaos.KindHold, Resource: chaos.ResJob, Token: token, Holding: holding, Fire: fire})
	n.write(ctx, chaos.ResJob, token, holding, 0, fire)
	return nil
}

// work increments the counter under the lock until ctx ends.
func (n *node) work(ctx context.Context, lk *synclock.Locker, worker int) {
	for ctx.Err() == nil {
		err := lk.DoKey(ctx, "counter", func(lctx context.Context) error {
			token, ok := synclock.Token(lctx)
			if !ok {
				return fmt.Errorf("holding without a token")
			}
			holding := fmt.Sprintf("%s/w%d-%d", n.o.name, worker, n.holds.Add(1))
			n.log(chaos.Event{Kind: chaos.KindHold, Resource: chaos.ResLock, Token: token, Holding: holding})
			// The read presents the token too, as a fenced resource's
			// read-modify-write must: an older holder that wakes up after
			// it can no longer write.
			v, ok, err := n.read(context.WithoutCancel(lctx), token, holding)
			if err != nil {
				return &ledgerError{err}
			}
			if !ok {
				return nil // refused as stale: this holding is over
			}
			// Not lctx-aware on purpose: a pause between the read and the
			// write is the case fencing is for.
			time.Sleep(n.o.think)
			n.write(context.WithoutCancel(lctx), chaos.ResCounter, token, holding, v+1, 0)
			return nil
		})
		if err != nil && ctx.Err() == nil {
			n.logError("synclock.DoKey", err)
			// As an application would: a failed call is not retried in
			// a hot loop while the store is down.
			select {
			case <-ctx.Done():
			case <-time.After(n.o.retry):
			}
		}
	}
}

// write sends one fenced write to the ledger, logging the attempt and
// its outcome.
func (n *node) write(ctx context.Context, res string, token uint64, holding string, value, fire int64) {
	op := n.ops.Add(1)
	e := chaos.Event{Kind: chaos.KindWrite, Op: op, Resource: res, Token: token, Holding: holding,
		Value: value, Fire: fire, Result: chaos.ResultInvoke, Start: time.Now().UnixNano()}
	n.log(e)
	ok, err := n.ledger.Write(context.WithoutCancel(ctx), n.o.name, res, token, holding, value, fire)
	e.End = time.Now().UnixNano()
	switch {
	case err != nil:
		// Maybe applied (a timeout after the script ran): no outcome, so
		// the checker counts the write as indeterminate.
		n.logError("ledger.write", &ledgerError{err})
		return
	case ok:
		e.Result = chaos.ResultOK
	default:
		e.Result = chaos.ResultRejected
	}
	n.log(e)
}

// read reads the counter with token, logged as a fenced operation
// (KindRead), and reports whether the ledger let it.
func (n *node) read(ctx context.Context, token uint64, holding string) (int64, bool, error) {
	e := chaos.Event{Kind: chaos.KindRead, Op: n.ops.Add(1), Resource: chaos.ResCounter, Token: token,
		Holding: holding, Result: chaos.ResultInvoke, Start: time.Now().UnixNano()}
	n.log(e)
	v, ok, err := n.ledger.Read(ctx, n.o.name, chaos.ResCounter, token)
	e.End = time.Now().UnixNano()
	switch {
	case err != nil:
		e.Result, e.Err = chaos.ResultError, err.Error()
	case ok:
		e.Result, e.Value = chaos.ResultOK, v
	default:
		e.Result = chaos.ResultRejected
	}
	n.log(e)
	return v, ok, err
}

// gateEvent records the errors the job gates report.
func (n *node) gateEvent(ev schedlock.Event) {
	switch ev.Kind {
	case schedlock.EventSkipped:
		switch ev.Reason {
		case "locked", "not-master", "already-ran":
			// The gates doing their work: another instance runs it, or
			// ran this fire already.
		default:
			n.logError("schedlock.skipped", ev.Err)
		}
	case schedlock.EventLost:
		n.logError("schedlock.lost", ev.Err)
	case schedlock.EventReleased:
		if ev.Err != nil {
			n.logError("schedlock.release", ev.Err)
		}
	}
}

// logError records err with its class.
func (n *node) logError(op string, err error) {
	if err == nil {
		return
	}
	n.log(chaos.Event{Kind: chaos.KindError, Class: classify(err), Err: err.Error(), Detail: op})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func parseDialMap(s string) (map[string]string, error) {
	m := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		from, to, ok := strings.Cut(pair, "=")
		if !ok || from == "" || to == "" {
			return nil, fmt.Errorf("-dial-map: %q is not from=to", pair)
		}
		m[from] = to
	}
	return m, nil
}
