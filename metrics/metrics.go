package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Other is the lock label of every lock key that WithLockKeys and
// WithLockLabel leave unnamed.
const Other = "other"

// Buckets of the histograms, in seconds.
var (
	// latencyBuckets: one store round trip (a claim, a renewal).
	latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
	// waitBuckets: from a lock call to its grant or refusal, which may
	// include waiting behind other holders.
	waitBuckets = []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300}
	// holdBuckets: how long a lock was held or a job ran.
	holdBuckets = []float64{.001, .01, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}
)

// Label names.
const (
	labelApp      = "app"
	labelTenant   = "tenant"
	labelInstance = "instance_id"
	labelLock     = "lock"
	labelJob      = "job"
)

// Metrics turns what baton's electors, lockers and job gates report to
// their observers into Prometheus metrics. Create it once per registry
// with New; its Role, Lock and Job options (or the observer functions
// behind them) feed it, and any number of electors, lockers and gates may
// share it. It is a prometheus.Collector and safe for concurrent use.
type Metrics struct {
	lockLabel func(key string) string
	now       func() time.Time

	// role, per elector: app, tenant, instance_id (+ to, result)
	roleMaster      *prometheus.Desc
	roleEpoch       *prometheus.Desc
	roleMasterless  *prometheus.Desc
	roleTransitions *prometheus.CounterVec
	roleClaims      *prometheus.CounterVec
	roleChanges     *prometheus.CounterVec
	roleRenewal     *prometheus.HistogramVec
	roleFailures    *prometheus.CounterVec

	// locks: app, tenant, lock (+ reason)
	lockAcquired   *prometheus.CounterVec
	lockAcquire    *prometheus.HistogramVec
	lockWait       *prometheus.HistogramVec
	lockHandovers  *prometheus.CounterVec
	lockRefusals   *prometheus.CounterVec
	lockExtensions *prometheus.CounterVec
	lockLost       *prometheus.CounterVec
	lockHold       *prometheus.HistogramVec

	// jobs: app, tenant, job (+ reason)
	jobRuns    *prometheus.CounterVec
	jobSkipped *prometheus.CounterVec
	jobLost    *prometheus.CounterVec
	jobRun     *prometheus.HistogramVec

	// backend: app, tenant, component, op
	backendErrors *prometheus.CounterVec

	mu    sync.Mutex
	roles map[string]*roleState // instance ID -> its elector's state
}

// Option configures Metrics.
type Option func(*settings)

type settings struct {
	keys  map[string]bool
	label func(string) string
	now   func() time.Time
}

// WithLockKeys lets each of keys (a lock key as the caller gives it to
// synclock: "nightly-export", or Do's function name) be the value of the
// lock label of its own metrics. Every key neither listed here nor named
// by WithLockLabel is counted under the label "other", so that locks on
// per-entity keys ("invoice:42") never make a series each.
func WithLockKeys(keys ...string) Option {
	return func(s *settings) {
		if s.keys == nil {
			s.keys = make(map[string]bool)
		}
		for _, k := range keys {
			s.keys[k] = true
		}
	}
}

// WithLockLabel makes f name the lock label of each lock key that
// WithLockKeys does not list: f("invoice:42") might return "invoice".
// An empty result means "other". f must return few distinct values — each
// one is a set of series — and must be safe for concurrent use.
func WithLockLabel(f func(key string) string) Option {
	return func(s *settings) { s.label = f }
}

// withNow makes Metrics read the time from now; the tests move it.
func withNow(now func() time.Time) Option {
	return func(s *settings) { s.now = now }
}

