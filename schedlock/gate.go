package schedlock

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/internal/clock"
	"github.com/baton-go/baton/internal/hook"
	"github.com/baton-go/baton/internal/lease"
	"github.com/baton-go/baton/role"
)

// Role is the role condition of a gate.
type Role int

const (
	// Any admits runs whatever this instance's role: a gate with only a
	// job lock, or none (which overrides a scheduler-wide locker).
	Any Role = iota
	// Master admits runs only while this instance is the master.
	Master
	// Slave admits runs only while this instance is a slave: its elector
	// runs, the role is enabled, it is not the master and it has seen
	// another instance hold the role.
	Slave
)

// Tags the gocron options add to a job, so that gated jobs are visibly
// marked (gocron's Job.Tags, RemoveByTags).
const (
	TagMasterOnly = "master-only"
	TagSlaveOnly  = "slave-only"
)

// String returns "any-role", "master-only" or "slave-only".
func (r Role) String() string {
	switch r {
	case Master:
		return TagMasterOnly
	case Slave:
		return TagSlaveOnly
	case Any:
		return "any-role"
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// DefaultOperationTimeout bounds each call a gate makes to the lock store
// unless WithOperationTimeout says otherwise.
const DefaultOperationTimeout = 5 * time.Second

// Gate decides, before every run of a job, whether the run may start on
// this instance: its role condition must hold and, if it has a job lock,
// the lock must be free. It is a gocron.Locker; the gocron options
// (MasterOnly, SlaveOnly, AnyRole, Locked, Gate.JobOption) install it on a
// job, and Run uses it for other schedulers. A Gate is safe for concurrent
// use and holds no goroutine while no run is in flight.
//
// A Gate with a job lock guards one job (or several that must never run at
// the same time, as ShedLock's lock name does): do not make it a
// scheduler-wide locker (gocron.WithDistributedLocker), or all jobs would
// share its lock. A Gate without a lock may be one.
type Gate struct {
	role      Role
	el        *role.Elector
	lock      *jobLock
	idText    string // this instance's ID, for messages and lock owners
	logger    *slog.Logger
	observer  func(Event)
	opTimeout time.Duration
	clock     clock.Clock
	terms     lease.Terms // the job lock's: store, margin, alarm (internal/lease)

	// floor is the highest lock token this gate has seen, passed to
	// Acquire so tokens keep increasing after the store lost its data.
	floor atomic.Uint64

	fires      fires       // the gocron jobs whose fire times it reads
	noFireOnce atomic.Bool // a run without a fire time was logged
}

var _ gocron.Locker = (*Gate)(nil)

// jobLock is a gate's ShedLock-style lock.
type jobLock struct {
	store      backend.Store
	name       string
	key        string
	marker     string // the fire marker's key (fire.go)
	atMostFor  time.Duration
	atLeastFor time.Duration
}

// Option configures a gate.
type Option func(*settings)

type settings struct {
	lock      *jobLock
	locks     int
	defaults  Defaults
	id        instanceid.ID
	logger    *slog.Logger
	observer  func(Event)
	opTimeout time.Duration
	sched     gocron.Scheduler
	clock     clock.Clock
}

// WithLock gives the gate a ShedLock-style job lock named name in store:
// a run takes the lock for lockAtMostFor (the lease that frees the lock
// of a crashed holder) and is skipped, not delayed, if another run holds
// it. When the run ends, the lock is kept until lockAtLeastFor after the
// run started, decided by the store's clock, so that instances whose
// schedulers fire a little apart do not run a fast job twice per fire.
//
// lockAtMostFor must be a lease a store holds, 1ms to 365 days
// (backend.ValidateLease; it is not rounded up), and not less than
// lockAtLeastFor, which may be 0. A zero duration takes the gate's default (WithDefaults),
// as a @SchedulerLock without lockAtMostFor takes ShedLock's
// defaultLockAtMostFor; without a default, a zero lockAtMostFor is an
// error and a zero lockAtLeastFor keeps nothing. Set lockAtMostFor well
// above the job's longest run: the lock lapses after it even if the job
// still runs (its context is then cancelled; see Context). Durations written as text, in Go's form or
// ISO-8601 ("PT10M", "PT30S"), are read by config.ParseDuration, and
// configuration structs hold them in config.Duration fields.
//
// The lock key is {tenant:app}:job:<name>, so the name needs to be unique
// only within the service; its fire marker (see the package doc, Once per
// fire) is {tenant:app}:fired:<name>, used when the gate knows its runs'
// fire times (WithScheduler, FireContext). Tenant and app (and the
// instance ID that starts each owner string) come from WithInstance if
// given, else from the gate's elector — never from a package default.
func WithLock(store backend.Store, name string, lockAtMostFor, lockAtLeastFor time.Duration) Option {
	return func(s *settings) {
		s.locks++
		s.lock = &jobLock{store: store, name: name, atMostFor: lockAtMostFor, atLeastFor: lockAtLeastFor}
	}
}

// Defaults are the job-lock durations a gate uses where WithLock (or
// Locked) is given zero: a fleet's defaults, as ShedLock's
// @EnableSchedulerLock(defaultLockAtMostFor, defaultLockAtLeastFor) sets
// them. config's job-lock.default-lock-at-most-for and
// job-lock.default-lock-at-least-for keys fill them (Config.JobLock).
type Defaults struct {
	// LockAtMostFor is the lease of a job lock whose own lockAtMostFor is
	// zero. Zero means no default: such a lock is then an error.
	LockAtMostFor time.Duration
	// LockAtLeastFor is how long after its start a run keeps the lock
	// when its own lockAtLeastFor is zero. Zero keeps nothing.
	LockAtLeastFor time.Duration
}

// WithDefaults gives the gate's job lock the durations of d where
// WithLock was given zero:
//
//	schedlock.Locked(store, "nightly-export", 0, 0, schedlock.WithDefaults(cfg.JobLock))
//
// A job that must keep no lock after its run while the default
// LockAtLeastFor is not zero uses a gate without WithDefaults.
func WithDefaults(d Defaults) Option {
	return func(s *settings) { s.defaults = d }
}

// WithInstance names the instance a gate's job lock belongs to: its tenant
// and app form the lock key's namespace and its ID starts every lock
// owner string. It is needed for a lock on a gate without an elector
// (AnyRole, Locked).
func WithInstance(id instanceid.ID) Option {
	return func(s *settings) { s.id = id }
}

// WithLogger sets the logger (default slog.Default()). Skips are logged
// at debug level, store failures and lost runs at warn level.
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) {
		if l != nil {
			s.logger = l
		}
	}
}

