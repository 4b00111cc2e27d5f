// Package schedlock gates scheduled jobs: master-only or slave-only,
// decided before every run by the instance's role, and ShedLock-style job
// locks for jobs that must run once per fire across a fleet. The gates are
// gocron v2 job options; Run offers the same to other schedulers.
//
//	s.NewJob(gocron.DurationJob(time.Minute), gocron.NewTask(sendReport), schedlock.MasterOnly(el))
//	s.NewJob(gocron.CronJob("0 * * * *", false), gocron.NewTask(warmCache), schedlock.SlaveOnly(el))
//	s.NewJob(def, task, schedlock.Locked(store, "nightly-export", 10*time.Minute, 30*time.Second, schedlock.WithInstance(id)))
//	s.NewJob(def, task, schedlock.MasterOnly(el, schedlock.WithLock(store, "nightly-export", 10*time.Minute, 30*time.Second)))
//
// # Gates
//
// A Gate is a role condition (Master, Slave or Any) plus at most one job
// lock. It is the job's gocron.Locker: gocron asks it before every run,
// with the job's name, and a refusal skips that run (gocron counts it as
// gocron.Skip and reschedules the job). gocron gives a job a single
// locker, so one schedlock option carries every condition of a job:
// MasterOnly(el, WithLock(...)) is "master-only, and once per fire". A
// second locker on the same job — two schedlock options, or
// gocron.WithDistributedJobLocker before one — makes NewJob fail with
// ErrConflict. (gocron.WithDistributedJobLocker after a schedlock option
// replaces it unseen; gocron.WithDisabledDistributedJobLocker(true)
// disables it.) MasterOnly and SlaveOnly tag the job "master-only" or
// "slave-only", keeping tags set before them (gocron.WithTags after them
// replaces all tags).
//
// Role. A master-only run is admitted while el.IsMaster is true: the
// elector's clock-based answer, which turns false before the role key can
// expire on the store. A slave-only run is admitted while the elector
// runs, the role is enabled, this instance is not the master and it has
// seen another instance hold the role (so that an instance that is about
// to win its first election does not run slave-only work). With the role
// disabled both skip with ErrDisabled, as the seed framework had it.
//
// Job lock (ShedLock). The lock is named, and lives at
// {tenant:app}:job:<name> in the store. A run acquires it with
// lockAtMostFor as the lease — a crashed holder's lock frees itself after
// that — and is skipped with ErrLocked, not delayed, if it is held. When
// the run ends, the lock is released but kept, by the store's clock, until
// lockAtLeastFor after it was granted: a fast job fired by several
// instances whose schedulers are a few milliseconds apart runs once per
// fire. Every acquisition has its own owner string (instance ID plus a
// random nonce) and release is owner-checked, so a late release never
// frees a newer holder's lock. Each grant carries a fencing token (Token).
// A job that gives zero durations takes the fleet's defaults, as ShedLock's
// defaultLockAtMostFor and defaultLockAtLeastFor (WithDefaults; config's
// job-lock.* keys). A lock needs to know its instance — from
// WithInstance, the gate's elector or role.SetDefault — and NewJob fails,
// saying so, when none names it.
//
// # While a job runs
//
// A gate checks its condition when a run starts. A run already started is
// not stopped by a demotion or a lapsed lease: the job has to look. gocron
// passes a task whose first parameter is a context.Context the job's
// context, which is the context the gate saw; with it
//
//   - Assert(ctx) reports whether the run still holds its gate (no I/O);
//   - Extend(ctx, d) renews the job lock for long jobs (LockExtender),
//     bounded by the lease's local deadline: an extension that comes back
//     after it is void, and the run stays lost — one deadline decides the
//     run, never a timer and a late reply racing;
//   - Context(ctx) returns a context cancelled when the mastership ends (at
//     once: it follows the elector's tenure context), when a slave becomes
//     master (noticed within about 10ms), or when the lock's lease lapses (a
//     margin before the store could expire it), with a cause wrapping
//     ErrLost; Task(fn) is a task that does this for fn;
//   - Epoch(ctx) and Token(ctx) give the role epoch and the lock's fencing
//     token to pass to resources that must reject stale holders; Token
//     reports false once the run has lost its gate.
//
// A job that ignores its context runs to its end even after the gate is
// lost, exactly as under ShedLock. Leases are not mutual exclusion under
// arbitrary pauses; fencing tokens are.
//
// gocron unlocks with the job's context, which Shutdown has cancelled;
// the release still happens (it gets its own timeout, detached from that
// context), so a graceful shutdown frees the lock at once (or at
// lockAtLeastFor).
//
// # Skips are observable
//
// A refusal is a *SkipError with a Reason (ErrNotMaster, ErrNotSlave,
// ErrDisabled, ErrLocked with the holder's lease, ErrUnavailable with the
// store's error); errors.Is(err, ErrSkipped) matches all. gocron hands it
// to the job's gocron.AfterLockError listener; gocron.Monitor sees the run
// as gocron.Skip. Each skip is logged at debug level (store failures at
// warn), and WithObserver reports admissions, skips, releases and losses
// for metrics.
//
// # Which to use when
//
//   - Every job of a scheduler master-only, nothing else needed: give the
//     scheduler the elector, gocron.WithDistributedElector(el); the
//     elector is a gocron.Elector. gocron then never consults per-job
//     lockers — slave-only gates and job locks on that scheduler do
//     nothing — and its skips reach neither AfterLockError nor the
//     helpers above.
//   - A mix of master-only, slave-only, locked and ordinary jobs on one
//     scheduler, observable skips, loss-aware contexts: per-job options
//     (MasterOnly, SlaveOnly, Locked, AnyRole). A Gate without a lock can
//     also be the scheduler-wide default, gocron.WithDistributedLocker(g),
//     and per-job options take precedence over it.
//   - robfig/cron, a time.Ticker or any other loop: Run(ctx, gate, fn)
//     with a gate from NewGate.
//
// # What is not promised
//
// The role is read on this instance's clock and a lease is a lease: a
// process paused between the check and the work can act after losing its
// gate. lockAtLeastFor protects against fires a little apart, not against
// schedulers whose clocks differ by more than it. A job that runs longer
// than lockAtMostFor loses its lock and may run again elsewhere; its
// context says so. Runs of one job that overlap on one instance (gocron
// runs a job again while it still runs unless WithSingletonMode is set)
// share the job's context, so Assert, Extend and Context on that context
// speak for the newest run; a job lock never admits such an overlap while
// its lease lasts.
package schedlock
