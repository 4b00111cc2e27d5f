package schedlock

import (
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

// run is one admitted run: what Gate.Lock returns to gocron.
type run struct {
	g     *Gate
	job   string
	epoch uint64    // the role epoch at admission, for Master
	base  time.Time // admission, on the gate's clock

	// The job lock, when the gate has one: its holding (internal/lease)
	// keeps the lease's deadline and loses the run there.
	h        lease.Holder
	fire     time.Time // the fire the run is for; zero if unknown
	acquired time.Time // when the grant's reply arrived

	// ctx is cancelled, with a cause wrapping ErrLost, when the run loses
	// its gate or ends; contexts handed to the job follow it.
	ctx    context.Context
	cancel context.CancelCauseFunc

	opMu sync.Mutex // serialises Extend and the release

	mu       sync.Mutex // guards the fields below
	admitted bool       // the gate admitted the run: a loss is reported from now on
	ended    bool
	losing   bool // lose is under way: the loss is being observed
	stopPoll chan struct{}
	pollDone chan struct{}
	watchers map[*context.CancelCauseFunc]struct{} // contexts handed to the job

	once      sync.Once
	unlockErr error
	regKey    <-chan struct{} // the registry key, nil if not registered
	gid       uint64          // the goroutine gocron admitted the run on
}

var _ gocron.Lock = (*run)(nil)

func newRun(g *Gate, job string, epoch uint64) *run {
	r := &run{g: g, job: job, epoch: epoch, base: g.clock.Now()}
	r.ctx, r.cancel = context.WithCancelCause(context.Background())
	return r
}

// expired reports whether the job lock's lease is over by its deadline.
func (r *run) expired() bool { return r.h.Left() <= 0 }

// Lost is the job lock's holding ending before the run's release, at its
// deadline or because the store said the lock is no longer the run's
// (lease.Hooks): the run loses its gate.
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

// roleLost returns why the run's role condition no longer holds, or nil.
// It does no I/O.
func (r *run) roleLost() error {
	el := r.g.el
	switch r.g.role {
	case Master:
		if _, ep, ok := el.Tenure(); !ok || ep != r.epoch {
			return fmt.Errorf("%w: %w: job %q: %s is no longer the master of epoch %d", ErrLost, ErrNotMaster, r.job, r.g.idText, r.epoch)
		}
	case Slave:
		if el.IsMaster() {
			return fmt.Errorf("%w: %w: job %q: %s became the master", ErrLost, ErrNotSlave, r.job, r.g.idText)
		}
	}
	return nil
}

// check reports whether the run still holds its gate, as far as this
// process can tell without I/O.
func (r *run) check() error {
	if r.ctx.Err() != nil {
		return context.Cause(r.ctx)
	}
	if err := r.roleLost(); err != nil {
		return r.loseWith(err)
	}
	if r.g.lock != nil && r.expired() {
		return r.loseWith(r.leaseLost())
	}
	return nil
}

// loseWith loses the run with err and returns the cause the run ended
// with: err, or an earlier loss's cause.
func (r *run) loseWith(err error) error {
	r.lose(err)
	if cause := context.Cause(r.ctx); cause != nil {
		return cause
	}
	return err // another goroutine is still reporting the loss
}

// lose marks an admitted run lost with cause err, once, and cancels the
// contexts handed to the job before it returns. The loss is logged and
// observed before the contexts are cancelled, so a job that returns when
// its context ends returns after the observer saw the loss. A role that
// ended leaves the job lock's lease as it is, to the run's release.
func (r *run) lose(err error) {
	r.mu.Lock()
	if !r.admitted || r.ended || r.losing || r.ctx.Err() != nil {
		r.mu.Unlock()
		return
	}
	r.losing = true
	r.mu.Unlock()
	r.g.logger.Warn("schedlock: run lost its gate", "job", r.job, "err", err)
	r.g.emit(Event{Kind: EventLost, Job: r.job, Err: err})
	r.mu.Lock()
	r.cancelLocked(err)
	r.mu.Unlock()
}

// cancelLocked cancels the run's context and every watcher's with cause.
func (r *run) cancelLocked(cause error) {
	r.cancel(cause)
	for c := range r.watchers {
		(*c)(cause)
	}
	r.watchers = nil
}

// watch returns a context derived from parent that also carries the run
// and is cancelled, with the run's cause, when the run is lost or ends.
// For a role gate it starts the watcher that notices a role change.
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
	if r.g.role != Any && r.stopPoll == nil {
		r.stopPoll, r.pollDone = make(chan struct{}), make(chan struct{})
		go r.poll(r.stopPoll, r.pollDone)
	}
	return ctx, func() {
		r.mu.Lock()
		delete(r.watchers, &cancel)
		r.mu.Unlock()
		cancel(context.Canceled)
	}
}