// WithObserver makes the gate report every decision to f: admitted and
// skipped runs, released locks, lost runs. f is for metrics: it is called
// synchronously on the goroutine that decided (gocron's executor, a timer)
// and must return quickly. Given more than once, every observer gets
// every decision, in the order given.
func WithObserver(f func(Event)) Option {
	return func(s *settings) { s.observer = hook.Join(s.observer, f) }
}

// withClock runs the gate's runs on c; tests use a fake clock.
func withClock(c clock.Clock) Option {
	return func(s *settings) { s.clock = c }
}

// WithOperationTimeout bounds each call to the lock store (default
// DefaultOperationTimeout).
func WithOperationTimeout(d time.Duration) Option {
	return func(s *settings) { s.opTimeout = d }
}

// NewGate returns a gate with role condition r on elector el, which may be
// nil only for Any. It checks every argument and reports all problems in
// one error wrapping ErrInvalid.
func NewGate(r Role, el *role.Elector, opts ...Option) (*Gate, error) {
	s := settings{opTimeout: DefaultOperationTimeout, clock: clock.Real}
	for _, o := range opts {
		if o != nil {
			o(&s)
		}
	}
	errs := checkRole(r, el)
	if s.opTimeout <= 0 {
		errs = append(errs, invalid("operation timeout %v must be positive", s.opTimeout))
	}
	g := &Gate{role: r, el: el, logger: s.logger, observer: s.observer, opTimeout: s.opTimeout, clock: s.clock, fires: fires{sched: s.sched}}
	if g.logger == nil {
		g.logger = slog.Default()
	}
	id := gateInstance(s.id, el)
	if !id.IsZero() {
		if err := id.Validate(); err != nil {
			errs = append(errs, invalid("instance: %v", err))
		}
		g.idText = id.String()
	}
	if s.locks > 1 {
		errs = append(errs, invalid("%d job locks given; a gate has at most one", s.locks))
	}
	if l := s.lock; l != nil {
		errs = append(errs, l.withDefaults(s.defaults)...)
		errs = append(errs, l.validate(id)...)
		g.lock = l
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if !id.IsZero() {
		g.logger = g.logger.With("app", id.App, "tenant", id.Tenant, "instance", g.idText)
	}
	if l := g.lock; l != nil {
		g.logger = g.logger.With("backend", backend.StoreName(l.store))
		g.terms = lease.Terms{Store: l.store, Alarm: lease.NewAlarm(g.clock), Margin: lease.Margin(l.atMostFor), OpTimeout: g.opTimeout}
	}
	return g, nil
}

// invalid is a problem with NewGate's arguments.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// checkRole reports what is wrong with role condition r on elector el.
func checkRole(r Role, el *role.Elector) []error {
	switch r {
	case Master, Slave:
		if el == nil {
			return []error{invalid("a %s gate needs an elector (role.NewElector)", r)}
		}
	case Any:
	default:
		return []error{invalid("unknown role %d", int(r))}
	}
	return nil
}

// gateInstance is the instance a gate speaks for: the one WithInstance
// named, else the elector's, else none. It never reads role.SetDefault's elector: a
// gate's instance is what its own options name.
func gateInstance(id instanceid.ID, el *role.Elector) instanceid.ID {
	if id.IsZero() && el != nil {
		id, _ = instanceid.Parse(el.Status().Instance) // an elector's own ID always parses
	}
	return id
}

// withDefaults gives l the fleet's defaults (WithDefaults) for the
// durations it left at zero, and reports what is wrong with them.
func (l *jobLock) withDefaults(d Defaults) []error {
	var errs []error
	if d.LockAtMostFor < 0 || d.LockAtLeastFor < 0 {
		errs = append(errs, invalid("WithDefaults: lockAtMostFor %v and lockAtLeastFor %v must not be negative", d.LockAtMostFor, d.LockAtLeastFor))
	}
	if l.atMostFor == 0 {
		l.atMostFor = d.LockAtMostFor
		if l.atMostFor == 0 {
			errs = append(errs, invalid("job lock %q: lockAtMostFor is 0 and there is no default: give the job its own, or pass WithDefaults "+
				"(config key job-lock.default-lock-at-most-for)", l.name))
		}
	}
	if l.atLeastFor == 0 {
		l.atLeastFor = d.LockAtLeastFor
	}
	return errs
}

func (l *jobLock) validate(id instanceid.ID) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: job lock %q: "+format, append([]any{ErrInvalid, l.name}, args...)...))
	}
	if l.store == nil {
		bad("nil store: pass a backend such as redisbackend.New(client)")
	}
	if l.name == "" {
		bad("the lock name is empty; name the lock (ShedLock's name)")
	}
	if l.atMostFor != 0 { // a zero lockAtMostFor was reported with its default
		if err := checkDurations(l.atMostFor, l.atLeastFor); err != nil {
			bad("%v", err)
		}
	}
	if id.IsZero() {
		bad("the instance is unknown, so the lock has no key: pass schedlock.WithInstance(id) to this option " +
			"(Locked(store, name, lockAtMostFor, lockAtLeastFor, schedlock.WithInstance(id))), " +
			"or gate the job by role (MasterOnly(el, WithLock(...)))")
		return errs
	}
	l.key = backend.AppKey(id.Tenant, id.App, "job", l.name)
	l.marker = markerKey(id.Tenant, id.App, l.name)
	if err := errors.Join(backend.ValidateKey(l.key), backend.ValidateKey(l.marker)); err != nil {
		bad("name does not make a usable key: %v", err)
	}
	if err := errors.Join(backend.ValidateOwner(id.String()+"#"+nonce()), backend.ValidateOwner(markerOwner(time.Now(), id.String()))); err != nil {
		bad("instance ID is not usable as a lock owner: %v", err)
	}
	return errs
}

