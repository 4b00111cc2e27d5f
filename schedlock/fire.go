package schedlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/baton-go/baton/backend"
)

// MarkerTTL is the shortest time the fire marker of a job lock lives
// after the latest fire recorded in it: the marker's lease is the larger
// of MarkerTTL and the lock's lockAtMostFor. A job that has not run for
// that long leaves nothing in the store; a fire started later than that
// after the latest recorded one is not recognised as already run.
const MarkerTTL = 24 * time.Hour

// fireKey carries a run's fire time in a context, from FireContext.
type fireKey struct{}

// FireContext returns a copy of ctx that names the fire of the run Run
// starts with it: the time the run was scheduled for, however late it
// starts. A gate with a job lock then runs each fire at most once across
// the fleet (see the package doc, "Once per fire"). Every instance must
// name one fire by the same time, as cron schedules do (the minute, the
// hour), to the millisecond. Without it, Run's locked runs are guarded
// by the lock alone.
func FireContext(ctx context.Context, fire time.Time) context.Context {
	return context.WithValue(ctx, fireKey{}, fire)
}

// Fire returns the fire time of the run ctx belongs to: the time it was
// scheduled for, which a gate with a job lock runs at most once across the
// fleet. It reports false when ctx is from no gated run or the run's gate
// did not know its fire time (a gate without a lock, a gocron job without
// WithScheduler, Run without FireContext, a run gocron started ahead of
// its schedule, such as RunNow). ctx is as for Assert.
func Fire(ctx context.Context) (time.Time, bool) {
	r, err := inflight.find(ctx)
	if err != nil || r.fire.IsZero() {
		return time.Time{}, false
	}
	return r.fire, true
}

// WithScheduler names the gocron scheduler the gate's job runs on, so
// that the gate can read each run's fire time (the job's scheduled time,
// gocron's NextRun when the run starts) and its job lock runs each fire
// at most once across the fleet, also when an instance starts an overdue
// fire after the lock was released (see the package doc, "Once per
// fire"). It takes effect when the gate is installed on exactly one job
// of s by a schedlock option (MasterOnly, SlaveOnly, AnyRole, Locked,
// Gate.JobOption).
func WithScheduler(s gocron.Scheduler) Option {
	return func(st *settings) { st.sched = s }
}

// fires is what a gate knows of the gocron jobs it is installed on, to
// read the fire time of their runs.
type fires struct {
	sched gocron.Scheduler // nil: fire times are not read from gocron

	mu     sync.Mutex
	ids    map[[16]byte]struct{} // the jobs the gate was installed on
	cached gocron.Job            // the one live job among them, once found
}

// installed records that the gate was installed on the gocron job id.
func (f *fires) installed(id [16]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ids == nil {
		f.ids = make(map[[16]byte]struct{})
	}
	f.ids[id] = struct{}{}
	f.cached = nil
}

// job returns the one live job of the scheduler that the gate is
// installed on, or nil if there is none or several.
func (f *fires) job() gocron.Job {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cached != nil || len(f.ids) == 0 {
		return f.cached
	}
	var found gocron.Job
	for _, j := range f.sched.Jobs() {
		if _, ok := f.ids[[16]byte(j.ID())]; ok {
			if found != nil {
				return nil // several jobs share the gate: no one fire
			}
			found = j
		}
	}
	f.cached = found
	return found
}

// gocronFire returns the fire time of the gocron run starting now: the
// job's next scheduled time, which gocron moves on only after the run has
// passed its locker. A scheduled time still ahead means gocron started
// the run ahead of its schedule (RunNow): it is no fire.
func (f *fires) gocronFire() (time.Time, bool) {
	if f.sched == nil {
		return time.Time{}, false
	}
	j := f.job()
	if j == nil {
		return time.Time{}, false
	}
	next, err := j.NextRun()
	if err != nil {
		f.mu.Lock()
		f.cached = nil // removed, or the scheduler is shutting down
		f.mu.Unlock()
		return time.Time{}, false
	}
	if next.IsZero() || next.After(time.Now()) {
		return time.Time{}, false
	}
	return next, true
}

// fireOf returns the fire time of a run starting with ctx: FireContext's,
// else gocron's, truncated to the millisecond the marker records.
func (g *Gate) fireOf(ctx context.Context) time.Time {
	if g.lock == nil {
		return time.Time{}
	}
	t, ok := ctx.Value(fireKey{}).(time.Time)
	if !ok {
		t, ok = g.fires.gocronFire()
	}
	if !ok || t.UnixMilli() <= 0 {
		if g.fires.sched == nil && g.noFireOnce.CompareAndSwap(false, true) {
			g.logger.Warn("schedlock: the gate does not know the fire times of its runs, so a fire that an instance starts late "+
				"can run twice: pass schedlock.WithScheduler(s) with the gocron scheduler, or Run with schedlock.FireContext",
				"lock", g.lock.key)
		}
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli())
}

// The fire marker of a job lock, its states and what a run does in each,
// are written down once, in the package doc (Once per fire).

