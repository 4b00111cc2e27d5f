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
	// Epoch is the highest role epoch (the store's fencing token of a
	// tenure) seen: its own tenure's while this instance is master. For
	// master work, take the epoch from Tenure or EpochFromContext.
	Epoch uint64
	// Since is when this instance last became master or slave.
	Since time.Time
	// LastError is the last store error, and when it happened.
	LastError   error
	LastErrorAt time.Time
	// Duplicate names another live process that claims this instance's ID
	// (its owner string), if one was seen within the role TTL and two
	// heartbeat intervals; DuplicateSeen is when it was last seen. Once
	// that process has stopped, Duplicate is empty again. A process is
	// seen holding the role key, or renewing its member entry: an entry
	// that claims this ID and is not renewed (forged, or left behind) is
	// logged, not reported. DuplicateEntry says where the duplicate's
	// member entry is kept and how to delete it, for when no such
	// process runs.
	Duplicate      string
	DuplicateSeen  time.Time
	DuplicateEntry string
	// RecoveringUntil is, until a holder of the role is seen, when the store said
	// it grants the role again after it refused this elector's claim
	// because it may have lost leases that their holders still use (its
	// restart guard: it restarted without its data, lost it, or is new to
	// baton); zero otherwise.
	RecoveringUntil time.Time
}

// Status returns a snapshot of the elector's view.
func (e *Elector) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	dup := e.duplicateLocked(e.clock.Now())
	var seen, recovering time.Time
	var entry string
	if dup != "" {
		seen, entry = e.duplicateAt, e.memberEntry(dup)
	}
	if !e.IsMaster() && e.recovering.After(e.clock.Now()) {
		recovering = e.recovering
	}
	return Status{
		Enabled:        !e.cfg.Disabled,
		Running:        e.running.Load(),
		IsMaster:       e.IsMaster(),
		Instance:       e.idText,
		Key:            e.key,
		Master:         e.masterLocked(),
		Epoch:          e.epoch.Load(),
		Since:          e.since,
		LastError:      e.lastErr,
		LastErrorAt:    e.lastErrAt,
		Duplicate:      dup,
		DuplicateSeen:  seen,
		DuplicateEntry: entry,

		RecoveringUntil: recovering,
	}
}

// warn records err as the last store error (Status.LastError) and logs
// msg with args and err at warning level.
func (e *Elector) warn(err error, msg string, args ...any) {
	e.mu.Lock()
	e.lastErr, e.lastErrAt = err, e.clock.Now()
	e.mu.Unlock()
	e.logger.Warn(msg, append(args, "err", err)...)
}