// checkDurations applies ShedLock's rules to a lock's durations, and
// refuses a lockAtMostFor no store holds (backend.ValidateLease: 1 ms to
// 365 days), which would otherwise fail on every run.
func checkDurations(atMostFor, atLeastFor time.Duration) error {
	if err := backend.ValidateLease("lockAtMostFor", atMostFor); err != nil {
		return err
	}
	if atLeastFor < 0 {
		return fmt.Errorf("lockAtLeastFor %v is negative", atLeastFor)
	}
	if atMostFor < atLeastFor {
		return fmt.Errorf("lockAtMostFor %v is less than lockAtLeastFor %v", atMostFor, atLeastFor)
	}
	return nil
}

// Role returns the gate's role condition.
func (g *Gate) Role() Role { return g.role }

// LockKey returns the store key of the gate's job lock, or "" if it has
// none.
func (g *Gate) LockKey() string {
	if g.lock == nil {
		return ""
	}
	return g.lock.key
}

// Lock implements gocron.Locker: gocron calls it before every run of the
// job with the job's context and name. It returns a *SkipError (which
// gocron hands to AfterLockError) when the role condition fails or the job
// lock is held or unreachable; otherwise the returned gocron.Lock must be
// unlocked when the run ends, which gocron does.
//
// The role is checked first, without I/O; a lock is then acquired, and the
// role checked again so that a mastership lost during the round trip does
// not admit the run. While the run is in flight, the job's context leads
// to it: Assert, Extend, Context, Epoch, Token and Fire accept it, and
// tell overlapping runs apart by the goroutine that called Lock, which
// gocron also runs the task on. With a job lock whose gate knows the
// run's fire time (WithScheduler), a run for a fire already run under the
// lock is skipped with ErrFireDone.
func (g *Gate) Lock(ctx context.Context, job string) (gocron.Lock, error) {
	r, err := g.admit(ctx, job)
	if err != nil {
		return nil, err
	}
	inflight.add(ctx, r)
	return r, nil
}

