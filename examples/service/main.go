// Command service is the README's quick start grown into a service: one
// instance of service "billing" loads its configuration, joins the
// election, runs a master-only, a slave-only and a locked job with gocron
// and one critical section under a cross-instance lock, and stops cleanly
// on SIGTERM or Ctrl-C, giving up the role at once.
//
//	go run ./examples/service                        # embedded in-process Redis, no setup
//	go run ./examples/service -redis 127.0.0.1:6379  # a real Redis
//
// Run it twice against one Redis to see a master and a slave. Every key
// can also come from a file (-config baton.yaml; a Spring Boot
// application.yml or .properties is read as it is with config.Spring) and from
// BATON_* variables, such as BATON_INSTANCE_PORT=8081 for a second
// instance on one host.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/config"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/synclock"
)

func main() {
	redisAddr := flag.String("redis", "", "host:port of a Redis server; empty runs an embedded in-process Redis")
	configFile := flag.String("config", "", "file of baton's keys (.yaml, .json, .toml, .properties), optional")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, *configFile, *redisAddr, log.New(os.Stdout, "", log.Ltime)); err != nil {
		log.Fatal(err)
	}
}

// run runs the service until ctx ends.
func run(ctx context.Context, configFile, redisAddr string, say *log.Logger) error {
	// 1. Configuration first, so that files and BATON_* variables decide
	// everything, the instance ID included.
	cfg, err := loadConfig(configFile)
	if err != nil {
		return err // every problem, one per line, naming the key
	}
	if redisAddr == "" {
		embedded, stopRedis, err := startEmbeddedRedis()
		if err != nil {
			return err
		}
		defer stopRedis()
		redisAddr = embedded
	}
	cfg.Redis.Addrs = []string{redisAddr}

	// 2. The instance ID (ip:tenant:app:port) and the store, from the
	// configuration.
	id, err := cfg.InstanceID()
	if err != nil {
		return err
	}
	store, err := cfg.RedisStore(ctx)
	if err != nil {
		return err
	}
	defer store.Close()
	say.Printf("inspect it from the repository: go run ./cmd/batonctl --redis %s --prefix %s --tenant %s --app %s status",
		redisAddr, cfg.Redis.KeyPrefix, id.Tenant, id.App)

	// 3. The election. SetDefault registers the elector for code that is
	// not handed it (role.IsMaster) and names the instance for job locks.
	el, err := role.NewElector(store, id, cfg.Role,
		role.OnElected(func(ctx context.Context) {
			epoch, _ := role.EpochFromContext(ctx)
			say.Printf("%s is master (epoch %d)", id, epoch) // ctx ends with the mastership
		}),
		role.OnDemoted(func() { say.Printf("%s is no longer master", id) }))
	if err != nil {
		return err
	}
	role.SetDefault(el)
	defer runElection(ctx, el, say)()

	// 4. Scheduled jobs, gated before every run.
	s, err := gocron.NewScheduler()
	if err != nil {
		return err
	}
	defer func() {
		if err := s.Shutdown(); err != nil { // waits for running jobs
			say.Printf("scheduler: %v", err)
		}
	}()
	if err := addJobs(s, el, store, id, say); err != nil {
		return err
	}
	s.Start()
	say.Printf("%s started; stop with Ctrl-C or SIGTERM", id)

	// 5. Cross-instance locks: one goroutine of one instance at a time.
	lk, err := synclock.NewLocker(store, id, cfg.SyncLock)
	if err != nil {
		return err
	}
	err = lk.DoKey(ctx, "close-invoices", func(ctx context.Context) error {
		token, _ := synclock.Token(ctx) // pass it with every write, so a stale holder is refused
		say.Printf("section close-invoices ran under the lock (token %d)", token)
		return nil
	})
	if err != nil && ctx.Err() == nil { // a stop while it waited is no failure
		return err
	}

	<-ctx.Done()
	say.Printf("stopping") // the deferred calls stop the jobs, then give up the role
	return nil
}

// startEmbeddedRedis starts an in-process Redis (miniredis) for the
// demo and returns its address and a function that stops it. miniredis
// expires keys only when told that time passed, so a goroutine tells it.
func startEmbeddedRedis() (addr string, stop func(), err error) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return "", nil, fmt.Errorf("embedded Redis: %w", err)
	}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for last := time.Now(); ; {
			select {
			case <-done:
				return
			case now := <-tick.C:
				m.FastForward(now.Sub(last))
				last = now
			}
		}
	}()
	return m.Addr(), func() { close(done); <-stopped; m.Close() }, nil
}

// loadConfig reads baton's keys: defaults for the demo, then the file
// (if any), then BATON_* variables; later sources win.
func loadConfig(configFile string) (*config.Config, error) {
	sources := []config.Source{config.Map(map[string]any{
		"instance.app":  "billing",
		"instance.port": 8080,
	})}
	if configFile != "" {
		sources = append(sources, config.File(configFile))
	}
	return config.Load(append(sources, config.Env("BATON_"))...)
}

// addJobs adds the demo's three jobs to s: master-only, slave-only and
// once per fire across the fleet.
func addJobs(s gocron.Scheduler, el *role.Elector, store backend.Store, id instanceid.ID, say *log.Logger) error {
	skipped := gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, job string, err error) {
		if skip, ok := errors.AsType[*schedlock.SkipError](err); ok {
			say.Printf("job %s skipped: %s", job, skip.Label())
		}
	}))
	every := gocron.DurationJob(2 * time.Second)
	now := gocron.WithStartAt(gocron.WithStartImmediately())
	sendReport := func(ctx context.Context) {
		epoch, _ := schedlock.Token(ctx) // a master-only run's token is the master's epoch: a fencing token for the report
		say.Printf("job send-report ran on the master (epoch %d)", epoch)
	}
	warmCache := func() { say.Printf("job warm-cache ran on a slave") }
	export := func(ctx context.Context) {
		token, _ := schedlock.Token(ctx)
		say.Printf("job export ran under the job lock (token %d)", token)
	}
	if _, err := s.NewJob(every, gocron.NewTask(sendReport), gocron.WithName("send-report"),
		schedlock.MasterOnly(el), skipped, now); err != nil { // only on the master
		return err
	}
	if _, err := s.NewJob(every, gocron.NewTask(warmCache), gocron.WithName("warm-cache"),
		schedlock.SlaveOnly(el), skipped, now); err != nil { // only on slaves
		return err
	}
	// Once per fire across the fleet (ShedLock): a lease of 1 min, kept
	// 5 s after the start, so this job runs every third fire. Locked
	// needs the instance, schedlock.WithInstance(id), and the scheduler,
	// schedlock.WithScheduler(s), which gives it each run's fire time, so
	// that an instance that starts a fire late (it was paused over it)
	// does not run it again.
	if _, err := s.NewJob(every, gocron.NewTask(export), gocron.WithName("export"),
		schedlock.Locked(store, "export", time.Minute, 5*time.Second, schedlock.WithInstance(id), schedlock.WithScheduler(s)), skipped, now); err != nil {
		return err
	}
	return nil
}

// runElection runs el until the returned stop is called, which releases
// the role at once and waits up to 5 s for el to stop. el's context is not
// ctx, so that the role is given up last, after the jobs have stopped.
func runElection(ctx context.Context, el *role.Elector, say *log.Logger) (stop func()) {
	elCtx, endElection := context.WithCancel(context.WithoutCancel(ctx))
	elDone := make(chan struct{})
	go func() { _ = el.Run(elCtx); close(elDone) }() // Run fails only when el already runs
	return func() {
		endElection()
		select {
		case <-elDone:
		case <-time.After(5 * time.Second):
			say.Printf("stop: the elector did not stop within 5s")
		}
	}
}
