package schedlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/internal/hook"
	"github.com/baton-go/baton/internal/lease"
	"github.com/baton-go/baton/role"
)

// cond is the role condition of a gate, named by its gocron tag.
type cond string

const (
	anyRole    cond = ""            // whatever the role: a gate with only a job lock
	masterOnly cond = "master-only" // only while this instance is the master
	slaveOnly  cond = "slave-only"  // only while it is a slave that has seen a master
)

// opTimeout bounds each call a gate makes to the lock store.
const opTimeout = 5 * time.Second

// gate decides, before every run of a job, whether the run may start
// here: its role condition holds and its job lock, if any, is free. It is
// the job's gocron.Locker, and Run's.
type gate struct {
	role   cond
	el     *role.Elector
	lock   *jobLock
	idText string // this instance's ID, for messages and lock owners
	logger *slog.Logger
	obs    func(Event)
	clock  clock.Clock
	terms  lease.Terms // the job lock's

	floor lease.Floor // the highest lock token this gate has seen

	fires fires // the gocron job whose fire times it reads

	// Set by options and read only by newGate.
	locks    int
	defaults Defaults
	id       instanceid.ID
}

var _ gocron.Locker = (*gate)(nil)

// jobLock is a gate's ShedLock-style lock.
type jobLock struct {
	store                 backend.Store
	name, key, marker     string // marker: the fire marker's key (fire.go)
	atMostFor, atLeastFor time.Duration
}

// Option configures a gated job: WithLock, WithInstance, WithScheduler,
// a Defaults value, WithLogger, WithObserver.
type Option interface{ apply(*gate) }

type optionFunc func(*gate)

func (f optionFunc) apply(g *gate) { f(g) }

// WithLock gives a role-gated job a ShedLock-style job lock as well:
// MasterOnly(el, WithLock(...)) runs once per fire on the master. The
// lock's arguments are Locked's; tenant, app and instance come from
// WithInstance if given, else from the elector.
func WithLock(store backend.Store, name string, lockAtMostFor, lockAtLeastFor time.Duration) Option {
	return optionFunc(func(g *gate) {
		g.locks++
		g.lock = &jobLock{store: store, name: name, atMostFor: lockAtMostFor, atLeastFor: lockAtLeastFor}
	})
}

// Defaults are the job-lock durations used where Locked (or WithLock) is
// given zero, as ShedLock's @EnableSchedulerLock sets them. A Defaults
// value is an Option; config's job-lock.* keys fill cfg.JobLock.
type Defaults struct {
	// LockAtMostFor is the lease of a job lock whose own lockAtMostFor is
	// zero. Zero means no default: such a lock is then an error.
	LockAtMostFor time.Duration
	// LockAtLeastFor is how long after its start a run keeps the lock
	// when its own lockAtLeastFor is zero. Zero keeps nothing.
	LockAtLeastFor time.Duration
}

func (d Defaults) apply(g *gate) { g.defaults = d }

// WithInstance names the instance a job lock belongs to: its tenant and
// app form the lock key's namespace and its ID starts every lock owner
// string. Locked needs it; a role-gated job takes its elector's instance
// unless given one.
func WithInstance(id instanceid.ID) Option {
	return optionFunc(func(g *gate) { g.id = id })
}

// WithLogger sets the logger (default slog.Default()). Skips are logged
// at debug level, store failures and lost runs at warn level.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(g *gate) {
		if l != nil {
			g.logger = l
		}
	})
}

// WithObserver reports every Event to f, synchronously on the goroutine
// that decided (gocron's executor, a timer): f must return quickly. Given
// more than once, every observer gets every event, in the order given.
func WithObserver(f func(Event)) Option {
	return optionFunc(func(g *gate) { g.obs = hook.Join(g.obs, f) })
}

// withClock runs the gate's runs on c; tests use a fake clock.
func withClock(c clock.Clock) Option {
	return optionFunc(func(g *gate) { g.clock = c })
}