// poll watches the role until it is lost, the run ends or stop closes.
// A master-only run waits on the elector's tenure context, which ends the
// moment mastership does; a slave-only run has no such signal for "became
// master" and checks the role every rolePoll, without I/O.
func (r *run) poll(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	if r.g.role == Master {
		tenure, epoch, ok := r.g.el.Tenure()
		if ok && epoch == r.epoch {
			select {
			case <-stop:
				return
			case <-r.ctx.Done():
				return
			case <-tenure.Done():
			}
		}
		err := r.roleLost()
		if err == nil { // the tenure ended a moment before IsMaster turned false
			err = fmt.Errorf("%w: %w: job %q: %s is no longer the master of epoch %d", ErrLost, ErrNotMaster, r.job, r.g.idText, r.epoch)
		}
		r.lose(err)
		return
	}
	t := r.g.clock.NewTimer(rolePoll)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
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

// Unlock implements gocron.Lock: it ends the run. The job lock is released
// (owner-checked) and kept until lockAtLeastFor after the grant, on the
// store's clock. Unlock works with a cancelled ctx, as gocron passes on
// Shutdown: the release gets its own timeout. It returns an error wrapping
// ErrLost if the lock's lease had lapsed before the release, on the store
// or by the run's local deadline. Calling it again returns the first
// result.
func (r *run) Unlock(ctx context.Context) error {
	r.once.Do(func() { r.unlockErr = r.end(ctx) })
	return r.unlockErr
}

func (r *run) end(ctx context.Context) error {
	r.opMu.Lock() // let an Extend in flight finish
	defer r.opMu.Unlock()
	r.mu.Lock()
	r.ended = true
	stop, done := r.stopPoll, r.pollDone
	r.cancelLocked(errEnded)
	r.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
	inflight.remove(r)
	var err error
	if r.g.lock != nil {
		// Past the deadline the lease is over for the run, whatever the
		// store still holds (a late extension may have kept the key).
		lapsed := r.expired()
		r.h.End()
		err = r.releaseLock(ctx)
		if err == nil && lapsed {
			err = r.leaseLost()
		}
	}
	held := r.g.clock.Since(r.base)
	r.g.emit(Event{Kind: EventReleased, Job: r.job, Held: held, Err: err})
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

// extend renews the job lock's lease to d from now.
func (r *run) extend(ctx context.Context, d time.Duration) error {
	g, l := r.g, r.g.lock
	if l == nil {
		return fmt.Errorf("%w: job %q has a %s gate without a lock", ErrNoLock, r.job, g.role)
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
	// The holding bounds the call by the lease's deadline and voids a
	// reply that lands after it: the lease was given up, and stays so.
	_, err := r.h.Renew(ctx, d)
	switch {
	case err == nil && r.ctx.Err() != nil:
		return context.Cause(r.ctx) // the role ended while the extension was out
	case err == nil:
		return nil
	case err == lease.ErrLate:
		return r.loseWith(fmt.Errorf("%w: job %q: the extension of job lock %q came back after the lease's deadline, which had ended the run",
			ErrLost, r.job, l.key))
	case errors.Is(err, lease.ErrLate) || r.ctx.Err() != nil:
		return r.loseWith(r.leaseLost())
	case errors.Is(err, backend.ErrNotHeld):
		r.h.Lose(fmt.Errorf("%w: job %q: extending job lock %q: %w", ErrLost, r.job, l.key, err))
		return context.Cause(r.ctx)
	}
	return fmt.Errorf("schedlock: job %q: extending job lock %q: %w", r.job, l.key, err)
}

// Assert reports whether the run ctx belongs to still holds its gate: nil
// if so; an error wrapping ErrLost (and ErrNotMaster or ErrNotSlave for a
// role change) if the mastership or slave role ended or the job lock's
// lease lapsed; ErrNoRun if ctx is from no gated run. It does no I/O: it
// reads the elector's clock-based IsMaster and the lease's local deadline,
// the same facts the gate admitted the run on — it cannot see a lock
// removed by hand in the store (Extend can).
//
// ctx is the context gocron passes to the job (its first parameter), one
// derived from it with values, or one from Context, Task or Run. With
// gocron's context, the run is the one gocron runs on the calling
// goroutine; from another goroutine, the job's only run in flight, and
// ErrOverlap while several are (see the package doc, While a job runs).
func Assert(ctx context.Context) error {
	r, err := inflight.find(ctx)
	if err != nil {
		return err
	}
	return r.check()
}

// Extend renews the job lock of the run ctx belongs to so that it lapses
// d from now (ShedLock's LockExtender): a long job calls it before
// lockAtMostFor runs out. lockAtLeastFor still counts from the start. It
// fails with an error wrapping ErrLost if the run no longer holds its gate
// or the store says the lock is no longer its own (and then cancels the
// run's context), ErrNoLock if the gate has no lock, ErrNoRun if ctx is
// from no gated run; a store that cannot be reached leaves the lease as
// it was and returns the store's error. The call to the store is bounded
// by the lease's local deadline: an extension that has not come back by
// then fails with ErrLost, and one whose reply lands after it is void —
// the run stays lost, even if the store did extend the key (it lapses
// there by itself, or at the run's release). ctx is as for Assert, and
// Extend fails with ErrOverlap where Assert does: it never renews the
// lease of another run. d must be longer than the lease's margin (a tenth
// of lockAtMostFor, at most 1s), or Extend fails with
// backend.ErrInvalidArgument and changes nothing.
func Extend(ctx context.Context, d time.Duration) error {
	r, err := inflight.find(ctx)
	if err != nil {
		return err
	}
	return r.extend(ctx, d)
}

// Context returns a context for the job's work that is cancelled when the
// run ctx belongs to loses its gate — the mastership or slave role ends,
// or the job lock's lease lapses — with a cause wrapping ErrLost
// (context.Cause), and when ctx is. A role change is noticed within about
// 10ms; a lease lapses a margin (a tenth of lockAtMostFor, at most 1s,
// after the grant and after each extension alike) before the
// store could expire it. Call the CancelFunc when the work is done.
//
// ctx is the context gocron passes to the job: the first parameter of a
// task function whose first parameter is a context.Context; call Context
// in the task itself, on the goroutine gocron runs it on, and hand the
// context it returns to other goroutines (see Assert). If ctx is from no
// gated run, Context is context.WithCancel(ctx); if overlapping runs
// cannot be told apart, the context it returns is already cancelled, with
// a cause wrapping ErrOverlap.
func Context(ctx context.Context) (context.Context, context.CancelFunc) {
	r, err := inflight.find(ctx)
	switch {
	case errors.Is(err, ErrNoRun):
		return context.WithCancel(ctx)
	case err != nil:
		cctx, cancel := context.WithCancelCause(ctx)
		cancel(err)
		return cctx, func() {}
	}
	return r.watch(ctx)
}

// Epoch returns the role epoch that admitted the master-only run ctx
// belongs to: the store's fencing token of this instance's tenure. Pass it
// to resources that must reject a stale master. It is the epoch of the
// caller's run (see Assert), which a later tenure does not change; it
// reports false when ctx leads to no master-only run, or to several.
func Epoch(ctx context.Context) (uint64, bool) {
	r, err := inflight.find(ctx)
	if err != nil || r.g.role != Master {
		return 0, false
	}
	return r.epoch, true
}

// Token returns the fencing token of the job lock held by the run ctx
// belongs to: strictly larger than the token of every earlier holding of
// the lock. It reports false when ctx is from no run with a lock, and once
// the run has lost its gate (its context was cancelled with ErrLost) or
// ended: the lock is then no longer its to claim, even while a newer run
// holds it. ctx is as for Assert; Token reports false where Assert fails
// with ErrOverlap.
func Token(ctx context.Context) (uint64, bool) {
	r, err := inflight.find(ctx)
	if err != nil || r.g.lock == nil || r.ctx.Err() != nil || r.expired() {
		return 0, false
	}
	return r.h.Token(), true
}

// Run runs fn if gate g admits it, for schedulers other than gocron
// (robfig/cron, a time.Ticker loop): the same role check and job lock as
// a gocron job gets, and the same release. It returns the *SkipError
// (errors.Is(err, ErrSkipped)) without calling fn when the gate refuses;
// otherwise fn's error, joined with an error wrapping ErrLost if the job
// lock had lapsed before fn returned. fn's context is cancelled when the
// run loses its gate (see Context) and carries the run for Assert,
// Extend, Epoch, Token and Fire. Give ctx the fire's scheduled time with
// FireContext so that a late start of a fire already run is skipped
// (ErrFireDone). The run is named after the gate's lock, or its
// role ("master-only") without one. A panic in fn releases the gate and
// goes on.
func Run(ctx context.Context, g *Gate, fn func(ctx context.Context) error) (err error) {
	if g == nil || fn == nil {
		return fmt.Errorf("%w: Run needs a gate and a function", ErrInvalid)
	}
	r, err := g.admit(ctx, g.label())
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
