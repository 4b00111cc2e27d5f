package schedlock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/testkit/testenv"
)

// skips counts the errors gocron hands to AfterLockError.
type skips struct {
	mu   sync.Mutex
	errs map[int][]error
}

func (s *skips) listener(instance int) gocron.JobOption {
	return gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.errs == nil {
			s.errs = make(map[int][]error)
		}
		s.errs[instance] = append(s.errs[instance], err)
	}))
}

// count returns how many of instance's lock errors match target.
func (s *skips) count(instance int, target error) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, err := range s.errs[instance] {
		if errors.Is(err, target) {
			n++
		}
	}
	return n
}

func (s *skips) all(instance int) []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.errs[instance])
}

const tick = 30 * time.Millisecond

// roleJob starts a scheduler for each instance of f running a job every
// tick behind a gate of role r on the instance's elector; each gate's Lock
// calls are recorded in log, its skips in sk.
func roleJob(t *testing.T, f *fleet, r schedlock.Role, name string, log *attempts, sk *skips) {
	t.Helper()
	for i, el := range f.els {
		g, err := schedlock.NewGate(r, el, quiet)
		if err != nil {
			t.Fatal(err)
		}
		s := newScheduler(t)
		_, err = s.NewJob(gocron.DurationJob(tick), gocron.NewTask(func() {}),
			gocron.WithName(name), gocron.WithDistributedJobLocker(log.locker(i, g)), sk.listener(i))
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
	}
}

// A master-only job runs on the master only, every tick, and moves with the
// role when the master stops. The gate decides somewhere inside each Lock
// call, so the checks speak of when calls began and returned: once Stop
// has returned, every call the old master begins is refused, and the new
// master's first run was decided after the old master's last one.
func TestMasterOnlyJobFollowsTheRole(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		f := newFleet(t, kind, 3, fastRole)
		f.start(t)
		m := f.master(t, -1)
		var log attempts
		var sk skips
		roleJob(t, f, schedlock.Master, "report", &log, &sk)
		waitFor(t, "the master to run the job and the slaves to skip it", func() bool {
			ok := log.admitted(m) >= 5
			for i := range 3 {
				ok = ok && (i == m || sk.count(i, schedlock.ErrNotMaster) >= 3)
			}
			return ok
		})
		for i := range 3 {
			if n := log.admitted(i); i != m && n > 0 {
				t.Fatalf("slave %d ran the master-only job %d times", i, n)
			}
		}
		for _, err := range sk.all((m + 1) % 3) {
			var skip *schedlock.SkipError
			if !errors.As(err, &skip) || skip.Job != "report" || skip.Label() != "not-master" {
				t.Fatalf("AfterLockError got %v; want a *SkipError for job report", err)
			}
		}

		// The master stops: the role and the job move to another instance.
		if err := testenv.Stop(ctxT(t), f.els[m]); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		m2 := f.master(t, m)
		waitFor(t, "the new master to run the job and the old one to try it again", func() bool {
			return log.admitted(m2) >= 5 && len(log.of(m, stopped)) >= 3
		})
		for _, a := range log.of(m, stopped) {
			if !errors.Is(a.err, schedlock.ErrNotMaster) {
				t.Fatalf("a run the stopped master began %v after Stop returned: %v; want ErrNotMaster", a.start.Sub(stopped), a.err)
			}
		}
		var last, first attempt // the old master's last run, the new one's first
		for _, a := range log.snapshot() {
			switch {
			case a.err != nil:
			case a.instance == m && a.start.After(last.start):
				last = a
			case a.instance == m2 && (first.end.IsZero() || a.end.Before(first.end)):
				first = a
			}
		}
		if first.end.Before(last.start) {
			t.Fatalf("the new master's first run returned from Lock %v before the old master's last run called it", last.start.Sub(first.end))
		}
		third := 3 - m - m2
		if n := log.admitted(third); n > 0 {
			t.Fatalf("instance %d, never master, ran the job %d times", third, n)
		}
	})
}

// A slave-only job runs on every slave and never on the master; a slave
// promoted to master refuses every run it begins once it reads as master.
func TestSlaveOnlyJobRunsOnEverySlave(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		f := newFleet(t, kind, 3, fastRole)
		f.start(t)
		m := f.master(t, -1)
		var log attempts
		var sk skips
		roleJob(t, f, schedlock.Slave, "warm-cache", &log, &sk)
		waitFor(t, "every slave to run the job and the master to skip it", func() bool {
			ok := sk.count(m, schedlock.ErrNotSlave) >= 3
			for i := range 3 {
				ok = ok && (i == m || log.admitted(i) >= 3)
			}
			return ok
		})
		if n := log.admitted(m); n > 0 {
			t.Fatalf("the master ran the slave-only job %d times", n)
		}

		// A slave promoted to master stops running it.
		if err := testenv.Stop(ctxT(t), f.els[m]); err != nil {
			t.Fatal(err)
		}
		m2 := f.master(t, m)
		promoted := time.Now() // m2 read as master before this
		waitFor(t, "the new master to skip the job", func() bool {
			return sk.count(m2, schedlock.ErrNotSlave) >= 3 && len(log.of(m2, promoted)) >= 3
		})
		for _, a := range log.of(m2, promoted) {
			if !errors.Is(a.err, schedlock.ErrNotSlave) {
				t.Fatalf("a run instance %d began %v after it read as master: %v; want ErrNotSlave", m2, a.start.Sub(promoted), a.err)
			}
		}
	})
}