// newGate returns a gate with role condition r on elector el, or one
// error listing every problem with its arguments.
func newGate(r cond, el *role.Elector, opts ...Option) (*gate, error) {
	g := &gate{role: r, el: el, clock: clock.Real, logger: slog.Default()}
	for _, o := range opts {
		if o != nil {
			o.apply(g)
		}
	}
	var errs []error
	if r != anyRole && el == nil {
		errs = append(errs, invalid("a %s job needs an elector (role.NewElector)", string(r)))
	}
	id, err := gateInstance(g.id, el)
	if err != nil {
		errs = append(errs, err)
	}
	if g.locks > 1 {
		errs = append(errs, invalid("%d job locks given; a job has at most one", g.locks))
	}
	if g.lock != nil {
		errs = append(errs, g.lock.validate(g.defaults, id)...)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	g.idText = id.String()
	if !id.IsZero() {
		g.logger = g.logger.With("app", id.App, "tenant", id.Tenant, "instance", g.idText)
	}
	if l := g.lock; l != nil {
		g.logger = g.logger.With("backend", backend.StoreName(l.store))
		g.terms = lease.Terms{Store: l.store, Alarm: lease.NewAlarm(g.clock), Margin: lease.Margin(l.atMostFor), OpTimeout: opTimeout}
	}
	return g, nil
}

// invalid is a problem with a gated job's arguments.
func invalid(format string, args ...any) error {
	return fmt.Errorf("schedlock: %w: "+format, append([]any{backend.ErrInvalidArgument}, args...)...)
}

// gateInstance is the instance a gate speaks for: the one WithInstance
// named, else the elector's, else none; never role.SetDefault's.
func gateInstance(id instanceid.ID, el *role.Elector) (instanceid.ID, error) {
	if id.IsZero() && el != nil {
		st := el.Status().Instance
		if id, err := instanceid.Parse(st); err == nil {
			return id, nil
		}
		return id, invalid("the elector's instance %q is not an instance ID", st)
	}
	if err := id.Validate(); !id.IsZero() && err != nil {
		return id, invalid("instance: %v", err)
	}
	return id, nil
}

// validate fills l's zero durations from d, applies ShedLock's rules and
// makes its keys.
func (l *jobLock) validate(d Defaults, id instanceid.ID) []error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, invalid("job lock %q: "+format, append([]any{l.name}, args...)...))
	}
	if d.LockAtMostFor < 0 || d.LockAtLeastFor < 0 {
		errs = append(errs, invalid("Defaults: lockAtMostFor %v and lockAtLeastFor %v must not be negative", d.LockAtMostFor, d.LockAtLeastFor))
	}
	l.atMostFor = cmp.Or(l.atMostFor, d.LockAtMostFor)
	l.atLeastFor = cmp.Or(l.atLeastFor, d.LockAtLeastFor)
	if l.atMostFor == 0 {
		bad("lockAtMostFor is 0 and there is no default: give the job its own, or pass schedlock.Defaults " +
			"(config key job-lock.default-lock-at-most-for)")
	}
	if l.store == nil {
		bad("nil store: pass a backend such as redisbackend.New(client)")
	}
	if l.name == "" {
		bad("the lock name is empty; name the lock (ShedLock's name)")
	}
	if err := checkDurations(l.atMostFor, l.atLeastFor); l.atMostFor != 0 && err != nil {
		bad("%v", err)
	}
	if id.IsZero() {
		bad("the instance is unknown, so the lock has no key: pass schedlock.WithInstance(id) to this option " +
			"(Locked(store, name, lockAtMostFor, lockAtLeastFor, schedlock.WithInstance(id))), " +
			"or gate the job by role (MasterOnly(el, WithLock(...)))")
		return errs
	}
	l.key = backend.AppKey(id.Tenant, id.App, "job", l.name)
	l.marker = backend.AppKey(id.Tenant, id.App, "fired", l.name)
	if err := errors.Join(backend.ValidateKey(l.key), backend.ValidateKey(l.marker)); err != nil {
		bad("name does not make a usable key: %v", err)
	}
	if err := errors.Join(backend.ValidateOwner(id.String()+"#"+nonce()), backend.ValidateOwner(markerOwner(time.Now(), id.String()))); err != nil {
		bad("instance ID is not usable as a lock owner: %v", err)
	}
	return errs
}