func markerKey(tenant, app, name string) string { return backend.AppKey(tenant, app, "fired", name) }

func markerOwner(fire time.Time, instance string) string {
	return "fire:" + strconv.FormatInt(fire.UnixMilli(), 10) + ":" + instance
}

// markerFire reads the fire time from a marker's owner string.
func markerFire(owner string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(owner, "fire:")
	if !ok {
		return time.Time{}, false
	}
	ms, _, _ := strings.Cut(rest, ":")
	n, err := strconv.ParseInt(ms, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(n), true
}

// markFire records r's fire in the lock's marker, or says why r must be
// skipped. It costs one store call when the marker is free or already
// at r's fire or later, and three when it moves on.
func (g *Gate) markFire(ctx context.Context, r *run) *SkipError {
	l := g.lock
	owner := markerOwner(r.fire, g.idText)
	for replaced := false; ; replaced = true {
		if r.expired() {
			return g.markerLate()
		}
		err := g.takeMarker(ctx, r, owner)
		var held *backend.HeldError
		switch {
		case err == nil:
			if r.expired() {
				return g.markerLate()
			}
			return nil
		case errors.Is(err, backend.ErrNotHeld):
			return g.markerRaced(nil)
		case !errors.As(err, &held):
			return &SkipError{Reason: ErrUnavailable, Err: err, detail: fmt.Sprintf("cannot record the fire in %q", l.marker)}
		case held.Recovering:
			return &SkipError{Reason: ErrRecovering, detail: recoveringDetail(fmt.Sprintf("the fire marker %q", l.marker), held.Holder.TTL)}
		}
		if skip := g.markerHeld(r, held.Holder, replaced); skip != nil {
			return skip
		}
		err = g.markerCall(ctx, r, func(c context.Context) error {
			return l.store.Release(c, l.marker, held.Holder.Owner, 0)
		})
		if err != nil {
			return g.markerRaced(err)
		}
	}
}

// takeMarker takes the free marker for owner, for the marker's life. A
// store that may have lost its data refuses a fresh key (one without a
// fencing counter) for as long as the lease asked for (its restart
// guard), which for the marker's life would be a day: such a refusal is
// answered by taking the marker for lockAtMostFor, the guard the lock
// itself has passed, and renewing it to the marker's life.
func (g *Gate) takeMarker(ctx context.Context, r *run, owner string) error {
	l := g.lock
	life := max(MarkerTTL, l.atMostFor)
	err := g.markerCall(ctx, r, func(c context.Context) error {
		_, err := l.store.Acquire(c, l.marker, owner, life, 0)
		return err
	})
	var held *backend.HeldError
	if life == l.atMostFor || !errors.As(err, &held) || !held.Recovering {
		return err
	}
	return g.markerCall(ctx, r, func(c context.Context) error {
		if _, err := l.store.Acquire(c, l.marker, owner, l.atMostFor, 0); err != nil {
			return err
		}
		_, err := l.store.Renew(c, l.marker, owner, life)
		return err
	})
}

// markerHeld decides on a marker held by h: nil to replace it.
func (g *Gate) markerHeld(r *run, h backend.Lease, replaced bool) *SkipError {
	l := g.lock
	done, ok := markerFire(h.Owner)
	switch {
	case !ok || done.After(time.Now().Add(max(MarkerTTL, l.atMostFor))):
		err := fmt.Errorf("%w: fire marker %q holds %q, which is no fire time of this job: delete the key",
			backend.ErrCorrupt, l.marker, h.Owner)
		return &SkipError{Reason: ErrUnavailable, Err: err, detail: "cannot tell whether the fire has run"}
	case !done.Before(r.fire):
		return &SkipError{Reason: ErrFireDone, Fire: r.fire, Done: done, detail: fmt.Sprintf(
			"the fire of %s has already run: job lock %q last ran the fire of %s (%s)",
			fireText(r.fire), l.key, fireText(done), h.Owner)}
	case replaced:
		return g.markerRaced(nil)
	}
	return nil
}

func (g *Gate) markerCall(ctx context.Context, r *run, f func(context.Context) error) error {
	c, cancel := context.WithTimeout(ctx, max(min(g.opTimeout, r.h.Left()), time.Millisecond))
	defer cancel()
	return f(c)
}

func (g *Gate) markerRaced(err error) *SkipError {
	e := &SkipError{Reason: ErrLocked, detail: fmt.Sprintf(
		"another run changed the fire marker %q of job lock %q at the same time (its lease of the lock had lapsed)",
		g.lock.marker, g.lock.key)}
	if err != nil && !errors.Is(err, backend.ErrNotHeld) {
		e.Reason, e.Err = ErrUnavailable, err
	}
	return e
}

func (g *Gate) markerLate() *SkipError {
	return &SkipError{Reason: ErrUnavailable, detail: fmt.Sprintf(
		"the lease of job lock %q ran out (lockAtMostFor %v) while its fire marker %q was being updated",
		g.lock.key, g.lock.atMostFor, g.lock.marker)}
}

func fireText(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
