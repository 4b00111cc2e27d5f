package role

import (
	"time"
)

// Status is a snapshot of an elector's view.
type Status struct {
	Enabled  bool
	Running  bool
	IsMaster bool
	// Instance is this elector's instance ID.
	Instance string
	// Key is the role key in the store.
	Key string
	// Master is the master's instance ID as last seen, "" if unknown. It
	// stops naming this instance at the tenure's deadline, when IsMaster
	// turns false.
	Master string
	// Epoch is the highest role epoch seen: its own tenure's while this
	// instance is master. Master work takes it from Tenure instead.
	Epoch uint64
	// Since is when this instance last became master or slave.
	Since time.Time
	// LastError is the last store error, and when it happened.
	LastError   error
	LastErrorAt time.Time
	// Duplicate is the owner string of another live process with this
	// instance's ID seen within the role TTL and two heartbeat intervals
	// (see the package doc), DuplicateSeen when it was last seen, and
	// DuplicateEntry where its member entry is kept and how to delete it.
	Duplicate      string
	DuplicateSeen  time.Time
	DuplicateEntry string
	// RecoveringUntil is, until a master is seen, when the store grants
	// the role again after it may have lost leases (see the package doc);
	// zero otherwise.
	RecoveringUntil time.Time
}

// Status returns a snapshot of the elector's view.
func (e *Elector) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	s := Status{
		Enabled:     !e.cfg.Disabled,
		Running:     e.running.Load(),
		IsMaster:    e.IsMaster(),
		Instance:    e.idText,
		Key:         e.key,
		Master:      e.master,
		Epoch:       e.epoch.Load(),
		Since:       e.since,
		LastError:   e.lastErr,
		LastErrorAt: e.lastErrAt,
	}
	if e.held.Load() != nil && !s.IsMaster {
		s.Master = "" // a tenure past its deadline: the clock decides, as for IsMaster
	}
	if s.Duplicate = e.duplicateLocked(now); s.Duplicate != "" {
		s.DuplicateSeen, s.DuplicateEntry = e.duplicateAt, e.memberEntry(s.Duplicate)
	}
	if !s.IsMaster && e.recovering.After(now) {
		s.RecoveringUntil = e.recovering
	}
	return s
}

// warn records err as the last store error (Status.LastError) and logs
// msg with args and err at warning level.
func (e *Elector) warn(err error, msg string, args ...any) {
	e.mu.Lock()
	e.lastErr, e.lastErrAt = err, e.clock.Now()
	e.mu.Unlock()
	e.logger.Warn(msg, append(args, "err", err)...)
}
