package schedlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/internal/lease"
)

// rolePoll is how often a watched run looks at its elector (a clock read,
// no I/O) to notice that its role ended.
const rolePoll = 10 * time.Millisecond

// errEnded is the cause a run's context is cancelled with when it ends.
var errEnded = fmt.Errorf("%w: the run has ended and released its gate", ErrLost)

// run is one admitted run: what gate.Lock returns to gocron.
type run struct {
	g     *gate
	job   string
	epoch uint64    // the role epoch at admission
	base  time.Time // admission, on the gate's clock

	h        lease.Holder // the job lock's holding, when the gate has one
	fire     time.Time    // the fire the run is for; zero if unknown
	acquired time.Time    // when the grant's reply arrived

	// ctx is cancelled, with a cause wrapping ErrLost, when the run loses
	// its gate or ends; the contexts handed to the job (watchers) with it.
	ctx    context.Context
	cancel context.CancelCauseFunc

	opMu sync.Mutex // serialises Extend and the release

	mu       sync.Mutex    // guards the fields below
	admitted bool          // a loss is reported from now on
	losing   bool          // the loss is being logged and observed
	pollDone chan struct{} // closed when the role watcher has returned
	watchers map[*context.CancelCauseFunc]struct{}

	once      sync.Once
	unlockErr error
	regKey    <-chan struct{} // the registry key, nil if not registered
	gid       uint64          // the goroutine gocron admitted the run on
}

var _ gocron.Lock = (*run)(nil)

func newRun(g *gate, job string, epoch uint64) *run {
	r := &run{g: g, job: job, epoch: epoch, base: g.clock.Now()}
	r.ctx, r.cancel = context.WithCancelCause(context.Background())
	return r
}

func (r *run) expired() bool { return r.h.Left() <= 0 }

// Lost implements lease.Hooks: the job lock's holding ended before the
// release, at its deadline or on Lose.
func (r *run) Lost(cause error) error {
	if errors.Is(cause, lease.ErrExpired) {
		cause = r.leaseLost()
	}
	r.lose(cause)
	return cause
}

// Woken is unused: a run renews only when the job calls Extend.
func (r *run) Woken() {}

func (r *run) leaseLost() error {
	return fmt.Errorf("%w: job %q: the lease of job lock %q ran out (lockAtMostFor %v) while the job ran",
		ErrLost, r.job, r.g.lock.key, r.g.lock.atMostFor)
}

func (r *run) masterLost() error {
	return fmt.Errorf("%w: %w: job %q: %s is no longer the master of epoch %d", ErrLost, ErrNotMaster, r.job, r.g.idText, r.epoch)
}

// roleLost returns why the run's role condition no longer holds, or nil.
func (r *run) roleLost() error {
	switch r.g.role {
	case masterOnly:
		if _, ep, ok := r.g.el.Tenure(); !ok || ep != r.epoch {
			return r.masterLost()
		}
	case slaveOnly:
		if r.g.el.IsMaster() {
			return fmt.Errorf("%w: %w: job %q: %s became the master", ErrLost, ErrNotSlave, r.job, r.g.idText)
		}
	}
	return nil
}

// check reports whether the run still holds its gate, without I/O.
func (r *run) check() error {
	if r.ctx.Err() != nil {
		return context.Cause(r.ctx)
	}
	if err := r.roleLost(); err != nil {
		return r.lose(err)
	}
	if r.g.lock != nil && r.expired() {
		return r.lose(r.leaseLost())
	}
	return nil
}

// lose marks an admitted run lost with err, once: it logs and observes
// the loss, then cancels the run's contexts, and returns the cause the
// run ended with. A lost role leaves the job lock to the run's release.
func (r *run) lose(err error) error {
	r.mu.Lock()
	if !r.admitted || r.losing || r.ctx.Err() != nil { // r.ctx ends with the run
		r.mu.Unlock()
		return cmp.Or(context.Cause(r.ctx), err) // err: another goroutine is reporting
	}
	r.losing = true
	r.mu.Unlock()
	r.g.logger.Warn("schedlock: run lost its gate", "job", r.job, "err", err)
	r.g.emit(Event{Kind: EventLost, Job: r.job, Err: err})
	r.mu.Lock()
	r.cancelLocked(err)
	r.mu.Unlock()
	return context.Cause(r.ctx)
}

func (r *run) cancelLocked(cause error) {
	r.cancel(cause)
	for c := range r.watchers {
		(*c)(cause)
	}
	r.watchers = nil
}

// watch returns a context of parent that carries the run and ends with
// it; for a role gate it starts the role's watcher (poll).
func (r *run) watch(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(context.WithValue(parent, runKey{}, r))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		cancel(context.Cause(r.ctx))
		return ctx, func() {}
	}
	if r.watchers == nil {
		r.watchers = make(map[*context.CancelCauseFunc]struct{})
	}
	r.watchers[&cancel] = struct{}{}
	if r.g.role != anyRole && r.pollDone == nil {
		r.pollDone = make(chan struct{})
		go r.poll()
	}
	return ctx, func() {
		r.mu.Lock()
		delete(r.watchers, &cancel)
		r.mu.Unlock()
		cancel(context.Canceled)
	}
}

// poll watches the role until it is lost or the run ends (end cancels
// r.ctx, then waits for pollDone). A master-only run waits on the
// tenure's context, which ends the moment mastership does; "became
// master" has no such signal, so a slave-only run checks every rolePoll.
func (r *run) poll() {
	defer close(r.pollDone)
	if r.g.role == masterOnly {
		if tenure, epoch, ok := r.g.el.Tenure(); ok && epoch == r.epoch {
			select {
			case <-r.ctx.Done():
				return
			case <-tenure.Done():
			}
		}
		r.lose(r.masterLost())
		return
	}
	t := r.g.clock.NewTimer(rolePoll)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C():
			if err := r.roleLost(); err != nil {
				r.lose(err)
				return
			}
			t.Reset(rolePoll)
		}
	}
}

// Unlock implements gocron.Lock: it ends the run and releases the job
// lock, kept until lockAtLeastFor after the grant, also with a cancelled
// ctx. It returns an error wrapping ErrLost if the lease had lapsed
// before; calling it again returns the first result.
func (r *run) Unlock(ctx context.Context) error {
	r.once.Do(func() { r.unlockErr = r.end(ctx) })
	return r.unlockErr
}

func (r *run) end(ctx context.Context) error {
	r.opMu.Lock() // let an Extend in flight finish
	defer r.opMu.Unlock()
	r.mu.Lock()
	done := r.pollDone
	r.cancelLocked(errEnded)
	r.mu.Unlock()
	if done != nil {
		<-done
	}
	inflight.remove(r)
	var err error
	if r.g.lock != nil {
		// Past the deadline the lease is over, whatever the store holds.
		lapsed := r.expired()
		r.h.End()
		err = r.releaseLock(ctx)
		if err == nil && lapsed {
			err = r.leaseLost()
		}
	}
	r.g.emit(Event{Kind: EventReleased, Job: r.job, Held: r.g.clock.Since(r.base), Err: err})
	return err
}

func (r *run) releaseLock(ctx context.Context) error {
	g, l := r.g, r.g.lock
	keep := max(l.atLeastFor-g.clock.Since(r.acquired), 0)
	err := g.release(ctx, r.h.Owner(), keep)
	switch {
	case err == nil:
		g.logger.Debug("schedlock: job lock released", "job", r.job, "lock", l.key, "keptFor", keep)
		return nil
	case errors.Is(err, backend.ErrNotHeld):
		err = fmt.Errorf("%w: job %q: job lock %q had lapsed before the job finished (lockAtMostFor %v): %w",
			ErrLost, r.job, l.key, l.atMostFor, err)
		g.logger.Warn("schedlock: job outlived its lock", "job", r.job, "lock", l.key, "err", err)
		return err
	default:
		g.logger.Warn("schedlock: releasing a job lock failed; it lapses after lockAtMostFor", "job", r.job, "lock", l.key, "err", err)
		return fmt.Errorf("schedlock: job %q: releasing job lock %q: %w", r.job, l.key, err)
	}
}

func (r *run) extend(ctx context.Context, d time.Duration) error {
	g, l := r.g, r.g.lock
	if l == nil {
		return fmt.Errorf("%w: job %q has no job lock to extend", ErrNoRun, r.job)
	}
	if err := backend.ValidateTTL("lockAtMostFor", backend.RoundUpMillis(d)); err != nil {
		return fmt.Errorf("schedlock: extending job lock %q: %w", l.key, err)
	}
	if m := g.terms.Margin; d <= m {
		return fmt.Errorf("schedlock: extending job lock %q by %v: %w: an extension must be longer than the lease's margin %v (a tenth of lockAtMostFor %v, at most 1s)", l.key, d, backend.ErrInvalidArgument, m, l.atMostFor)
	}
	r.opMu.Lock()
	defer r.opMu.Unlock()
	if err := r.check(); err != nil {
		return err
	}
	_, err := r.h.Renew(ctx, d)
	switch {
	case err == nil:
		return context.Cause(r.ctx) // nil unless the role ended while the extension was out
	case err == lease.ErrLate:
		return r.lose(fmt.Errorf("%w: job %q: the extension of job lock %q came back after the lease's deadline, which had ended the run",
			ErrLost, r.job, l.key))
	case errors.Is(err, lease.ErrLate) || r.ctx.Err() != nil:
		return r.lose(r.leaseLost())
	case errors.Is(err, backend.ErrNotHeld):
		r.h.Lose(fmt.Errorf("%w: job %q: extending job lock %q: %w", ErrLost, r.job, l.key, err))
		return context.Cause(r.ctx)
	}
	return fmt.Errorf("schedlock: job %q: extending job lock %q: %w", r.job, l.key, err)
}