// New returns the metrics and registers them with reg as one collector,
// so calling New twice on one registry fails with
// prometheus.AlreadyRegisteredError. With a nil reg nothing is
// registered: register the returned value (a prometheus.Collector)
// yourself.
func New(reg prometheus.Registerer, opts ...Option) (*Metrics, error) {
	var s settings
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	m := &Metrics{now: s.now, roles: make(map[string]*roleState)}
	if m.now == nil {
		m.now = time.Now
	}
	m.lockLabel = lockLabeler(s.keys, s.label)
	m.newRoleMetrics()
	m.newLockMetrics()
	m.newJobMetrics()
	m.backendErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_backend_errors_total",
		Help: "Store errors seen by baton, by component (role, lock, job) and operation (acquire, renew, release).",
	}, []string{labelApp, labelTenant, "component", "op"})

	if reg != nil {
		if err := reg.Register(m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// lockLabeler returns the function that names a lock key's lock label:
// the key itself if keys lists it, else what label returns, else Other.
func lockLabeler(keys map[string]bool, label func(key string) string) func(key string) string {
	return func(key string) string {
		if keys[key] {
			return key
		}
		if label != nil {
			if l := label(key); l != "" {
				return l
			}
		}
		return Other
	}
}

// newRoleMetrics creates the elector's metrics.
func (m *Metrics) newRoleMetrics() {
	roleLabels := []string{labelApp, labelTenant, labelInstance}
	m.roleMaster = prometheus.NewDesc("baton_role_is_master",
		"1 while this elector's instance is the master, 0 otherwise.", roleLabels, nil)
	m.roleEpoch = prometheus.NewDesc("baton_role_epoch",
		"The highest role epoch (fencing token of a tenure) the elector has seen: its own tenure's while master.", roleLabels, nil)
	m.roleMasterless = prometheus.NewDesc("baton_role_masterless_seconds_total",
		"Seconds the elector ran without knowing of a master: from its start or its demotion until it learnt of one.", roleLabels, nil)
	m.roleTransitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_role_transitions_total",
		Help: "Role changes of the elector's instance, by the role it changed to (master or slave).",
	}, append(roleLabels, "to"))
	m.roleClaims = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_role_claims_total",
		Help: "Claims of the role that came back, by result: granted, held (by another, or by nobody while the store recovers) or error.",
	}, append(roleLabels, "result"))
	m.roleChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_role_master_changes_total",
		Help: "Changes of master the elector learnt of, including to its own instance.",
	}, roleLabels)
	m.roleRenewal = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "baton_role_renewal_seconds",
		Help:    "Round trip of the master's successful lease renewals.",
		Buckets: latencyBuckets,
	}, roleLabels)
	m.roleFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_role_renewal_failures_total",
		Help: "Failed lease renewals of the master: store errors, lost leases and renewals with no reply before the tenure's deadline.",
	}, roleLabels)
}

// newLockMetrics creates the locks' metrics.
func (m *Metrics) newLockMetrics() {
	lockLabels := []string{labelApp, labelTenant, labelLock}
	m.lockAcquired = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_lock_acquired_total",
		Help: "Locks acquired.",
	}, lockLabels)
	m.lockAcquire = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "baton_lock_acquire_seconds",
		Help:    "Time from a lock call to the grant, for calls that got the lock, waiting behind other holders included.",
		Buckets: waitBuckets,
	}, lockLabels)
	m.lockWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "baton_lock_wait_seconds",
		Help:    "Time from a lock call to its refusal, for calls that did not get the lock (TryLock, retries run out, context ended).",
		Buckets: waitBuckets,
	}, lockLabels)
	m.lockHandovers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_lock_handovers_total",
		Help: "Locks acquired by a handover from the releasing holder rather than by a claim.",
	}, lockLabels)
	m.lockRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_lock_refusals_total",
		Help: "Lock calls that did not get the lock, by reason: locked, timeout, disabled or error.",
	}, append(lockLabels, "reason"))
	m.lockExtensions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_lock_extensions_total",
		Help: "Lease extensions of running sections.",
	}, lockLabels)
	m.lockLost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_lock_lost_total",
		Help: "Leases that ended, or were about to, while their section ran.",
	}, lockLabels)
	m.lockHold = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "baton_lock_hold_seconds",
		Help:    "Time from a lock's grant to its release.",
		Buckets: holdBuckets,
	}, lockLabels)
}

// newJobMetrics creates the job gates' metrics.
func (m *Metrics) newJobMetrics() {
	jobLabels := []string{labelApp, labelTenant, labelJob}
	m.jobRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_job_runs_total",
		Help: "Job runs the gate admitted.",
	}, jobLabels)
	m.jobSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_job_skipped_total",
		Help: "Job runs the gate skipped, by reason: not-master, not-slave, disabled, locked, recovering, already-ran or unavailable.",
	}, append(jobLabels, "reason"))
	m.jobLost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "baton_job_lost_total",
		Help: "Job runs that lost their role or their job lock's lease while they ran.",
	}, jobLabels)
	m.jobRun = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "baton_job_run_seconds",
		Help:    "Time from a run's admission to its end.",
		Buckets: holdBuckets,
	}, jobLabels)
}

// collectors returns the metric vectors, for Describe and Collect.
func (m *Metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.roleTransitions, m.roleClaims, m.roleChanges, m.roleRenewal, m.roleFailures,
		m.lockAcquired, m.lockAcquire, m.lockWait, m.lockHandovers, m.lockRefusals,
		m.lockExtensions, m.lockLost, m.lockHold,
		m.jobRuns, m.jobSkipped, m.jobLost, m.jobRun,
		m.backendErrors,
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.roleMaster
	ch <- m.roleEpoch
	ch <- m.roleMasterless
	for _, c := range m.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.collectRoles(ch)
	for _, c := range m.collectors() {
		c.Collect(ch)
	}
}
