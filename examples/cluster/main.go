// Command cluster is baton's main demo: three instances of one service
// elect a master, the master stops gracefully and hands over in
// milliseconds, then the next master crashes and a third instance takes
// over once the role key's TTL has run out. It prints the batonctl command
// line that inspects it while it runs, then a timeline, and exits by
// itself.
//
//	go run ./examples/cluster                      # embedded in-process Redis
//	go run ./examples/cluster -redis 127.0.0.1:6379  # a real Redis
//	go run ./examples/cluster -consul                # a Consul dev agent it starts
//	go run ./examples/cluster -consul -consul-addr 127.0.0.1:8500 -ttl 10s  # a running Consul agent
//	go run ./examples/cluster -http 127.0.0.1:8080   # also serve each instance's status page
//
// With -consul and no -consul-addr, the demo starts a private Consul dev
// agent from the consul binary that `make deps` builds (.cache/bin), or
// from PATH, and stops it at the end. Its sessions may be as short as 1 s;
// a running agent keeps Consul's minimum of 10 s unless its servers were
// configured otherwise (-consul-ttl-min).
//
// With -http ADDR (port 0 picks a free one) the demo serves the status
// page (package statuspage) of each instance at http://ADDR/<port>/, for
// instance 127.0.0.1:acme:billing:<port>, with links to all three at
// http://ADDR/, and prints the URL. After the timeline it keeps the last
// master and the pages running until interrupted (Ctrl-C), so that the
// pages can be looked at: the first master's page says its elector is
// not running and names the third master, as the third's own page does;
// the crashed instance's page says its store is unreachable.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/examples/internal/embedredis"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/internal/ctlline"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/statuspage"
	"github.com/baton-go/baton/testkit/testenv"
)

func main() {
	addr := flag.String("redis", "", "address of a Redis server (host:port); empty runs an embedded in-process Redis")
	useConsul := flag.Bool("consul", false, "run on Consul instead of Redis")
	consulAddr := flag.String("consul-addr", "", "with -consul: address of a running Consul agent; empty starts a private dev agent")
	consulMin := flag.Duration("consul-ttl-min", consulbackend.DefaultSessionTTLMin, "with -consul-addr: the servers' session_ttl_min")
	ttl := flag.Duration("ttl", 3*time.Second, "role key TTL (scheduler-lock.heartbeat-expiration-duration-in-seconds)")
	verbose := flag.Bool("v", false, "also print the electors' own log")
	httpAddr := flag.String("http", "", "serve each instance's status page on this address (host:port, port 0 picks one); empty: no pages")
	flag.Parse()
	open := func() (conn, error) { return connectRedis(*addr) }
	if *useConsul {
		open = func() (conn, error) { return connectConsul(*consulAddr, *consulMin) }
	}
	opts := options{ttl: *ttl, verbose: *verbose, http: *httpAddr, hold: func(url string) {
		fmt.Printf("\nstatus pages stay up at %s until Ctrl-C\n", url)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		<-ctx.Done()
	}}
	if err := run(open, opts); err != nil {
		fmt.Fprintln(os.Stderr, "cluster demo failed:", err)
		os.Exit(1)
	}
}

// instance is one member of the demo cluster, with a store of its own
// (as each process of a service has its own client): the store the demo
// runs on, with every optional capability it has (waiting lines and
// handover, members, listing), cut off at its client to play a crash:
// the process stops talking to the store and never releases.
type instance struct {
	id      instanceid.ID
	store   backend.Store
	close   func() // closes the store and its client
	el      *role.Elector
	endEl   context.CancelFunc // ends el's Run, which releases the role
	elDone  chan error         // el's Run returned
	events  *statuspage.Events // for its status page
	crashed atomic.Bool
	seen    chan struct{} // a master was named (OnMasterChange)
}