// Assert reports whether the run ctx belongs to still holds its gate
// (ShedLock's LockAssert): nil if so; an error wrapping ErrLost (and
// ErrNotMaster or ErrNotSlave for a role change) if not; ErrNoRun if ctx
// leads to no run. It does no I/O, so it cannot see a lock removed by
// hand in the store (Extend can). ctx is gocron's job context, one
// derived from it, or one from Context or Run.
func Assert(ctx context.Context) error {
	r, err := inflight.find(ctx)
	if err != nil {
		return err
	}
	return r.check()
}

// Extend renews the job lock of ctx's run (as for Assert) so that it
// lapses d from now (ShedLock's LockExtender); lockAtLeastFor still counts
// from the start. d must be longer than the lease's margin, else
// backend.ErrInvalidArgument. The call is bounded by the lease's local
// deadline: a reply after it is void. Extend fails with ErrLost, and
// cancels the run's context, if the run lost its gate or the store says
// the lock is no longer its own; with ErrNoRun for a run without a job
// lock; with the store's error, the lease unchanged, if the store cannot
// be reached.
func Extend(ctx context.Context, d time.Duration) error {
	r, err := inflight.find(ctx)
	if err != nil {
		return err
	}
	return r.extend(ctx, d)
}

// Context returns a context for the work of ctx's run (as for Assert),
// carrying the run, that ends with ctx and is cancelled with a cause
// wrapping ErrLost when the run loses its gate: at once when mastership
// ends, within rolePoll when a slave becomes master, a margin before the
// lease could lapse on the store. Call it in the task and call the
// CancelFunc when done. If ctx leads to no run, Context is
// context.WithCancel(ctx); if overlapping runs cannot be told apart, its
// context is already cancelled with a cause wrapping ErrNoRun.
func Context(ctx context.Context) (context.Context, context.CancelFunc) {
	r, err := inflight.find(ctx)
	switch {
	case errors.Is(err, errOverlap):
		cctx, cancel := context.WithCancelCause(ctx)
		cancel(err)
		return cctx, func() {}
	case err != nil:
		return context.WithCancel(ctx)
	}
	return r.watch(ctx)
}

// Token returns the fencing token of ctx's run (as for Assert): its job
// lock's token or, for a master-only run without a lock, the epoch of the
// tenure that admitted it; false when there is none, or the run has lost
// its gate or ended.
func Token(ctx context.Context) (uint64, bool) {
	r, err := inflight.find(ctx)
	switch {
	case err != nil || r.ctx.Err() != nil:
	case r.g.lock != nil && !r.expired():
		return r.h.Token(), true
	case r.g.lock == nil && r.g.role == masterOnly && r.roleLost() == nil:
		return r.epoch, true
	}
	return 0, false
}

// Run runs fn once, now, if job admits it, as gocron would: for other
// schedulers (robfig/cron, a time.Ticker loop). job is made once by
// MasterOnly, SlaveOnly or Locked (without WithScheduler) and used for
// every run. fire is the time the run was scheduled for, the same on
// every instance to the millisecond; zero means unknown.
//
// Run returns the *SkipError without calling fn when the gate refuses;
// otherwise fn's error, joined with an error wrapping ErrLost if the job
// lock had lapsed before fn returned. fn's context is as Context's. The
// run is named after the job lock, or the role without one. A panic in fn
// releases the gate and goes on.
func Run(ctx context.Context, job gocron.JobOption, fire time.Time, fn func(ctx context.Context) error) (err error) {
	g, err := gateOf(job)
	if err != nil {
		return err
	}
	if fn == nil {
		return invalid("Run needs a function")
	}
	r, err := g.admit(ctx, cmp.Or(g.lockName(), string(g.role)), fire)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := r.Unlock(ctx); errors.Is(uerr, ErrLost) {
			err = errors.Join(err, uerr)
		}
	}()
	rctx, cancel := r.watch(ctx)
	defer cancel()
	return fn(rctx)
}
