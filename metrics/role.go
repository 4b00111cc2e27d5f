package metrics

import (
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
)

// Role returns the elector option that feeds m: pass it to
// role.NewElector with the elector's own instance ID.
//
//	el, err := role.NewElector(store, id, cfg, m.Role(id))
func (m *Metrics) Role(id instanceid.ID) role.Option {
	return role.WithObserver(m.RoleObserver(id))
}

// RoleObserver returns the observer behind Role, for an elector that
// already has role.WithObserver of its own and calls this one from it.
// The role metrics of one instance ID are one set of series: give each
// elector sharing m an ID of its own.
func (m *Metrics) RoleObserver(id instanceid.ID) func(role.Event) {
	s := m.roleState(id)
	labels := s.labels[:]
	toMaster := m.roleTransitions.WithLabelValues(append(labels, "master")...)
	toSlave := m.roleTransitions.WithLabelValues(append(labels, "slave")...)
	granted := m.roleClaims.WithLabelValues(append(labels, "granted")...)
	held := m.roleClaims.WithLabelValues(append(labels, "held")...)
	failed := m.roleClaims.WithLabelValues(append(labels, "error")...)
	changes := m.roleChanges.WithLabelValues(labels...)
	renewal := m.roleRenewal.WithLabelValues(labels...)
	failures := m.roleFailures.WithLabelValues(labels...)
	acquireErr := m.backendErrors.WithLabelValues(id.App, id.Tenant, "role", "acquire")
	renewErr := m.backendErrors.WithLabelValues(id.App, id.Tenant, "role", "renew")
	return func(e role.Event) {
		var h *backend.HeldError
		switch e.Kind {
		case role.EventClaim:
			switch {
			case e.Err == nil:
				granted.Inc()
			case errors.As(e.Err, &h):
				held.Inc()
			default:
				failed.Inc()
				acquireErr.Inc()
			}
		case role.EventElected:
			toMaster.Inc()
		case role.EventDemoted:
			toSlave.Inc()
		case role.EventMasterChange:
			changes.Inc()
		case role.EventRenewal:
			switch {
			case e.Err == nil:
				renewal.Observe(e.Latency.Seconds())
			case !errors.Is(e.Err, backend.ErrNotHeld):
				failures.Inc()
				renewErr.Inc()
			default:
				failures.Inc()
			}
		}
		s.update(e, h, m.now())
	}
}

// roleState is what the role gauges of one elector show.
type roleState struct {
	labels [3]string // app, tenant, instance_id

	mu      sync.Mutex
	master  bool
	epoch   uint64
	running bool // between the first event and EventStopped
	// knows is whether the elector knows of a master; while it runs and
	// does not, the time since unknownSince counts as masterless.
	knows        bool
	unknownSince time.Time
	masterless   time.Duration // of the masterless spells that ended
}

func (m *Metrics) roleState(id instanceid.ID) *roleState {
	key := id.String()
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.roles[key]
	if s == nil {
		s = &roleState{labels: [3]string{id.App, id.Tenant, key}}
		m.roles[key] = s
	}
	return s
}

// update applies e, seen at now; h is e.Err as a *backend.HeldError, if
// it is one.
func (s *roleState) update(e role.Event, h *backend.HeldError, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.epoch = max(s.epoch, e.Epoch)
	if e.Kind == role.EventStopped {
		if s.running {
			s.learn(true, now) // ends the count
		}
		s.running, s.master = false, false
		return
	}
	if !s.running {
		s.running, s.knows, s.unknownSince = true, false, now
	}
	switch e.Kind {
	case role.EventElected:
		s.master = true
		s.learn(true, now)
	case role.EventDemoted:
		s.master = false
		s.learn(false, now)
	case role.EventMasterChange:
		s.learn(e.Master != "", now)
	case role.EventClaim:
		// A refused claim names the holder, or nobody while the store
		// grants the role to no one. A granted claim is followed by
		// EventElected; a failed one tells nothing.
		if h != nil {
			s.learn(h.Holder.Owner != "", now)
		}
	}
}

// learn records whether the elector knows of a master from now on.
func (s *roleState) learn(knows bool, now time.Time) {
	switch {
	case knows && !s.knows:
		s.masterless += now.Sub(s.unknownSince)
	case !knows && s.knows:
		s.unknownSince = now
	}
	s.knows = knows
}

// masterlessAt returns the masterless time up to now.
func (s *roleState) masterlessAt(now time.Time) time.Duration {
	d := s.masterless
	if s.running && !s.knows {
		d += now.Sub(s.unknownSince)
	}
	return d
}

func (m *Metrics) collectRoles(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	states := make([]*roleState, 0, len(m.roles))
	for _, s := range m.roles {
		states = append(states, s)
	}
	m.mu.Unlock()
	now := m.now()
	for _, s := range states {
		s.mu.Lock()
		master, epoch, masterless := 0.0, float64(s.epoch), s.masterlessAt(now).Seconds()
		if s.master {
			master = 1
		}
		s.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(m.roleMaster, prometheus.GaugeValue, master, s.labels[:]...)
		ch <- prometheus.MustNewConstMetric(m.roleEpoch, prometheus.GaugeValue, epoch, s.labels[:]...)
		ch <- prometheus.MustNewConstMetric(m.roleMasterless, prometheus.CounterValue, masterless, s.labels[:]...)
	}
}
