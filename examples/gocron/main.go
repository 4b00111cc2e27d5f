// Command gocron shows baton's job gates side by side. Three instances of
// service acme/billing, each with its own gocron scheduler and its own
// connection to the store (as three processes would have), schedule the
// same three jobs every second:
//
//	report  master-only     schedlock.MasterOnly: runs on the master
//	warm    slave-only      schedlock.SlaveOnly: runs on every slave
//	export  once per fire   schedlock.Locked: ShedLock's job lock, one run across the fleet
//
// Every run and every skip is printed with its reason, after the batonctl
// command line that shows the demo's master, members and locks. Once the master
// has run report and export has run, the master stops gracefully and
// another instance takes over at once: report moves with the role. A
// summary table ends the demo.
//
//	go run ./examples/gocron                        # embedded in-process Redis, no setup
//	go run ./examples/gocron -redis 127.0.0.1:6379  # a real Redis
//	go run ./examples/gocron -for 20s               # a longer run
//
// On a Redis that started moments ago, or where this demo's tenant has
// never run, export is skipped as recovering for its first seconds: the
// store grants nothing until every lease it may have lost would have
// ended (the restart guard; it cannot tell a first use from a flush of
// the keys, and batonctl init declares a new store whole).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/examples/internal/embedredis"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/internal/ctlline"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
)

func main() {
	addr := flag.String("redis", "", "host:port of a Redis server; empty runs an embedded in-process Redis")
	length := flag.Duration("for", 6*time.Second, "how long the demo runs, at the least")
	flag.Parse()
	if err := run(context.Background(), *addr, *length, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "gocron demo failed:", err)
		os.Exit(1)
	}
}

// The jobs, how often they fire, and how long a phase of the demo may
// wait for what it shows.
const (
	every      = time.Second
	reportJob  = "report"
	warmJob    = "warm"
	exportJob  = "export"
	phaseLimit = time.Minute
)

// keyPrefix starts the demo's keys in Redis, apart from other users'.
const keyPrefix = "baton-gocron-demo"

// instance is one member of the demo fleet.
type instance struct {
	name  string // its port, for short lines
	id    instanceid.ID
	el    *role.Elector
	stop  func(context.Context) error // ends el's Run and waits for it
	sched gocron.Scheduler
	rdb   *redis.Client
	store *redisbackend.Store
}

// demo prints what the jobs do and counts it.
type demo struct {
	start time.Time
	out   io.Writer
	ran   chan [2]string // job and instance of each run

	mu     sync.Mutex
	counts map[[3]string]int // instance, job, "ran" or "skipped <reason>"
}

// say prints a line of the timeline.
func (d *demo) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "%5.1fs  "+format+"\n", append([]any{time.Since(d.start).Seconds()}, args...)...)
}

// note prints and counts one run ("ran") or skip ("skipped", with the
// reason's label first in detail) of job on instance inst.
func (d *demo) note(inst, job, what, detail string) {
	outcome := what
	if what == "skipped" {
		label, _, _ := strings.Cut(detail, " ")
		outcome += " " + label
	}
	d.mu.Lock()
	d.counts[[3]string{inst, job, outcome}]++
	d.mu.Unlock()
	d.say("instance %s  %-6s  %-8s %s", inst, job, what, detail)
	if what == "ran" {
		select {
		case d.ran <- [2]string{job, inst}:
		default:
		}
	}
}

// run plays the demo on the Redis at addr, or on an embedded one, for
// about length, writing to out.
func run(ctx context.Context, addr string, length time.Duration, out io.Writer) error {
	if addr == "" {
		m, err := embedredis.Start(10 * time.Millisecond)
		if err != nil {
			return err
		}
		defer m.Close()
		addr = m.Addr()
	}
	d := &demo{start: time.Now(), out: out, counts: map[[3]string]int{}, ran: make(chan [2]string, 256)}
	fmt.Fprintf(out, "baton gocron demo: 3 instances of acme/billing on Redis at %s, jobs every %v\n", addr, every)
	fmt.Fprintf(out, "inspect it with batonctl while it runs: %s\n\n", ctlline.Redis(addr, keyPrefix, "acme", "billing"))

	quiet := slog.New(slog.DiscardHandler)
	cfg := role.Config{HeartbeatInterval: 300 * time.Millisecond, HeartbeatExpiration: 2 * time.Second}
	var fleet []*instance
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		for _, in := range fleet {
			_ = in.sched.Shutdown() // waits for running jobs
			_ = in.stop(stopCtx)
			in.store.Close()
			in.rdb.Close()
		}
	}()
	for i := range 3 {
		in, err := startInstance(addr, 8081+i, cfg, quiet, d)
		if in != nil {
			fleet = append(fleet, in)
		}
		if err != nil {
			return err
		}
	}

	// Phase 1: the first master runs report, and export runs somewhere.
	first, err := d.phase(ctx, length/2, nil)
	if err != nil {
		return err
	}
	for _, in := range fleet {
		if in.name != first {
			continue
		}
		d.say("instance %s  stops gracefully: it gives up the role at once", in.name)
		_ = in.sched.Shutdown()
		stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := in.stop(stopCtx)
		cancel()
		if err != nil {
			return err
		}
	}
	// Phase 2: another instance is master and runs report.
	if _, err := d.phase(ctx, length-length/2, map[string]bool{first: true}); err != nil {
		return err
	}
	d.summary(fleet)
	return nil
}

