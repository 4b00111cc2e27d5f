// Package metrics turns what baton's electors, lockers and job gates
// report into Prometheus metrics. It is the only baton package that
// imports the Prometheus client: role, synclock and schedlock report to
// plain observer functions (role.WithObserver, synclock.WithObserver,
// schedlock.WithObserver), and this package supplies those functions.
// It is a module of its own (go get github.com/baton-go/baton/metrics),
// so that a service without Prometheus does not pull the client.
//
// # Wiring
//
// Create one Metrics per registry and pass its options where the elector,
// the locker and the gates are made:
//
//	m, err := metrics.New(prometheus.DefaultRegisterer)
//	el, err := role.NewElector(store, id, cfg.Role, m.Role(id))
//	lk, err := synclock.NewLocker(store, id, cfg.Lock, m.Lock(id))
//	s.NewJob(def, task, schedlock.MasterOnly(el, m.Job(id)))
//
// New registers everything once, as one collector; Role, Lock and Job
// register nothing, so any number of electors, lockers and gates can
// share one Metrics. RoleObserver, LockObserver and JobObserver return
// the bare observer functions, for code that has an observer of its own
// and calls both.
//
// # Metrics
//
// Role, per elector (labels app, tenant, instance_id):
//
//	baton_role_is_master                 gauge      1 while master, else 0
//	baton_role_epoch                     gauge      highest epoch seen
//	baton_role_transitions_total{to}     counter    became master / slave
//	baton_role_claims_total{result}      counter    granted, held, error
//	baton_role_master_changes_total      counter    changes of master learnt of
//	baton_role_renewal_seconds           histogram  successful renewals' round trip
//	baton_role_renewal_failures_total    counter    failed renewals
//	baton_role_masterless_seconds_total  counter    time run without knowing a master
//
// Locks (labels app, tenant, lock):
//
//	baton_lock_acquired_total            counter    locks acquired
//	baton_lock_acquire_seconds           histogram  call to grant
//	baton_lock_wait_seconds              histogram  call to refusal
//	baton_lock_handovers_total           counter    grants handed over by a release
//	baton_lock_refusals_total{reason}    counter    locked, timeout, disabled, error
//	baton_lock_extensions_total          counter    lease extensions
//	baton_lock_lost_total                counter    leases lost while the section ran
//	baton_lock_hold_seconds              histogram  grant to release
//
// Jobs (labels app, tenant, job):
//
//	baton_job_runs_total                 counter    runs admitted
//	baton_job_skipped_total{reason}      counter    not-master, not-slave, disabled, locked, recovering, already-ran, unavailable
//	baton_job_lost_total                 counter    runs that lost their role or lease
//	baton_job_run_seconds                histogram  admission to end
//
// Store errors (labels app, tenant, component, op):
//
//	baton_backend_errors_total           counter    component role, lock or job; op acquire, renew or release
//
// An elector's series, and the store-error series of each observer,
// exist (at 0) from the call of Role, Lock or Job (or the observer
// functions) on; a lock's or a job's series from its first event.
//
// # Label cardinality
//
// Every label value comes from a bounded set. app, tenant and
// instance_id name the instances of this process; job is a job's name,
// which the program fixes when it schedules its jobs; reasons and results
// are fixed words. A lock key is not bounded (locks on "invoice:42" make
// one key per invoice), so it becomes a lock label only when the user
// allows it: WithLockKeys lists keys that are their own label, and
// WithLockLabel maps keys to a few labels ("invoice:42" to "invoice").
// Every other key is counted under "other".
//
// # What the numbers mean
//
// The metrics follow the events, not the store. baton_role_is_master
// turns 1 when the elector reports its election and 0 when it reports the
// end of the tenure; the events are queued on the elector's callback
// goroutine, so the gauge trails IsMaster by that queue, and
// Elector.IsMaster stays the answer to act on. One elector per instance
// ID should feed one Metrics: two with one ID share their series.
//
// Masterless time counts, for each elector, from its first event (its
// first claim) or its demotion until it learns of a master — its own
// election, a change of master, or a refused claim that names a holder —
// and again from a refused claim that names no holder (a store that
// grants the role to nobody while it recovers); it stops when the
// election stops. A slave whose master crashed still names that master
// until its next claim, so the gap between a crash and the next claim is
// not counted.
//
// There is no hook in the stores themselves, so store errors are derived
// from the events' errors: a role claim that failed other than by being
// held (op acquire), a renewal that failed other than by the lease being
// gone — no reply before the tenure's deadline included (op renew); a
// lock call refused by a store error (op acquire), a release that failed
// other than by a lapsed lease (op release); a job skipped because its
// lock store was unavailable (op acquire) and a job lock release that
// failed (op release). Failures no event reports are not counted: a
// failed lease extension that a later one made good, the role's release
// at the end of Run, member heartbeats, watches.
//
// baton_lock_lost_total counts leases reported lost while a section ran;
// a lease found gone only by the release is counted by neither it nor
// the store errors.
package metrics