// stop ends the elector's Run (it gives the role up at once) and waits
// for Run to return, until ctx ends.
func (in *instance) stop(ctx context.Context) error {
	in.endEl()
	select {
	case err := <-in.elDone:
		in.endEl = nil // stopped: stopAll skips it
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// awaitMaster returns the master the instance sees, waiting up to within
// for it to see one: a slave learns of a new master at its next look at
// the store, which on a store the demo has not used before (the restart
// guard kept the role from everyone at first) comes after the election,
// at the latest at the master's first renewal.
func (in *instance) awaitMaster(within time.Duration) string {
	deadline := time.After(within)
	for {
		if m := in.el.Status().Master; m != "" {
			return m
		}
		select {
		case <-in.seen:
		case <-deadline:
			return "(none yet)"
		}
	}
}

// options are the demo's settings.
type options struct {
	ttl     time.Duration // the role key's TTL
	verbose bool          // print the electors' log too
	// http, if not empty, is the address to serve the status pages on;
	// hold is then called with their URL once the timeline is over, and
	// the demo stops the instances when it returns.
	http string
	hold func(url string)
	// out receives the timeline and the summary; nil is standard output.
	out io.Writer
}

// conn is the store the demo runs on: open opens a store on it for one
// instance, on a client of its own that fails every call once crashed is
// set, and returns it with the function that closes it; where describes
// it, ctl is the batonctl command line that inspects it, and stop
// closes whatever connecting started.
type conn struct {
	open  func(crashed *atomic.Bool) (backend.Store, func(), error)
	where string
	ctl   string
	stop  func()
}

// keyPrefix starts the demo's keys in the store, apart from other users'.
const keyPrefix = "baton-demo"

// run plays the demo on the store open returns.
func run(open func() (conn, error), o options) error {
	out := o.out
	if out == nil {
		out = os.Stdout
	}
	c, err := open()
	if err != nil {
		return err
	}
	defer c.stop()

	cfg := role.Config{HeartbeatExpiration: o.ttl, HeartbeatInterval: o.ttl / 3, SafetyMargin: o.ttl / 10}
	if err := cfg.Validate(); err != nil {
		return err
	}
	d := &demo{out: out, cfg: cfg.WithDefaults(), tl: &timeline{start: time.Now(), out: out}, elected: make(chan tenure, 8)}
	fmt.Fprintf(out, "baton cluster demo: 3 instances of service acme/billing on %s\n", c.where)
	fmt.Fprintf(out, "role TTL %v, heartbeat every %v, safety margin %v\n", d.cfg.HeartbeatExpiration, d.cfg.HeartbeatInterval, d.cfg.SafetyMargin)
	fmt.Fprintf(out, "inspect it with batonctl while it runs: %s\n\n", c.ctl)

	defer d.closeStores()
	if err := d.newInstances(c.open, demoLogger(o.verbose)); err != nil {
		return err
	}
	var url string
	if o.http != "" {
		var stopPages func()
		if url, stopPages, err = servePages(o.http, d.instances); err != nil {
			return err
		}
		defer stopPages()
		fmt.Fprintf(out, "status pages: %s (one per instance)\n\n", url)
	}
	if err := d.start(); err != nil {
		return err
	}
	defer d.stopAll()

	first, second, third, err := d.play()
	if err != nil {
		return err
	}
	if o.http != "" && o.hold != nil {
		o.hold(url)
	}
	d.tl.say("stopping the remaining instances")
	d.stopAll()
	return d.summary(first, second, third)
}

// demo is the state of one run of the demo.
type demo struct {
	out       io.Writer
	cfg       role.Config // with defaults
	tl        *timeline
	elected   chan tenure // sent by OnElected
	instances []*instance
	tenures   []tenure // in the order they began
}

// demoLogger returns the electors' logger: standard error when verbose,
// else none.
func demoLogger(verbose bool) *slog.Logger {
	if verbose {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// newInstances creates the demo's three instances, each with a store of
// its own from open and an elector that is not started yet.
func (d *demo) newInstances(open func(*atomic.Bool) (backend.Store, func(), error), log *slog.Logger) error {
	for i := range 3 {
		id, err := instanceid.New("127.0.0.1", "acme", "billing", 8081+i)
		if err != nil {
			return err
		}
		in := &instance{id: id, events: statuspage.NewEvents(0), seen: make(chan struct{}, 1)}
		if in.store, in.close, err = open(&in.crashed); err != nil {
			return err
		}
		d.instances = append(d.instances, in)
		if in.el, err = d.newElector(in, log); err != nil {
			return err
		}
	}
	return nil
}

// closeStores closes the instances' stores.
func (d *demo) closeStores() {
	for _, in := range d.instances {
		in.close()
	}
}

// newElector returns the elector of in, which tells the timeline, its
// status page's events and the demo what happens.
func (d *demo) newElector(in *instance, log *slog.Logger) (*role.Elector, error) {
	id := in.id
	return role.NewElector(in.store, id, d.cfg,
		role.WithLogger(log),
		role.OnElected(func(ctx context.Context) {
			epoch, _ := role.EpochFromContext(ctx)
			at := time.Now()
			d.tl.say("%s is MASTER (epoch %d)", id, epoch)
			in.events.Elected(ctx)
			d.elected <- tenure{who: in, epoch: epoch, at: at, ctx: ctx}
		}),
		role.OnDemoted(func() {
			d.tl.say("%s is no longer master", id)
			in.events.Demoted()
		}),
		role.OnMasterChange(in.events.MasterChanged),
		role.OnMasterChange(in.masterNamed),
		role.OnDuplicateID(in.events.DuplicateID))
}

// masterNamed tells awaitMaster that a master was named.
func (in *instance) masterNamed(master string) {
	if master != "" {
		select {
		case in.seen <- struct{}{}:
		default:
		}
	}
}

// start starts the instances a little apart: the first one claims the
// role.
func (d *demo) start() error {
	for _, in := range d.instances {
		d.tl.say("%s starts", in.id)
		var ctx context.Context
		ctx, in.endEl = context.WithCancel(context.Background())
		in.elDone = make(chan error, 1)
		go func() { in.elDone <- in.el.Run(ctx) }()
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// stopAll stops every instance's elector, waiting at most 5 s in all.
func (d *demo) stopAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, in := range d.instances {
		if in.endEl != nil {
			_ = in.stop(ctx)
		}
	}
}

// next waits up to within for the next tenure to begin; what says when,
// in the error if none does.
func (d *demo) next(what string, within time.Duration) (tenure, error) {
	select {
	case t := <-d.elected:
		d.tenures = append(d.tenures, t)
		return t, nil
	case <-time.After(within):
		return tenure{}, fmt.Errorf("no master elected %s within %v", what, within)
	}
}

// play plays the timeline: the first master is elected and the slaves see
// it, it stops gracefully and hands over to the second, and the second
// crashes and the third takes over after the TTL.
func (d *demo) play() (first, second, third tenure, err error) {
	first, err = d.next("at start", 5*time.Second)
	if err != nil {
		return first, second, third, err
	}
	for _, in := range d.instances {
		if in != first.who {
			d.tl.say("%s is a slave and sees master %s", in.id, in.awaitMaster(2*d.cfg.HeartbeatExpiration+2*d.cfg.HeartbeatInterval))
		}
	}
	second, err = d.gracefulStop(first)
	if err != nil {
		return first, second, third, err
	}
	third, err = d.crash(second)
	return first, second, third, err
}

// gracefulStop lets the master renew a few times, then stops it
// gracefully, and returns the tenure that follows, with how long the
// handover took.
func (d *demo) gracefulStop(master tenure) (tenure, error) {
	time.Sleep(2 * d.cfg.HeartbeatInterval)
	d.tl.say("stopping the master %s gracefully: it gives up the role and deletes the key", master.who.id)
	stopAt := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := master.who.stop(ctx)
	cancel()
	if err != nil {
		return tenure{}, err
	}
	next, err := d.next("after the graceful stop", 5*time.Second)
	if err != nil {
		return tenure{}, err
	}
	next.took = next.at.Sub(stopAt)
	d.tl.say("handover took %v (a slave was woken by the release, not by its next heartbeat)", next.took.Round(10*time.Microsecond))
	return next, nil
}

// crash lets the master renew, then crashes it: it stops talking to the
// store and its key stays until the TTL runs out. It returns the tenure
// that follows, with how long the failover took.
func (d *demo) crash(master tenure) (tenure, error) {
	time.Sleep(2 * d.cfg.HeartbeatInterval)
	d.tl.say("crashing the master %s: it stops talking to the store and never releases", master.who.id)
	crashAt := time.Now()
	master.who.crashed.Store(true)
	// Consul keeps a session up to twice its TTL.
	next, err := d.next("after the crash", 2*d.cfg.HeartbeatExpiration+5*time.Second)
	if err != nil {
		return tenure{}, err
	}
	next.took = next.at.Sub(crashAt)
	d.tl.say("failover took %v after the crash (TTL %v): the slave claimed as soon as the store let the key go", next.took.Round(time.Millisecond), d.cfg.HeartbeatExpiration)
	return next, nil
}

// summary prints the summary of the three tenures and checks that their
// epochs increased and that each had ended before the next began.
func (d *demo) summary(first, second, third tenure) error {
	out := d.out
	fmt.Fprintln(out)
	fmt.Fprintln(out, "summary:")
	fmt.Fprintf(out, "  tenures:  %s (epoch %d) -> %s (epoch %d) -> %s (epoch %d)\n",
		first.who.id, first.epoch, second.who.id, second.epoch, third.who.id, third.epoch)
	fmt.Fprintf(out, "  graceful handover: %v\n", second.took.Round(10*time.Microsecond))
	fmt.Fprintf(out, "  crash failover:    %v (TTL %v)\n", third.took.Round(time.Millisecond), d.cfg.HeartbeatExpiration)
	if !(first.epoch < second.epoch && second.epoch < third.epoch) {
		return errors.New("epochs did not increase")
	}
	for i, t := range d.tenures[:len(d.tenures)-1] {
		if t.ctx.Err() == nil {
			return fmt.Errorf("tenure %d (epoch %d) was still live when a later one began", i, t.epoch)
		}
	}
	fmt.Fprintln(out, "  epochs only increased, and each tenure had ended before the next began")
	return nil
}

// tenure is one master's time in the role, as OnElected reported it.
type tenure struct {
	who   *instance
	epoch uint64
	at    time.Time
	ctx   context.Context
	took  time.Duration // how long the handover or failover to it took
}

// connectRedis connects to the Redis at addr, or to an embedded Redis
// whose clock is driven by real time when addr is empty.
func connectRedis(addr string) (conn, error) {
	rdb, where, stopRedis, err := redisClient(addr)
	if err != nil {
		return conn{}, err
	}
	server := rdb.Options().Addr
	open := func(crashed *atomic.Bool) (backend.Store, func(), error) {
		c := redis.NewClient(&redis.Options{Addr: server})
		c.AddHook(crashHook{crashed})
		store, err := redisbackend.New(c, redisbackend.WithPrefix(keyPrefix))
		if err != nil {
			c.Close()
			return nil, nil, err
		}
		return store, func() {
			store.Close()
			c.Close()
		}, nil
	}
	return conn{open: open, where: where, ctl: ctlline.Redis(server, keyPrefix, "acme", "billing"), stop: func() {
		rdb.Close()
		stopRedis()
	}}, nil
}

// crashHook makes a Redis client fail every command and every dial once
// crashed is set, as if its process had died.
type crashHook struct{ crashed *atomic.Bool }

var _ redis.Hook = crashHook{}

// DialHook implements redis.Hook.
func (h crashHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if h.crashed.Load() {
			return nil, errCrashed
		}
		return next(ctx, network, addr)
	}
}

// ProcessHook implements redis.Hook.
func (h crashHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.crashed.Load() {
			cmd.SetErr(errCrashed)
			return errCrashed
		}
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (h crashHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.crashed.Load() {
			for _, cmd := range cmds {
				cmd.SetErr(errCrashed)
			}
			return errCrashed
		}
		return next(ctx, cmds)
	}
}

// errCrashed is what a crashed instance's store calls fail with.
var errCrashed = errors.New("instance crashed (demo)")

// connectConsul returns a store on the Consul agent at addr, or on a
// private dev agent it starts when addr is empty.
func connectConsul(addr string, ttlMin time.Duration) (conn, error) {
	where, stopAgent := "the Consul agent at "+addr, func() {}
	if addr == "" {
		agent, err := testenv.StartConsul(testenv.ConsulOptions{SessionTTLMin: time.Second})
		if err != nil {
			return conn{}, fmt.Errorf("starting a Consul dev agent (build it with `make deps`, or pass -consul-addr): %w", err)
		}
		addr, ttlMin = agent.Addr(), agent.SessionTTLMin()
		where = "a private Consul dev agent at " + addr
		stopAgent = func() { agent.Close() }
	}
	open := func(crashed *atomic.Bool) (backend.Store, func(), error) {
		cfg := api.DefaultConfig()
		cfg.Address = addr
		tr := cfg.Transport // a pooled transport of this client's own
		cfg.HttpClient = &http.Client{Transport: crashTransport{next: tr, crashed: crashed}}
		store, err := consulbackend.New(cfg, consulbackend.WithPrefix(keyPrefix), consulbackend.WithSessionTTLMin(ttlMin))
		if err != nil {
			tr.CloseIdleConnections()
			return nil, nil, err
		}
		return store, func() {
			store.Close()
			tr.CloseIdleConnections()
		}, nil
	}
	if err := reachConsul(open); err != nil {
		stopAgent()
		return conn{}, err
	}
	return conn{open: open, where: where, ctl: ctlline.Consul(addr, keyPrefix, "acme", "billing"), stop: stopAgent}, nil
}

// reachConsul checks that a store from open answers.
func reachConsul(open func(*atomic.Bool) (backend.Store, func(), error)) error {
	store, closeStore, err := open(new(atomic.Bool))
	if err != nil {
		return err
	}
	defer closeStore()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := store.Get(ctx, backend.AppKey("acme", "billing", "role")); err != nil && !errors.Is(err, backend.ErrNotFound) {
		return fmt.Errorf("cannot reach Consul: %w", err)
	}
	return nil
}

// crashTransport makes a Consul client fail every request once crashed
// is set, as if its process had died.
type crashTransport struct {
	next    http.RoundTripper
	crashed *atomic.Bool
}

// RoundTrip implements http.RoundTripper.
func (t crashTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.crashed.Load() {
		if r.Body != nil {
			r.Body.Close()
		}
		return nil, errCrashed
	}
	return t.next.RoundTrip(r)
}

// redisClient returns a client for addr, or starts an embedded Redis
// whose clock is driven by real time when addr is empty.
func redisClient(addr string) (rdb *redis.Client, where string, stop func(), err error) {
	if addr != "" {
		rdb = redis.NewClient(&redis.Options{Addr: addr})
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := rdb.Ping(ctx).Err(); err != nil {
			rdb.Close()
			return nil, "", nil, fmt.Errorf("cannot reach Redis at %s: %w", addr, err)
		}
		return rdb, "Redis at " + addr, func() {}, nil
	}
	m, err := embedredis.Start(2 * time.Millisecond)
	if err != nil {
		return nil, "", nil, err
	}
	stop = m.Close
	return redis.NewClient(&redis.Options{Addr: m.Addr()}), "an embedded in-process Redis (miniredis)", stop, nil
}

type timeline struct {
	start time.Time
	out   io.Writer
	mu    sync.Mutex
}

func (t *timeline) say(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.out, "[+%6.3fs] %s\n", time.Since(t.start).Seconds(), fmt.Sprintf(format, args...))
}

// servePages serves the status page of each instance at /<port>/ on addr,
// with an index at /, until the returned stop is called. It returns the
// index's URL.
func servePages(addr string, instances []*instance) (url string, stop func(), err error) {
	mux := http.NewServeMux()
	var index []string
	for _, in := range instances {
		page, err := statuspage.New(in.store, in.el, statuspage.WithEvents(in.events))
		if err != nil {
			return "", nil, err
		}
		path := "/" + strconv.Itoa(int(in.id.Port))
		mux.Handle(path+"/", http.StripPrefix(path, page))
		index = append(index, fmt.Sprintf(`<li><a href="%s/">%s</a></li>`, path, in.id))
	}
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>baton cluster demo</title></head>`+
			`<body style="font-family:system-ui,sans-serif;margin:1rem"><h1>baton cluster demo: acme/billing</h1><p>The status page of each instance:</p><ul>%s</ul></body></html>`,
			strings.Join(index, ""))
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("serving the status pages on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(l)
	}()
	return "http://" + l.Addr().String() + "/", func() {
		srv.Close()
		<-done
	}, nil
}