// phase lasts at least length and until an instance not in not has run
// the report and export has run; it returns the instance.
func (d *demo) phase(ctx context.Context, length time.Duration, not map[string]bool) (string, error) {
	end := time.After(length)
	limit := time.After(phaseLimit)
	reporter, exported := "", false
	for reporter == "" || !exported || end != nil {
		select {
		case r := <-d.ran:
			switch job, inst := r[0], r[1]; {
			case job == reportJob && reporter == "" && !not[inst]:
				reporter = inst
			case job == exportJob:
				exported = true
			}
		case <-end:
			end = nil
		case <-limit:
			return "", fmt.Errorf("within %v: master's report run %q, export run %v", phaseLimit, reporter, exported)
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return reporter, nil
}

// runElector runs el until stop is called: the end of Run's context
// releases the role at once, and stop waits for Run to return, until its
// ctx ends.
func runElector(el *role.Elector) (stop func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	return func(wait context.Context) error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-wait.Done():
			return wait.Err()
		}
	}
}

// startInstance starts one instance: its client and store, its elector
// and its scheduler with the three jobs. It returns what it started, to
// be stopped, also with an error.
func startInstance(addr string, port int, cfg role.Config, log *slog.Logger, d *demo) (*instance, error) {
	id, err := instanceid.New("127.0.0.1", "acme", "billing", port)
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	store, err := redisbackend.New(rdb, redisbackend.WithPrefix(keyPrefix))
	if err != nil {
		rdb.Close()
		return nil, err
	}
	el, err := role.NewElector(store, id, cfg, role.WithLogger(log))
	if err != nil {
		store.Close()
		rdb.Close()
		return nil, err
	}
	stop := runElector(el)
	sched, err := gocron.NewScheduler()
	if err != nil {
		_ = stop(context.Background())
		store.Close()
		rdb.Close()
		return nil, err
	}
	in := &instance{name: fmt.Sprint(port), id: id, el: el, stop: stop, sched: sched, rdb: rdb, store: store}

	// A gate's refusal reaches gocron as the locker's error: print it.
	skips := gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, job string, err error) {
		skip, ok := errors.AsType[*schedlock.SkipError](err)
		if !ok {
			d.note(in.name, job, "failed", err.Error())
			return
		}
		detail := skip.Label()
		switch {
		case errors.Is(skip.Reason, schedlock.ErrRecovering):
			detail += " (the store grants nothing yet: the restart guard, for lockAtMostFor; batonctl init declares a new store whole)"
		case detail == "locked":
			detail += " (held by " + skip.Holder.Owner + ")"
		case errors.Is(skip.Reason, schedlock.ErrNotSlave) && !el.IsMaster():
			detail += " (no master known yet)"
		}
		d.note(in.name, job, "skipped", detail)
	}))
	gate := []schedlock.Option{schedlock.WithLogger(log), schedlock.WithInstance(id)}
	jobs := []struct {
		name string
		gate gocron.JobOption
		task func(ctx context.Context)
	}{
		{reportJob, schedlock.MasterOnly(el, gate...), func(ctx context.Context) {
			epoch, _ := schedlock.Token(ctx) // a master-only run's token is the master's epoch: a fencing token for what the job writes
			d.note(in.name, reportJob, "ran", fmt.Sprintf("on the master, epoch %d", epoch))
		}},
		{warmJob, schedlock.SlaveOnly(el, gate...), func(context.Context) {
			d.note(in.name, warmJob, "ran", "on a slave")
		}},
		// A lease of 10 s frees the lock of a crashed holder; it is kept
		// 500 ms after the start, so that the other instances' fires of
		// the same second (their schedulers started a little apart) are
		// skipped. WithScheduler gives the lock each run's fire time, so
		// that an instance paused over a fire does not run it late.
		{exportJob, schedlock.Locked(store, exportJob, 10*time.Second, 500*time.Millisecond, append(gate, schedlock.WithScheduler(sched))...), func(ctx context.Context) {
			token, _ := schedlock.Token(ctx)
			d.note(in.name, exportJob, "ran", fmt.Sprintf("under the job lock, token %d", token))
		}},
	}
	for _, j := range jobs {
		if _, err := sched.NewJob(gocron.DurationJob(every), gocron.NewTask(j.task), gocron.WithName(j.name), j.gate, skips); err != nil {
			return in, err
		}
	}
	sched.Start()
	return in, nil
}

// summary prints, per instance and job, how many runs and skips by
// reason there were.
func (d *demo) summary(fleet []*instance) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "\n%-9s %-7s %s\n", "instance", "job", "runs and skips")
	for _, in := range fleet {
		for _, job := range []string{reportJob, warmJob, exportJob} {
			var parts []string
			for k, n := range d.counts {
				if k[0] == in.name && k[1] == job {
					parts = append(parts, fmt.Sprintf("%s: %d", k[2], n))
				}
			}
			sort.Strings(parts)
			fmt.Fprintf(d.out, "%-9s %-7s %s\n", in.name, job, strings.Join(parts, ", "))
		}
	}
}
