package schedlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"

	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
)

// startElector runs an elector for id until the function it returns
// ends its context (which releases the role) and waits for its Run.
func startElector(store *membackend.Store, ip string) (*role.Elector, func()) {
	id, _ := instanceid.New(ip, "acme", "billing", 8080)
	el, _ := role.NewElector(store, id, role.Config{}, role.WithLogger(slog.New(slog.DiscardHandler)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { el.Run(ctx); close(done) }()
	return el, func() { cancel(); <-done }
}

// A report that only the master sends. Before every run the gate asks the
// elector (a clock read, no I/O); on a slave the run is skipped and
// AfterLockError says why.
func ExampleMasterOnly() {
	store := membackend.New() // redisbackend.New(client) in production
	defer store.Close()
	el, stop := startElector(store, "10.0.0.7")
	defer stop()
	for !el.IsMaster() {
		time.Sleep(time.Millisecond)
	}

	s, _ := gocron.NewScheduler()
	defer s.Shutdown()
	sent := make(chan string)
	j, _ := s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(func() { sent <- "report sent by the master" }),
		gocron.WithName("send-report"),
		schedlock.MasterOnly(el))
	s.Start()
	fmt.Println(<-sent)
	fmt.Println("tags:", j.Tags())
	// Output:
	// report sent by the master
	// tags: [master-only]
}

// A cache warm-up that runs on the slaves and never on the master.
func ExampleSlaveOnly() {
	store := membackend.New()
	defer store.Close()
	master, stopA := startElector(store, "10.0.0.7")
	defer stopA()
	for !master.IsMaster() {
		time.Sleep(time.Millisecond)
	}
	slave, stopB := startElector(store, "10.0.0.8")
	defer stopB()
	for slave.Status().Master == "" {
		time.Sleep(time.Millisecond)
	}

	report := make(chan string)
	for _, el := range []*role.Elector{master, slave} {
		ip, _, _ := strings.Cut(el.Status().Instance, ":")
		s, _ := gocron.NewScheduler()
		defer s.Shutdown()
		s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
			gocron.NewTask(func() { report <- ip + " warmed the cache" }),
			schedlock.SlaveOnly(el),
			gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) {
				var skip *schedlock.SkipError
				errors.As(err, &skip)
				report <- ip + " skipped: " + skip.Label()
			})))
		s.Start()
		fmt.Println(<-report)
	}
	// Output:
	// 10.0.0.7 skipped: not-slave
	// 10.0.0.8 warmed the cache
}

// A nightly export that runs once per fire across the fleet, ShedLock
// style: the first instance takes the lock, the others skip. The lock is
// kept 30s after the start even though the job is quick, so an instance
// whose scheduler fires a little later does not run it again; with the
// scheduler (WithScheduler) the lock also remembers the fire, so an
// instance that starts it much later skips it too.
func ExampleLocked() {
	store := membackend.New()
	defer store.Close()

	report := make(chan string)
	for _, ip := range []string{"10.0.0.7", "10.0.0.8"} {
		id, _ := instanceid.New(ip, "acme", "billing", 8080)
		s, _ := gocron.NewScheduler()
		defer s.Shutdown()
		s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
			gocron.NewTask(func() { report <- ip + " exported" }),
			gocron.WithName("nightly-export"),
			schedlock.Locked(store, "nightly-export", 10*time.Minute, 30*time.Second, schedlock.WithInstance(id), schedlock.WithScheduler(s)),
			gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) {
				if errors.Is(err, schedlock.ErrLocked) {
					report <- ip + " skipped: the export already ran"
				}
			})))
		s.Start()
		fmt.Println(<-report)
	}
	// Output:
	// 10.0.0.7 exported
	// 10.0.0.8 skipped: the export already ran
}

