package metrics

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/schedlock"
)

// Job returns the gate option that feeds m: pass it to a schedlock gate
// with the instance's ID.
//
//	s.NewJob(def, task, schedlock.MasterOnly(el, m.Job(id)))
//
// The job label is the job's name (gocron's, or what schedlock.Run names
// the run), which a program fixes when it schedules its jobs.
func (m *Metrics) Job(id instanceid.ID) schedlock.Option {
	return schedlock.WithObserver(m.JobObserver(id))
}

// JobObserver returns the observer behind Job, for a gate that already
// has schedlock.WithObserver of its own and calls this one from it. Gates
// may share one.
func (m *Metrics) JobObserver(id instanceid.ID) func(schedlock.Event) {
	var series sync.Map // job name -> *jobSeries
	acquireErr := m.backendErrors.WithLabelValues(id.App, id.Tenant, "job", "acquire")
	releaseErr := m.backendErrors.WithLabelValues(id.App, id.Tenant, "job", "release")
	return func(e schedlock.Event) {
		v, ok := series.Load(e.Job)
		if !ok {
			v, _ = series.LoadOrStore(e.Job, m.newJobSeries(id, e.Job))
		}
		s := v.(*jobSeries)
		switch e.Kind {
		case schedlock.EventAdmitted:
			s.runs.Inc()
		case schedlock.EventSkipped:
			reason := e.Reason
			m.jobSkipped.WithLabelValues(id.App, id.Tenant, e.Job, reason).Inc()
			if reason == "unavailable" {
				acquireErr.Inc()
			}
		case schedlock.EventLost:
			s.lost.Inc()
		case schedlock.EventReleased:
			s.run.Observe(e.Held.Seconds())
			if e.Err != nil && !errors.Is(e.Err, schedlock.ErrLost) {
				releaseErr.Inc()
			}
		}
	}
}

// jobSeries are the series of one job, bound once.
type jobSeries struct {
	runs, lost prometheus.Counter
	run        prometheus.Observer
}

func (m *Metrics) newJobSeries(id instanceid.ID, job string) *jobSeries {
	l := []string{id.App, id.Tenant, job}
	return &jobSeries{
		runs: m.jobRuns.WithLabelValues(l...),
		lost: m.jobLost.WithLabelValues(l...),
		run:  m.jobRun.WithLabelValues(l...),
	}
}