// checkDurations applies ShedLock's rules and backend.ValidateLease.
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

// Lock implements gocron.Locker: it admits a run of job, findable from
// the job's context while in flight (registry.go), or refuses it.
func (g *gate) Lock(ctx context.Context, job string) (gocron.Lock, error) {
	r, err := g.admit(ctx, job, g.fires.gocronFire())
	if err != nil {
		return nil, err
	}
	inflight.add(ctx, r)
	return r, nil
}

// admit decides a run for fire (zero: unknown); an admitted run must be
// ended. The role is checked before the lock is taken and after.
func (g *gate) admit(ctx context.Context, job string, fire time.Time) (*run, error) {
	epoch, skip := g.checkRole()
	if skip != nil {
		return nil, g.skipped(job, skip)
	}
	r := newRun(g, job, epoch)
	if g.lock != nil {
		if fire.UnixMilli() > 0 {
			r.fire = time.UnixMilli(fire.UnixMilli()) // the marker records milliseconds
		}
		if skip := g.acquire(ctx, r); skip != nil {
			return nil, g.skipped(job, skip)
		}
		if skip := g.confirm(ctx, r, epoch); skip != nil {
			r.h.End()
			g.release(ctx, r.h.Owner(), 0)
			return nil, g.skipped(job, skip)
		}
	}
	r.mu.Lock()
	r.admitted = true
	r.mu.Unlock()
	g.logger.Debug("schedlock: run admitted", "job", job, "gate", string(g.role), "lock", g.lockName(), "epoch", epoch, "token", r.h.Token(), "fire", r.fire)
	g.emit(Event{Kind: EventAdmitted, Job: job})
	if g.lock != nil && r.h.Over() {
		r.lose(r.leaseLost()) // the deadline came while the run was confirmed
	}
	return r, nil
}

// confirm checks, once the lock is taken, that the role still holds and
// that the run's fire has not run yet (fire.go).
func (g *gate) confirm(ctx context.Context, r *run, epoch uint64) *SkipError {
	ep, skip := g.checkRole()
	switch {
	case skip != nil:
		return skip
	case ep != epoch:
		return g.notMaster()
	case r.fire.IsZero():
		return nil
	}
	return g.markFire(ctx, r)
}

// checkRole checks the role condition without I/O. For masterOnly it
// returns the tenure's epoch.
func (g *gate) checkRole() (uint64, *SkipError) {
	switch g.role {
	case masterOnly:
		if _, ep, ok := g.el.Tenure(); ok {
			return ep, nil
		}
		return 0, g.notMaster()
	case slaveOnly:
		if g.el.IsMaster() {
			return 0, skip(ErrNotSlave, "%s is the master", g.idText)
		}
		return 0, g.roleSkip(ErrNotSlave, "is not a slave")
	}
	return 0, nil
}

func (g *gate) notMaster() *SkipError { return g.roleSkip(ErrNotMaster, "is not the master") }

// roleSkip says, from the elector's status, why this instance is not
// what the gate needs (reason); nil for a slave that has seen its master.
func (g *gate) roleSkip(reason error, what string) *SkipError {
	st := g.el.Status()
	var why string
	switch {
	case !st.Enabled:
		e := skip(reason, "the role is disabled (scheduler-lock.enabled=false), so %s jobs never run", string(g.role))
		e.label = "disabled"
		return e
	case !st.Running:
		why = ": its elector is not running"
	case st.Master == st.Instance:
		why = ": its mastership is ending"
	case reason == ErrNotSlave && st.IsMaster:
		why = ": it is the master"
	case !st.RecoveringUntil.IsZero() && (reason == ErrNotMaster || st.Master == ""):
		return recovering(st.Instance+" "+what+": ", "the role", time.Until(st.RecoveringUntil))
	case st.Master == "":
		why = " (no master seen)"
	case reason == ErrNotMaster:
		why = " (the master is " + st.Master + ")"
	default:
		return nil
	}
	return skip(reason, "%s %s%s", st.Instance, what, why)
}