// Master-only and once per fire: one option carries both conditions, as a
// gocron job has one locker. The job extends its lock while it works and
// stops when its context (schedlock.Context, called in the task) says the
// gate is lost.
func ExampleWithLock() {
	store := membackend.New()
	defer store.Close()
	el, stop := startElector(store, "10.0.0.7")
	defer stop()
	for !el.IsMaster() {
		time.Sleep(time.Millisecond)
	}

	s, _ := gocron.NewScheduler()
	defer s.Shutdown()
	done := make(chan error)
	s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(func(ctx context.Context) error {
			ctx, cancel := schedlock.Context(ctx)
			defer cancel()
			first, _ := schedlock.Token(ctx) // from the store's clock: a large number
			for batch := range 3 {
				if err := schedlock.Extend(ctx, time.Minute); err != nil {
					done <- err
					return err // lost the lock or the mastership: stop
				}
				token, _ := schedlock.Token(ctx)
				fmt.Printf("batch %d written with the run's fencing token: %v\n", batch, token == first)
			}
			done <- schedlock.Assert(ctx)
			return nil
		}),
		gocron.WithName("rebuild-index"),
		schedlock.MasterOnly(el, schedlock.WithLock(store, "rebuild-index", time.Minute, 0), schedlock.WithScheduler(s)))
	s.Start()
	fmt.Println("still master and lock holder:", <-done == nil)
	// Output:
	// batch 0 written with the run's fencing token: true
	// batch 1 written with the run's fencing token: true
	// batch 2 written with the run's fencing token: true
	// still master and lock holder: true
}

// Other schedulers (robfig/cron, a time.Ticker loop) make the job option
// once and Run it on every tick, with the tick's fire time (zero here:
// unknown, so a job lock would guard the run alone).
func ExampleRun() {
	store := membackend.New()
	defer store.Close()
	el, stop := startElector(store, "10.0.0.7")
	defer stop()
	for !el.IsMaster() {
		time.Sleep(time.Millisecond)
	}
	report := schedlock.MasterOnly(el)

	ctx := context.Background()
	err := schedlock.Run(ctx, report, time.Time{}, func(ctx context.Context) error {
		epoch, _ := schedlock.Token(ctx) // a master-only run's token is its epoch
		fmt.Println("tick handled by the master, with its epoch:", epoch == el.Status().Epoch)
		return nil
	})
	fmt.Println("first tick:", err)

	stop() // no longer master: the next tick is skipped
	err = schedlock.Run(ctx, report, time.Time{}, func(ctx context.Context) error { return nil })
	fmt.Println("after stopping, skipped:", errors.Is(err, schedlock.ErrSkipped), errors.Is(err, schedlock.ErrNotMaster))
	// Output:
	// tick handled by the master, with its epoch: true
	// first tick: <nil>
	// after stopping, skipped: true true
}

// Every job of a scheduler master-only: the elector is a gocron.Elector.
func Example_everyJobMasterOnly() {
	store := membackend.New()
	defer store.Close()
	el, stop := startElector(store, "10.0.0.7")
	defer stop()
	for !el.IsMaster() {
		time.Sleep(time.Millisecond)
	}

	s, _ := gocron.NewScheduler(gocron.WithDistributedElector(el))
	defer s.Shutdown()
	ran := make(chan string)
	s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(func() { ran <- "master-only by default" }))
	s.Start()
	fmt.Println(<-ran)
	// Output:
	// master-only by default
}

// Job locks take the fleet's default durations where a job gives zero, as
// a @SchedulerLock without lockAtMostFor takes ShedLock's
// defaultLockAtMostFor. config's job-lock.* keys fill the defaults
// (cfg.JobLock); a Defaults value is an option.
func ExampleDefaults() {
	store := membackend.New()
	defer store.Close()
	id, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	defaults := schedlock.Defaults{LockAtMostFor: 10 * time.Minute, LockAtLeastFor: 30 * time.Second}
	s, _ := gocron.NewScheduler()
	defer s.Shutdown()
	def, task := gocron.DurationJob(time.Hour), gocron.NewTask(func() {})

	_, err := s.NewJob(def, task, schedlock.Locked(store, "cleanup", 0, 0, defaults, schedlock.WithInstance(id), schedlock.WithScheduler(s)))
	fmt.Println("with defaults:", err)

	// Without a default, a zero lockAtMostFor is refused.
	_, err = s.NewJob(def, task, schedlock.Locked(store, "cleanup", 0, 0, schedlock.WithInstance(id), schedlock.WithScheduler(s)))
	fmt.Println(err)
	// Output:
	// with defaults: <nil>
	// schedlock: invalid argument: job lock "cleanup": lockAtMostFor is 0 and there is no default: give the job its own, or pass schedlock.Defaults (config key job-lock.default-lock-at-most-for)
}
