package metrics

import (
	"context"
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/synclock"
)

// Lock returns the locker option that feeds m: pass it to
// synclock.NewLocker with the locker's own instance ID.
//
//	lk, err := synclock.NewLocker(store, id, cfg, m.Lock(id))
//
// A lock key is the lock label of its metrics only when WithLockKeys or
// WithLockLabel names it; every other key counts as "other".
func (m *Metrics) Lock(id instanceid.ID) synclock.Option {
	return synclock.WithObserver(m.LockObserver(id))
}

// LockObserver returns the observer behind Lock, for a locker that
// already has synclock.WithObserver of its own and calls this one from
// it. Lockers may share one.
func (m *Metrics) LockObserver(id instanceid.ID) func(synclock.Event) {
	var series sync.Map // lock label -> *lockSeries
	acquireErr := m.backendErrors.WithLabelValues(id.App, id.Tenant, "lock", "acquire")
	releaseErr := m.backendErrors.WithLabelValues(id.App, id.Tenant, "lock", "release")
	return func(e synclock.Event) {
		label := m.lockLabel(e.Key)
		v, ok := series.Load(label)
		if !ok {
			v, _ = series.LoadOrStore(label, m.newLockSeries(id, label))
		}
		s := v.(*lockSeries)
		switch e.Kind {
		case synclock.EventAcquired:
			s.acquired.Inc()
			s.acquire.Observe(e.Wait.Seconds())
			if e.Handed {
				s.handovers.Inc()
			}
		case synclock.EventRefused:
			s.wait.Observe(e.Wait.Seconds())
			switch {
			case errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded):
				s.timeout.Inc() // the caller's context ended, the lock held or not
			case errors.Is(e.Err, synclock.ErrLocked):
				s.locked.Inc()
			case errors.Is(e.Err, synclock.ErrDisabled):
				s.disabled.Inc()
			default:
				s.failed.Inc()
				acquireErr.Inc()
			}
		case synclock.EventExtended:
			s.extensions.Inc()
		case synclock.EventLost:
			s.lost.Inc()
		case synclock.EventReleased:
			s.hold.Observe(e.Held.Seconds())
			if e.Err != nil && !errors.Is(e.Err, synclock.ErrLeaseExpired) {
				releaseErr.Inc()
			}
		}
	}
}

// lockSeries are the series of one lock label, bound once.
type lockSeries struct {
	acquired, handovers, extensions, lost prometheus.Counter
	locked, timeout, disabled, failed     prometheus.Counter // refusals by reason
	acquire, wait, hold                   prometheus.Observer
}

func (m *Metrics) newLockSeries(id instanceid.ID, label string) *lockSeries {
	l := []string{id.App, id.Tenant, label}
	refusal := func(reason string) prometheus.Counter {
		return m.lockRefusals.WithLabelValues(id.App, id.Tenant, label, reason)
	}
	return &lockSeries{
		acquired:   m.lockAcquired.WithLabelValues(l...),
		handovers:  m.lockHandovers.WithLabelValues(l...),
		extensions: m.lockExtensions.WithLabelValues(l...),
		lost:       m.lockLost.WithLabelValues(l...),
		locked:     refusal("locked"),
		timeout:    refusal("timeout"),
		disabled:   refusal("disabled"),
		failed:     refusal("error"),
		acquire:    m.lockAcquire.WithLabelValues(l...),
		wait:       m.lockWait.WithLabelValues(l...),
		hold:       m.lockHold.WithLabelValues(l...),
	}
}