// A fast locked job fired by three schedulers whose fires are up to 50ms
// apart runs once per fire with lockAtLeastFor, and again on a later
// scheduler without it: checkJobLock judges every Lock call gocron made,
// by when it began and returned, so a fire delayed on a busy machine is
// judged by when it really came.
func TestLockedJobRunsOncePerFireAcrossSchedulers(t *testing.T) {
	const (
		period = 400 * time.Millisecond
		fires  = 4
	)
	offsets := []time.Duration{0, 20 * time.Millisecond, 50 * time.Millisecond}
	forEachStore(t, func(t *testing.T, kind string) {
		for _, atLeast := range []time.Duration{250 * time.Millisecond, 0} {
			f := newFleet(t, kind, 3, fastRole)
			var log attempts
			var runs, tokens atomic.Int32
			base := time.Now().Add(300 * time.Millisecond)
			var scheds []gocron.Scheduler
			for i := range 3 {
				s, err := gocron.NewScheduler()
				if err != nil {
					t.Fatal(err)
				}
				scheds = append(scheds, s)
				g := lockGate(t, f, i, "fast", 5*time.Second, atLeast)
				_, err = s.NewJob(gocron.DurationJob(period),
					gocron.NewTask(func(ctx context.Context) {
						if _, ok := schedlock.Token(ctx); ok {
							tokens.Add(1) // gocron's job context leads to the run
						}
						runs.Add(1)
						time.Sleep(time.Millisecond)
					}),
					gocron.WithName("fast"),
					gocron.WithStartAt(gocron.WithStartDateTime(base.Add(offsets[i]))),
					gocron.WithDistributedJobLocker(log.locker(i, g)))
				if err != nil {
					t.Fatal(err)
				}
				s.Start()
			}
			time.Sleep(time.Until(base.Add(fires*period - period/4)))
			for _, s := range scheds {
				if err := s.Shutdown(); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "every run to be unlocked", log.unlocked)
			if tokens.Load() != runs.Load() {
				t.Fatalf("%d of %d runs found their token through gocron's context", tokens.Load(), runs.Load())
			}
			history := log.snapshot()
			checkJobLock(t, history, atLeast)
			t.Logf("lockAtLeastFor %v: %d tries, %d runs", atLeast, len(history), runs.Load())
		}
	})
}

// gocron's Shutdown cancels the job's context and unlocks with it; the
// lock is released all the same.
func TestShutdownReleasesTheLock(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		f := newFleet(t, kind, 1, fastRole)
		key := backend.AppKey(f.ids[0].Tenant, f.ids[0].App, "job", "blocking")
		s, err := gocron.NewScheduler()
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan struct{})
		var cause atomic.Value
		_, err = s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
			task(func(ctx context.Context) error {
				close(started)
				<-ctx.Done()
				cause.Store(context.Cause(ctx))
				return nil
			}),
			gocron.WithName("blocking"),
			schedlock.Locked(f.stores[0], "blocking", time.Minute, 0, quiet, schedlock.WithInstance(f.ids[0]), schedlock.WithScheduler(s)))
		if err != nil {
			t.Fatal(err)
		}
		s.Start()
		<-started
		if _, err := f.stores[0].Get(ctxT(t), key); err != nil {
			t.Fatalf("the running job's lock: %v", err)
		}
		if err := s.Shutdown(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the lock to be released after Shutdown", func() bool {
			_, err := f.stores[0].Get(context.Background(), key)
			return errors.Is(err, backend.ErrNotFound)
		})
		if c, _ := cause.Load().(error); !errors.Is(c, context.Canceled) {
			t.Fatalf("the job's context ended with %v; want gocron's cancellation", c)
		}
	})
}

// schedlock.Context, called in the task, hands the job a context that ends
// when mastership does.
func TestTaskContextEndsWithMastership(t *testing.T) {
	for _, kind := range []string{"mem", "redis"} {
		t.Run(kind, func(t *testing.T) { testTaskContextEndsWithMastership(t, kind) })
	}
}

func testTaskContextEndsWithMastership(t *testing.T, kind string) {
	f := newFleet(t, kind, 1, fastRole)
	f.start(t)
	f.master(t, -1)
	s := newScheduler(t)
	started := make(chan uint64, 1)
	done := make(chan error, 1)
	_, err := s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		task(func(ctx context.Context) error {
			ep, _ := schedlock.Token(ctx)
			started <- ep
			<-ctx.Done()
			done <- context.Cause(ctx)
			return nil
		}),
		gocron.WithName("tenure-work"), schedlock.MasterOnly(f.els[0], quiet))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if ep := <-started; ep == 0 || ep != f.els[0].Status().Epoch {
		t.Fatalf("Token in the task = %d; want the tenure's epoch %d", ep, f.els[0].Status().Epoch)
	}
	if err := testenv.Stop(ctxT(t), f.els[0]); err != nil {
		t.Fatal(err)
	}
	select {
	case cause := <-done:
		if !errors.Is(cause, schedlock.ErrLost) || !errors.Is(cause, schedlock.ErrNotMaster) {
			t.Fatalf("cause %v; want ErrLost and ErrNotMaster", cause)
		}
	case <-time.After(patience):
		t.Fatal("the task's context did not end with the mastership")
	}
}

func TestJobOptionsCompose(t *testing.T) {
	f := newFleet(t, "mem", 1, fastRole)
	s := newScheduler(t)
	def := gocron.DurationJob(time.Hour)
	task := gocron.NewTask(func() {})
	el, store, id := f.els[0], f.stores[0], f.ids[0]
	mustGate := func(g *schedlock.Gate, err error) *schedlock.Gate {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return g
	}

	j, err := s.NewJob(def, task, gocron.WithTags("billing"), schedlock.MasterOnly(el, schedlock.WithLock(store, "export", time.Minute, time.Second), schedlock.WithScheduler(s)))
	if err != nil {
		t.Fatal(err)
	}
	if got := j.Tags(); !slices.Equal(got, []string{"billing", "master-only"}) {
		t.Fatalf("tags %v; want the user's and master-only", got)
	}
	j, err = s.NewJob(def, task, schedlock.SlaveOnly(el))
	if err != nil || !slices.Equal(j.Tags(), []string{"slave-only"}) {
		t.Fatalf("slave-only job: %v, tags %v", err, j.Tags())
	}

	conflicts := map[string][]gocron.JobOption{
		"two gates":             {schedlock.MasterOnly(el), schedlock.Locked(store, "x", time.Minute, 0, schedlock.WithInstance(id), schedlock.WithScheduler(s))},
		"locker then gate":      {gocron.WithDistributedJobLocker(mustGate(schedlock.NewGate(schedlock.Master, el))), schedlock.SlaveOnly(el)},
		"one option used twice": {schedlock.SlaveOnly(el), schedlock.SlaveOnly(el)},
	}
	for name, opts := range conflicts {
		if _, err := s.NewJob(def, task, opts...); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("%s: NewJob = %v; want backend.ErrInvalidArgument (a second locker)", name, err)
		}
	}
	invalid := map[string]gocron.JobOption{
		"nil elector":            schedlock.MasterOnly(nil),
		"at most below at least": schedlock.Locked(store, "x", time.Second, time.Minute, schedlock.WithInstance(id)),
		"lock without scheduler": schedlock.Locked(store, "x", time.Minute, 0, schedlock.WithInstance(id)),
	}
	for name, opt := range invalid {
		if _, err := s.NewJob(def, task, opt); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("%s: NewJob = %v; want backend.ErrInvalidArgument", name, err)
		}
	}
	g := mustGate(schedlock.NewGate(schedlock.Master, el, quiet))
	if _, err := s.NewJob(def, task, g.Job()); err != nil {
		t.Fatal(err)
	}
	if len(s.Jobs()) != 3 {
		t.Fatalf("%d jobs, want the 3 accepted", len(s.Jobs()))
	}
}

// The elector works as gocron's scheduler-wide Elector too.
func TestElectorAsSchedulerElector(t *testing.T) {
	f := newFleet(t, "mem", 2, fastRole)
	f.start(t)
	m := f.master(t, -1)
	var ran [2]atomic.Int32
	for i := range 2 {
		s := newScheduler(t, gocron.WithDistributedElector(f.els[i]))
		if _, err := s.NewJob(gocron.DurationJob(tick), gocron.NewTask(func() { ran[i].Add(1) })); err != nil {
			t.Fatal(err)
		}
		s.Start()
	}
	waitFor(t, "the master to run the job", func() bool { return ran[m].Load() >= 3 })
	if n := ran[1-m].Load(); n != 0 {
		t.Fatalf("the slave ran %d times under a scheduler-wide elector", n)
	}
}

// A Locked job without an instance (no WithInstance) cannot have a lock
// key: NewJob fails, and the error says what to pass.
// The README's quick start once ignored this error and its job never ran.
func TestLockedJobWithoutInstanceFailsNewJob(t *testing.T) {
	store := membackend.New()
	defer store.Close()
	s, err := gocron.NewScheduler()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	_, err = s.NewJob(gocron.DurationJob(time.Hour), gocron.NewTask(func() {}),
		schedlock.Locked(store, "export", time.Minute, 0))
	if !errors.Is(err, backend.ErrInvalidArgument) {
		t.Fatalf("NewJob: %v; want ErrInvalid", err)
	}
	for _, want := range []string{`job lock "export"`, "schedlock.WithInstance(id)", "MasterOnly(el, WithLock(...))"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if len(s.Jobs()) != 0 {
		t.Errorf("the scheduler holds %d jobs; want none", len(s.Jobs()))
	}
}
