// Package schedlock gates scheduled jobs: master-only or slave-only,
// decided before every run by the instance's role, and ShedLock-style job
// locks for jobs that must run once per fire across a fleet. One way per
// task:
//
//	// a gocron job only on the master, or only on slaves
//	s.NewJob(gocron.DurationJob(time.Minute), gocron.NewTask(sendReport), schedlock.MasterOnly(el))
//	s.NewJob(gocron.CronJob("0 * * * *", false), gocron.NewTask(warmCache), schedlock.SlaveOnly(el))
//	// a gocron job once per fire across the fleet (lockAtMostFor, lockAtLeastFor)
//	s.NewJob(def, task, schedlock.Locked(store, "nightly-export", 10*time.Minute, 30*time.Second,
//		schedlock.WithInstance(id), schedlock.WithScheduler(s)))
//	// both: master-only, and once per fire
//	s.NewJob(def, task, schedlock.MasterOnly(el, schedlock.WithLock(store, "nightly-export", 10*time.Minute, 30*time.Second), schedlock.WithScheduler(s)))
//	// inside a run: its loss-aware context, its fencing token, LockAssert, LockExtender
//	ctx, cancel := schedlock.Context(ctx); token, ok := schedlock.Token(ctx); err := schedlock.Assert(ctx); err = schedlock.Extend(ctx, d)
//	// any other scheduler: the same job option, one run at a time
//	err := schedlock.Run(ctx, job, fire, fn)
//
// docs/jobs.md is the reference behind this summary.
//
// # Gates
//
// Each option installs a gate as the job's gocron.Locker, asked before
// every run; a refusal skips the run with a *SkipError (errors.Is
// ErrSkipped; WithObserver and the job's gocron.AfterLockError see it). A
// job has one locker, so one schedlock option carries all of its
// conditions. A master-only run is admitted while el holds a tenure; a
// slave-only run while this instance is a slave that has seen a master;
// with the role disabled neither runs.
//
// A run of a locked job takes the lock {tenant:app}:job:<name> for
// lockAtMostFor, or is skipped with ErrLocked; when it ends the lock is
// released, owner-checked, but kept until lockAtLeastFor after the grant.
// Each grant carries a fencing token. The instance comes from WithInstance
// or the job's elector, never from a package default.
//
// # While a job runs
//
// A gate decides when a run starts; the job itself watches for a loss,
// with the context gocron passes it. Assert, Extend, Context, Token and
// Fire answer for the run admitted on the calling goroutine, never for
// another run of the job, and fail closed with ErrNoRun where gocron's
// shared context cannot tell overlapping runs apart; the context of
// Context carries its run to other goroutines.
//
// # Once per fire
//
// A locked job runs each fire, named by the time it was scheduled for, at
// most once across the fleet, however late an instance starts it: the
// lock records the latest fire run under it in a fire marker, a second
// lease {tenant:app}:fired:<name> owned by "fire:<Unix ms>:<instance ID>".
// Once a run holds the lock:
//
//	marker                           the run                          then
//	free                             takes it for its fire            runs
//	at its fire or a later one       leaves it                        skips: ErrLocked, already-ran
//	at an earlier fire               releases it (owner-checked),     runs
//	                                 takes it for its fire
//	release or take refused          leaves it                        skips
//	holding no fire time             leaves it                        skips: ErrUnavailable, ErrCorrupt
//	refused: the store is recovering takes it for lockAtMostFor,      runs
//	  (restart guard, a day-long       renews it to its life
//	  lease of a fresh key)
//
// # What is not promised
//
// The role is read on this instance's clock and a lease is a lease: a
// process paused between the check and the work can act after losing its
// gate; fencing tokens, not leases, protect against that. A job that
// ignores its context runs to its end after losing its gate, as under
// ShedLock. lockAtLeastFor protects against fires a little apart, not
// against schedulers whose clocks differ by more than it; the fire marker
// compares the fire times of the instances' clocks, so a scheduler whose
// clock is behind by more than the job's interval has its fires skipped.
// A job that runs longer than lockAtMostFor loses its lock and may run
// again elsewhere (a later fire); its context says so. A fire started
// more than 24h (or lockAtMostFor) after the latest recorded one, or
// after the store lost its data, is not recognised as run; a run without
// a fire time (RunNow, an option on several jobs) is guarded by the lock
// alone. Runs of a job without gocron.WithSingletonMode may overlap on one
// instance: a job lock admits the newer run only once the older one's
// lease has lapsed.
package schedlock