// label names the gate for a run started by Run.
func (g *Gate) label() string {
	if g.lock != nil {
		return g.lock.name
	}
	return g.role.String()
}

// admit decides a run: nil error means it may start and the run must be
// ended.
func (g *Gate) admit(ctx context.Context, job string) (*run, error) {
	epoch, skip := g.checkRole()
	if skip != nil {
		return nil, g.skipped(job, skip)
	}
	r := newRun(g, job, epoch)
	if g.lock != nil {
		r.fire = g.fireOf(ctx)
		if skip := g.acquire(ctx, r); skip != nil {
			r.cancel(skip)
			return nil, g.skipped(job, skip)
		}
		if skip := g.confirm(ctx, r, epoch); skip != nil {
			r.h.End()
			g.release(ctx, r.h.Owner(), 0)
			r.cancel(skip)
			return nil, g.skipped(job, skip)
		}
	}
	r.mu.Lock()
	r.admitted = true
	r.mu.Unlock()
	g.logger.Debug("schedlock: run admitted", "job", job, "gate", g.role.String(), "lock", g.LockKey(), "epoch", epoch, "token", r.h.Token(), "fire", r.fire)
	g.emit(Event{Kind: EventAdmitted, Job: job})
	if g.lock != nil && r.h.Over() {
		r.lose(r.leaseLost()) // the deadline came while the run was confirmed
	}
	return r, nil
}

