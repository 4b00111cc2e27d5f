package schedlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/baton-go/baton/backend"
)

// markerTTL is the shortest life of a fire marker after its latest fire.
const markerTTL = 24 * time.Hour

// Fire returns the fire time of ctx's run (as for Assert): the time it
// was scheduled for, however late it started; false when ctx is from no
// locked run or the run's fire time is unknown.
func Fire(ctx context.Context) (time.Time, bool) {
	r, err := inflight.find(ctx)
	if err != nil || r.fire.IsZero() {
		return time.Time{}, false
	}
	return r.fire, true
}

// WithScheduler names the gocron scheduler a locked job runs on, so that
// its gate reads each run's fire time (the job's scheduled time) and runs
// each fire at most once across the fleet. A gocron job with a job lock
// needs it; Run takes the fire time as an argument instead.
func WithScheduler(s gocron.Scheduler) Option {
	return optionFunc(func(g *gate) { g.fires.sched = s })
}

// fires is what a gate knows of the gocron jobs it is installed on.
type fires struct {
	sched gocron.Scheduler // nil: fire times are not read from gocron

	mu  sync.Mutex
	ids [][16]byte // the jobs the gate was installed on
	job gocron.Job // the live job, once found; nil while several share the gate
}

// installed records that the gate was installed on the gocron job id.
func (f *fires) installed(id [16]byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.ids, id) {
		f.ids = append(f.ids, id)
	}
	f.job = nil
}

// gocronFire returns the fire time of the gocron run starting now: the
// job's next scheduled time, which gocron moves on only after the run has
// passed its locker. It is zero when unknown: no scheduler, a gate on
// several jobs, or a time still ahead (a run started early, as by RunNow).
func (f *fires) gocronFire() time.Time {
	if f.sched == nil {
		return time.Time{}
	}
	f.mu.Lock()
	if f.job == nil && len(f.ids) == 1 {
		for _, j := range f.sched.Jobs() {
			if [16]byte(j.ID()) == f.ids[0] {
				f.job = j
			}
		}
	}
	j := f.job
	f.mu.Unlock()
	if j == nil {
		return time.Time{}
	}
	next, err := j.NextRun()
	if err != nil {
		f.mu.Lock()
		f.job = nil // removed, or the scheduler is shutting down
		f.mu.Unlock()
	}
	if err != nil || next.After(time.Now()) {
		return time.Time{}
	}
	return next
}

func markerOwner(fire time.Time, instance string) string {
	return "fire:" + strconv.FormatInt(fire.UnixMilli(), 10) + ":" + instance
}

// markerFire reads the fire time from a marker's owner string.
func markerFire(owner string) (time.Time, bool) {
	rest, ok := strings.CutPrefix(owner, "fire:")
	ms, _, _ := strings.Cut(rest, ":")
	n, err := strconv.ParseInt(ms, 10, 64)
	if !ok || err != nil || n <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(n), true
}

// markFire records r's fire in the lock's marker (its states: the
// package doc's table), or says why r must be skipped.
func (g *gate) markFire(ctx context.Context, r *run) *SkipError {
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
			return recovering("", fmt.Sprintf("the fire marker %q", l.marker), held.Holder.TTL)
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
// recovering store refuses a fresh key for as long as the lease asked
// for, a day here: the marker is then taken for lockAtMostFor, which the
// lock itself has passed, and renewed to its life.
func (g *gate) takeMarker(ctx context.Context, r *run, owner string) error {
	l := g.lock
	life := max(markerTTL, l.atMostFor)
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
func (g *gate) markerHeld(r *run, h backend.Lease, replaced bool) *SkipError {
	l := g.lock
	done, ok := markerFire(h.Owner)
	switch {
	case !ok || done.After(time.Now().Add(max(markerTTL, l.atMostFor))):
		err := fmt.Errorf("%w: fire marker %q holds %q, which is no fire time of this job: delete the key",
			backend.ErrCorrupt, l.marker, h.Owner)
		return &SkipError{Reason: ErrUnavailable, Err: err, detail: "cannot tell whether the fire has run"}
	case !done.Before(r.fire):
		e := skip(ErrLocked, "the fire of %s has already run: job lock %q last ran the fire of %s (%s)",
			fireText(r.fire), l.key, fireText(done), h.Owner)
		e.Fire, e.Done, e.label = r.fire, done, "already-ran"
		return e
	case replaced:
		return g.markerRaced(nil)
	}
	return nil
}

func (g *gate) markerCall(ctx context.Context, r *run, f func(context.Context) error) error {
	c, cancel := context.WithTimeout(ctx, max(min(opTimeout, r.h.Left()), time.Millisecond))
	defer cancel()
	return f(c)
}

func (g *gate) markerRaced(err error) *SkipError {
	e := skip(ErrLocked, "another run changed the fire marker %q of job lock %q at the same time (its lease of the lock had lapsed)",
		g.lock.marker, g.lock.key)
	if err != nil && !errors.Is(err, backend.ErrNotHeld) {
		e.Reason, e.Err = ErrUnavailable, err
	}
	return e
}

func (g *gate) markerLate() *SkipError {
	return skip(ErrUnavailable, "the lease of job lock %q ran out (lockAtMostFor %v) while its fire marker %q was being updated",
		g.lock.key, g.lock.atMostFor, g.lock.marker)
}

func fireText(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }
