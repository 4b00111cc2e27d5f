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
// # Gates
//
// Each option installs a gate as the job's gocron.Locker: gocron asks it
// before every run, and a refusal skips that run (the job is
// rescheduled). A job has one locker, so one schedlock option carries all
// of a job's conditions; a second locker makes NewJob fail
// (gocron.WithDistributedJobLocker after a schedlock option replaces it
// unseen). A scheduler whose every job is master-only can instead take
// gocron.WithDistributedElector(el).
//
// A master-only run is admitted while el holds a tenure, a clock-based
// answer that turns false before the role key can expire on the store. A
// slave-only run is admitted while the elector runs, the role is enabled,
// this instance is not the master and it has seen another instance hold
// the role. With the role disabled neither runs.
//
// A job lock lives at {tenant:app}:job:<name>. A run takes it with
// lockAtMostFor as the lease, or is skipped with ErrLocked; when the run
// ends the lock is released but kept, by the store's clock, until
// lockAtLeastFor after the grant. Each acquisition has its own owner
// string (instance ID and a random nonce) and release is owner-checked,
// so a late release never frees a newer holder's lock; each grant carries
// a fencing token. The instance comes from WithInstance or the job's
// elector, never from a package default.
//
// # While a job runs
//
// A gate checks its condition when a run starts; a run already started is
// not stopped by a demotion or a lapsed lease: the job has to look, with
// the context gocron passes to a task whose first parameter is a
// context.Context. Assert(ctx) says whether the run still holds its gate
// (no I/O); Extend(ctx, d) renews the job lock, bounded by the lease's
// local deadline (a reply after it is void, and the run stays lost);
// Context(ctx) is cancelled, with a cause wrapping ErrLost, when the
// mastership ends (at once), a slave becomes master (within about 10ms)
// or the lease lapses (a margin before the store could expire it: a
// tenth of lockAtMostFor, at most 1s; internal/lease holds the rule);
// Token(ctx) is the lock's fencing token, or a master-only run's epoch;
// Fire(ctx) the time the run was scheduled for.
//
// Each run has its own identity: these calls answer for the run admitted
// on the calling goroutine, never for another run of the job. A run that
// outlived its lock gets no token and ErrLost even while a newer run holds
// the lock, its Extend does not touch the newer run's lease, and a
// master-only run that overlaps a demotion and re-election keeps its own
// epoch. gocron hands every run of a job the same context but calls the
// gate, the task and the unlock of one run on one goroutine, so the run is
// named by the goroutine (its ID is read from the stack header once per
// run, about a microsecond). From another goroutine, gocron's context
// speaks for the job's only run in flight; while runs overlap the calls
// fail closed with ErrNoRun. Hand other goroutines the context of
// Context: it carries its run wherever it goes. (A goroutine left running
// after its run ended, still holding gocron's context, would be answered
// for the job's next run.) gocron unlocks with the job's context, which
// Shutdown has cancelled; the release still happens, with its own timeout.
//
// # Skips are observable
//
// A refusal is a *SkipError with a Reason (ErrNotMaster, ErrNotSlave,
// ErrLocked, ErrRecovering, ErrUnavailable); errors.Is(err, ErrSkipped)
// matches all, and Label names each for logs and metrics. gocron hands it
// to the job's gocron.AfterLockError listener. Each skip is logged at
// debug level (store failures at warn), and WithObserver reports
// admissions, skips, releases and losses.
//
// # Once per fire
//
// lockAtLeastFor keeps a fast job from running twice when the instances
// fire a few milliseconds apart, but not when an instance paused (GC,
// SIGSTOP, an overloaded host) over a fire starts the overdue fire seconds
// later, after the lock was released — ShedLock then runs the fire twice.
// A job lock that knows its runs' fire times runs each fire, named by the
// time it was scheduled for, at most once across the fleet, however late
// an instance starts it. gocron tells a locker nothing of the fire, so a
// locked gocron job names its scheduler (WithScheduler, required) and the
// gate reads the job's next scheduled time, which gocron moves on only
// after the run passed its locker; Run takes the fire time as an argument.
// Every instance must name a fire by the same time, to the millisecond, as
// cron schedules and DurationJobs with a common WithStartAt do; fires that
// differ from instance to instance are still guarded by the lock.
//
// The lock remembers the latest fire run under it in a fire marker: a
// second lease, {tenant:app}:fired:<name> (in the lock's hash tag), whose
// owner string is "fire:<Unix ms>:<instance ID>", kept for the larger of
// 24h and lockAtMostFor after the latest fire. Once a run holds the lock:
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
// Only the holder of the lock changes the marker, each change while the
// run's lease is valid by its local deadline (checked before the change
// and after the reply), so runs take turns at it; a refusal means that a
// run whose lease had lapsed changed it at the same time, and every such
// race ends in a skip, never in a second run. Cost: one extra store call
// when the marker is new or its fire already ran, three when it moves on,
// two more when a recovering store refuses a fresh day-long lease; none
// for a run whose fire time is unknown. A job that has not run for 24h
// leaves nothing behind; a fire started more than 24h (or lockAtMostFor)
// after the latest recorded one — or after the store lost its data — is
// not recognised as run. A run gocron starts ahead of its schedule
// (RunNow) has no fire time; nor has a run of an option installed on
// several jobs. Java instances of a mixed fleet (springredis) neither read
// nor write the marker: they are held to ShedLock's rules.
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
// again elsewhere (a later fire); its context says so.
//
// gocron runs a job again while its last run still runs unless the job
// has gocron.WithSingletonMode: the runs then overlap on one instance,
// each with its own identity, and a job lock admits the newer run only
// once the older one's lease has lapsed.
// WithSingletonMode(gocron.LimitModeReschedule) skips a fire whose
// predecessor still runs, so the job's context names one run at a time;
// LimitModeWait queues the fire instead, and a queued run that starts
// after a later fire was due is taken for the earliest fire gocron still
// has scheduled, or for none if that is still ahead.
package schedlock