// confirm checks, once the lock is taken, what admits the run besides it:
// the role still holds (mastership may have ended during the round trip)
// and the run's fire has not run yet (fire.go).
func (g *Gate) confirm(ctx context.Context, r *run, epoch uint64) *SkipError {
	if ep, skip := g.checkRole(); skip != nil || ep != epoch {
		if skip == nil {
			skip = g.notMaster()
		}
		return skip
	}
	if r.fire.IsZero() {
		return nil
	}
	return g.markFire(ctx, r)
}

// checkRole checks the role condition without I/O. For Master it returns
// the tenure's epoch.
func (g *Gate) checkRole() (uint64, *SkipError) {
	switch g.role {
	case Master:
		if _, ep, ok := g.el.Tenure(); ok {
			return ep, nil
		}
		return 0, g.notMaster()
	case Slave:
		return 0, g.notSlave()
	}
	return 0, nil
}

func (g *Gate) notMaster() *SkipError {
	st := g.el.Status()
	switch {
	case !st.Enabled:
		return &SkipError{Reason: ErrDisabled, detail: "the role is disabled (scheduler-lock.enabled=false), so master-only jobs never run"}
	case !st.Running:
		return &SkipError{Reason: ErrNotMaster, detail: fmt.Sprintf("%s is not the master: its elector is not running", st.Instance)}
	case st.Master == st.Instance:
		return &SkipError{Reason: ErrNotMaster, detail: fmt.Sprintf("%s is not the master: its mastership is ending", st.Instance)}
	case !st.RecoveringUntil.IsZero():
		return &SkipError{Reason: ErrRecovering, detail: fmt.Sprintf("%s is not the master: %s", st.Instance, recoveringDetail("the role", time.Until(st.RecoveringUntil)))}
	case st.Master == "":
		return &SkipError{Reason: ErrNotMaster, detail: fmt.Sprintf("%s is not the master (no master seen)", st.Instance)}
	}
	return &SkipError{Reason: ErrNotMaster, detail: fmt.Sprintf("%s is not the master (the master is %s)", st.Instance, st.Master)}
}

// notSlave returns why this instance is not a slave now, or nil if it is.
func (g *Gate) notSlave() *SkipError {
	if g.el.IsMaster() {
		return &SkipError{Reason: ErrNotSlave, detail: fmt.Sprintf("%s is the master", g.idText)}
	}
	st := g.el.Status()
	var why string
	switch {
	case !st.Enabled:
		return &SkipError{Reason: ErrDisabled, detail: "the role is disabled (scheduler-lock.enabled=false), so slave-only jobs never run"}
	case !st.Running:
		why = "its elector is not running"
	case st.IsMaster:
		why = "it is the master"
	case st.Master == "" && !st.RecoveringUntil.IsZero():
		return &SkipError{Reason: ErrRecovering, detail: fmt.Sprintf("%s is not a slave (no master): %s", st.Instance, recoveringDetail("the role", time.Until(st.RecoveringUntil)))}
	case st.Master == "":
		why = "it has seen no master yet"
	case st.Master == st.Instance:
		why = "its mastership is ending"
	default:
		return nil
	}
	return &SkipError{Reason: ErrNotSlave, detail: fmt.Sprintf("%s is not a slave: %s", st.Instance, why)}
}

