// Package schedlock gates scheduled jobs: master-only or slave-only,
// decided before every run by the instance's role, and job locks
// (lockAtMostFor, lockAtLeastFor) for jobs that must run once per fire
// across a fleet. The gates are
// gocron v2 job options; Run offers the same to other schedulers.
//
//	s.NewJob(gocron.DurationJob(time.Minute), gocron.NewTask(sendReport), schedlock.MasterOnly(el))
//	s.NewJob(gocron.CronJob("0 * * * *", false), gocron.NewTask(warmCache), schedlock.SlaveOnly(el))
//	s.NewJob(def, task, schedlock.Locked(store, "nightly-export", 10*time.Minute, 30*time.Second, schedlock.WithInstance(id), schedlock.WithScheduler(s)))
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
// Job lock. The lock is named, and lives at
// {tenant:app}:job:<name> in the store. A run acquires it with
// lockAtMostFor as the lease — a crashed holder's lock frees itself after
// that — and is skipped with ErrLocked, not delayed, if it is held. When
// the run ends, the lock is released but kept, by the store's clock, until
// lockAtLeastFor after it was granted: a fast job fired by several
// instances whose schedulers are a few milliseconds apart runs once per
// fire. Every acquisition has its own owner string (instance ID plus a
// random nonce) and release is owner-checked, so a late release never
// frees a newer holder's lock. Each grant carries a fencing token (Token).
// With WithScheduler the lock also runs each fire once however late it
// is started (see Once per fire). A job that gives zero durations takes the fleet's defaults, as ShedLock's
// defaultLockAtMostFor and defaultLockAtLeastFor (WithDefaults; config's
// job-lock.* keys). A lock needs to know its instance — from
// WithInstance or the gate's elector, never from a package default such as
// role.SetDefault's — and NewJob fails, saying so, when none names it.
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
//     margin before the store could expire it: a tenth of lockAtMostFor, at
//     most 1s, for the grant and every extension alike; internal/lease
//     holds the rule), with a cause wrapping
//     ErrLost; Task(fn) is a task that does this for fn;
//   - Epoch(ctx) and Token(ctx) give the role epoch and the lock's fencing
//     token to pass to resources that must reject stale holders; Token
//     reports false once the run has lost its gate; Fire(ctx) gives the
//     time the run was scheduled for.
//
// Each run has its own identity. gocron hands every run of a job the same
// context, so the context alone names the job; the run is named by the
// goroutine, since gocron calls the gate, the task and the unlock of one
// run on one goroutine (its executor's runJob; the goroutine's ID is read
// from its stack header once per run, about a microsecond). These calls answer for the run admitted on the
// calling goroutine, and never for another run of the job: a run that
// outlived its lock gets no token and ErrLost even while a newer run
// holds the lock, its Extend does not touch the newer run's lease, and a
// master-only run that overlaps a demotion and re-election keeps its own
// epoch. From another goroutine, gocron's context speaks for the job's
// only run in flight; while runs overlap it cannot tell them apart, and
// the calls fail closed with ErrOverlap (Token and Epoch report false).
// Work that runs on other goroutines should be handed the context of
// Context, called in the task, or Task's: it carries its run wherever it
// goes, and ends with it. (A goroutine left running after its run ended,
// still holding gocron's context, would be answered for the job's next
// run: gocron's context never says that a run is over.)
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
// ErrDisabled, ErrLocked with the holder's lease, ErrRecovering while the
// store grants nothing because it may have lost leases, or is new to
// baton, ErrFireDone with the fire times, ErrUnavailable with the store's
// error); errors.Is(err, ErrSkipped) matches all. Label names each
// reason for logs and metrics: not-master, not-slave, disabled, locked,
// recovering, already-ran, unavailable. A recovering skip says for how
// long, and that `batonctl init` declares a store known to hold no live
// lease whole. gocron hands it to the job's
// gocron.AfterLockError listener; gocron.Monitor sees the run
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
// # Once per fire
//
// A lock's lockAtLeastFor keeps a fast job from running twice when the
// instances fire a few milliseconds apart; it cannot help an instance
// that was paused (GC, SIGSTOP, an overloaded host) over a fire and starts
// the overdue fire seconds later, when the lock was released long ago —
// ShedLock then runs the fire twice. A gate that knows its runs' fire
// times closes that hole: the fire, named by the time it was scheduled
// for, runs at most once across the fleet, however late an instance
// starts it. A gocron job's gate learns the time from the scheduler
// (WithScheduler(s), installed on one job: the job's next scheduled time,
// which gocron moves on only after the run passed its locker); Run
// learns it from FireContext. Every instance must name a fire by the same
// time, to the millisecond, as cron schedules and DurationJobs with a
// common WithStartAt do; fires that differ from instance to instance are
// still guarded by the lock, and only later fires than the latest one run
// pass.
//
// The lock remembers the latest fire time run under it in a fire marker:
// a second lease, {tenant:app}:fired:<name> (in the lock's hash tag),
// whose owner string is "fire:<Unix ms>:<instance ID>", kept for the
// larger of MarkerTTL (24h) and lockAtMostFor after the latest fire. Once
// a run holds the lock:
//
//	marker                           the run                          then
//	free                             takes it for its fire            runs
//	at its fire or a later one       leaves it                        skips: ErrFireDone
//	at an earlier fire               releases it (owner-checked),     runs
//	                                 takes it for its fire
//	release or take refused          leaves it                        skips
//	holding no fire time             leaves it                        skips: ErrUnavailable, ErrCorrupt
//	refused: the store is recovering takes it for lockAtMostFor,      runs
//	  (restart guard, a day-long       renews it to its life
//	  lease of a fresh key)
//
// Only the holder of the lock changes the marker, each change while the
// run's lease is valid by its local deadline (checked before the change
// and after the reply), so runs take turns at it; a refusal means that a
// run whose lease had lapsed changed it at the same time, and every such
// race ends in a skip, never in a second run. A run whose fire already ran
// releases the lock at once. Cost: a run makes one extra store call when
// the marker is new or its fire already ran, three (look-and-take, release,
// take) when the marker moves on, two more when a store that may have
// lost its data refuses a fresh day-long lease; a run whose fire time is
// unknown makes none. A job that has not run for 24h leaves nothing behind; a fire
// started more than 24h (or lockAtMostFor) after the latest recorded one —
// or after the store lost its data — is not recognised as run, and runs
// if the lock is free. A run gocron starts ahead of its schedule (RunNow)
// has no fire time; so has a run of a gate installed on several jobs.
// Java instances of a mixed fleet (springredis) neither read nor write the
// marker: they are held to ShedLock's rules, as before.
//
// # What is not promised
//
// The role is read on this instance's clock and a lease is a lease: a
// process paused between the check and the work can act after losing its
// gate. lockAtLeastFor protects against fires a little apart, not against
// schedulers whose clocks differ by more than it; the fire marker compares
// the fire times of the instances' clocks, so a scheduler whose clock is
// behind by more than the job's interval has its fires skipped. A job
// that runs longer than lockAtMostFor loses its lock and may run again
// elsewhere (a later fire, or the same one where the fire time is
// unknown); its context says so.
//
// gocron runs a job again while its last run still runs unless the job
// has gocron.WithSingletonMode. Without it the runs overlap on one
// instance; each keeps its own identity (see While a job runs), and a job
// lock admits the newer run only once the older one's lease has lapsed.
// WithSingletonMode(gocron.LimitModeReschedule) skips a fire whose
// predecessor still runs, so a job's runs never overlap on an instance and
// its context names one run at a time; LimitModeWait queues the fire
// instead, and a queued run that starts after a later fire was due is
// taken for the earliest fire gocron still has scheduled, or for none if
// that is still ahead.
package schedlock