// acquire takes the job lock for r.
func (g *gate) acquire(ctx context.Context, r *run) *SkipError {
	l := g.lock
	owner := g.idText + "#" + nonce()
	sent := g.clock.Now()
	ls, err := g.take(ctx, owner)
	var held *backend.HeldError
	switch {
	case err == nil:
	case errors.As(err, &held) && held.Recovering:
		return recovering("", fmt.Sprintf("job lock %q", l.key), held.Holder.TTL)
	case errors.As(err, &held):
		h := held.Holder
		g.floor.Observe(h.Token)
		return &SkipError{Reason: ErrLocked, Holder: h, detail: fmt.Sprintf("job lock %q is held by %q (token %d) for another %v", l.key, h.Owner, h.Token, h.TTL.Round(time.Millisecond))}
	default:
		// The store may have granted the lock and lost the reply: free it.
		g.release(ctx, owner, 0)
		return &SkipError{Reason: ErrUnavailable, Err: err, detail: fmt.Sprintf("cannot take job lock %q", l.key)}
	}
	g.floor.Observe(ls.Token)
	r.acquired = g.clock.Now()
	if err := r.h.Start(context.Background(), &g.terms, r, lease.Grant{Key: l.key, Owner: owner, Lease: ls, Sent: sent, TTL: l.atMostFor}); err != nil {
		g.release(ctx, owner, 0)
		return skip(ErrUnavailable, "the store granted job lock %q only after %v, too late for lockAtMostFor %v", l.key, g.clock.Since(sent).Round(time.Millisecond), l.atMostFor)
	}
	return nil
}

// take asks the store for the job lock, with the highest lock token seen
// as the floor (lease.Floor).
func (g *gate) take(ctx context.Context, owner string) (backend.Lease, error) {
	l := g.lock
	for {
		actx, cancel := context.WithTimeout(ctx, opTimeout)
		lease, err := l.store.Acquire(actx, l.key, owner, l.atMostFor, g.floor.Load())
		cancel()
		if !g.floor.Forget(err, g.logger, "schedlock", l.key) {
			return lease, err
		}
	}
}

// release is lease.Terms.Drop on the job lock, learning the holder's
// token from a refusal.
func (g *gate) release(ctx context.Context, owner string, keepFor time.Duration) error {
	err := g.terms.Drop(ctx, g.lock.key, owner, keepFor)
	var nh *backend.NotHeldError
	if errors.As(err, &nh) {
		g.floor.Observe(nh.Holder.Token)
	}
	return err
}

// skipped completes, logs and reports a refusal.
func (g *gate) skipped(job string, e *SkipError) *SkipError {
	e.Job = job
	level := slog.LevelDebug
	if e.Reason == ErrUnavailable {
		level = slog.LevelWarn
	}
	g.logger.Log(context.Background(), level, "schedlock: run skipped", "job", job, "reason", e.Label(), "err", e)
	g.emit(Event{Kind: EventSkipped, Job: job, Err: e, Reason: e.Label()})
	return e
}

func (g *gate) emit(ev Event) {
	if g.obs != nil {
		ev.Lock = g.lockName()
		g.obs(ev)
	}
}

// lockName is the job lock's name, "" without one.
func (g *gate) lockName() string {
	if g.lock == nil {
		return ""
	}
	return g.lock.name
}

// nonce makes each lock owner string unique, so that a late release
// never ends a later holder's lease.
func nonce() string { return fmt.Sprintf("%016x", rand.Uint64()) }