// acquire takes the job lock for r.
func (g *Gate) acquire(ctx context.Context, r *run) *SkipError {
	l := g.lock
	owner := g.idText + "#" + nonce()
	sent := g.clock.Now()
	ls, err := g.take(ctx, owner)
	var held *backend.HeldError
	switch {
	case err == nil:
	case errors.As(err, &held) && held.Recovering:
		return &SkipError{Reason: ErrRecovering, detail: recoveringDetail(fmt.Sprintf("job lock %q", l.key), held.Holder.TTL)}
	case errors.As(err, &held):
		g.observe(held.Holder.Token)
		return &SkipError{Reason: ErrLocked, Holder: held.Holder, detail: lockedDetail(l.key, held.Holder)}
	default:
		// The store may have granted the lock and lost the reply: free it
		// rather than leave it held for lockAtMostFor.
		g.release(ctx, owner, 0)
		return &SkipError{Reason: ErrUnavailable, Err: err, detail: fmt.Sprintf("cannot take job lock %q", l.key)}
	}
	g.observe(ls.Token)
	r.acquired = g.clock.Now()
	if err := r.h.Start(context.Background(), &g.terms, r, lease.Grant{Key: l.key, Owner: owner, Lease: ls, Sent: sent, TTL: l.atMostFor}); err != nil {
		g.release(ctx, owner, 0)
		return &SkipError{Reason: ErrUnavailable, detail: fmt.Sprintf("the store granted job lock %q only after %v, too late for lockAtMostFor %v", l.key, g.clock.Since(sent).Round(time.Millisecond), l.atMostFor)}
	}
	return nil
}

// take asks the store for the job lock, with the highest lock token seen
// as the floor. A floor the store refuses as beyond any token it can have
// granted (learnt from forged data, or from a store whose clock went back
// by more than backend.MaxTokenLead) is forgotten, so that it never locks
// the job out, and the lock asked for again without it.
func (g *Gate) take(ctx context.Context, owner string) (backend.Lease, error) {
	l := g.lock
	for {
		floor := g.floor.Load()
		actx, cancel := context.WithTimeout(ctx, g.opTimeout)
		lease, err := l.store.Acquire(actx, l.key, owner, l.atMostFor, floor)
		cancel()
		if !errors.Is(err, backend.ErrFloorAhead) || floor == 0 {
			return lease, err
		}
		g.floor.CompareAndSwap(floor, 0)
		g.logger.Warn("schedlock: the store refused the highest lock token seen as the floor; forgetting it", "lock", l.key, "floor", floor, "err", err)
	}
}

// release ends owner's lease on the job lock, keeping the key keepFor
// longer. It works after ctx ended (gocron unlocks with the job's context,
// which Shutdown has cancelled).
func (g *Gate) release(ctx context.Context, owner string, keepFor time.Duration) error {
	err := g.terms.Drop(ctx, g.lock.key, owner, keepFor)
	var nh *backend.NotHeldError
	if errors.As(err, &nh) {
		g.observe(nh.Holder.Token)
	}
	return err
}

func (g *Gate) observe(token uint64) {
	for {
		old := g.floor.Load()
		if token <= old || g.floor.CompareAndSwap(old, token) {
			return
		}
	}
}

// skipped completes, logs and reports a refusal.
func (g *Gate) skipped(job string, e *SkipError) *SkipError {
	e.Job = job
	if e.Reason == ErrUnavailable {
		g.logger.Warn("schedlock: run skipped", "job", job, "reason", e.Label(), "err", e)
	} else {
		g.logger.Debug("schedlock: run skipped", "job", job, "reason", e.Label(), "err", e)
	}
	g.emit(Event{Kind: EventSkipped, Job: job, Err: e})
	return e
}

func (g *Gate) emit(ev Event) {
	if g.observer == nil {
		return
	}
	ev.Role = g.role
	if g.lock != nil {
		ev.Lock = g.lock.name
	}
	g.observer(ev)
}

// nonce returns 16 random hex digits, making each lock owner string unique
// so that a late release never ends a later holder's lease.
func nonce() string {
	var b [8]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return hex.EncodeToString(b[:])
}
