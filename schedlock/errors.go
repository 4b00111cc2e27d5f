package schedlock

import (
	"errors"
	"fmt"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/role"
)

var (
	// ErrSkipped matches every refusal: errors.Is(err, ErrSkipped) is true
	// for each *SkipError, whatever its reason.
	ErrSkipped = errors.New("schedlock: run skipped")

	// ErrNotMaster is the reason a master-only run was skipped: this
	// instance is not the master, or the role is disabled. It is
	// role.ErrNotMaster, the error gocron gets from Elector.IsLeader.
	ErrNotMaster = role.ErrNotMaster

	// ErrNotSlave is the reason a slave-only run was skipped (see the
	// package doc, Gates).
	ErrNotSlave = errors.New("schedlock: this instance is not a slave")

	// ErrLocked is the reason a locked run was skipped: another run holds
	// the job lock or kept it after finishing (the *SkipError names the
	// holder), or the run's fire has already run (Label "already-ran").
	ErrLocked = errors.New("schedlock: job lock is held")

	// ErrRecovering is the reason a run was skipped because the store
	// grants no fresh key for a while (its restart guard): it may have
	// lost leases that their holders still use. Nobody holds the lock.
	// The *SkipError says for how long and how to declare a store whole.
	ErrRecovering = errors.New("schedlock: the store grants nothing until leases it may have lost have ended")

	// ErrUnavailable is the reason a locked run was skipped when the lock
	// store could not answer. The *SkipError wraps the store's error.
	ErrUnavailable = errors.New("schedlock: job lock store unavailable")

	// ErrLost reports that an admitted run no longer holds what admitted
	// it: its role ended, or its job lock's lease ran out or was taken
	// away. Assert and Extend return it, and the contexts of Context and
	// Run are cancelled with a cause that wraps it.
	ErrLost = errors.New("schedlock: run lost its gate")

	// ErrNoRun reports a call of Assert, Extend or Context with a context
	// that leads to no run it can answer for: no gated run handed it out;
	// overlapping runs of a gocron job share it and none runs on the
	// calling goroutine (see the package doc, While a job runs); or, for
	// Extend, the run has no job lock.
	ErrNoRun = errors.New("schedlock: context is not from a gated run")
)

// errOverlap is ErrNoRun for a gocron context shared by overlapping runs.
var errOverlap = fmt.Errorf("%w: overlapping runs share the job's context", ErrNoRun)

// SkipError is what a gate returns when it refuses a run; errors.Is
// matches ErrSkipped and the Reason.
type SkipError struct {
	// Job is the job's name: gocron's job name, or what Run names the run.
	Job string
	// Reason is ErrNotMaster, ErrNotSlave, ErrLocked, ErrRecovering or
	// ErrUnavailable.
	Reason error
	// Holder is the lease that holds the job lock, for ErrLocked.
	Holder backend.Lease
	// Fire is the run's fire time, for a fire already run; Done is the
	// latest fire time already run under the lock.
	Fire, Done time.Time
	// Err is the underlying error, for ErrUnavailable.
	Err error

	label  string
	detail string
}

// Error implements error.
func (e *SkipError) Error() string {
	s := fmt.Sprintf("schedlock: job %q skipped: %s", e.Job, e.detail)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the reason and the underlying error.
func (e *SkipError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Reason}
	}
	return []error{e.Reason, e.Err}
}

// Is makes errors.Is(err, ErrSkipped) true.
func (e *SkipError) Is(target error) bool { return target == ErrSkipped }

// Label returns a short, stable name of the skip for logs and metric
// labels: "not-master", "not-slave", "disabled", "locked", "already-ran",
// "recovering" or "unavailable".
func (e *SkipError) Label() string {
	if e.label != "" {
		return e.label
	}
	switch e.Reason {
	case ErrNotMaster:
		return "not-master"
	case ErrNotSlave:
		return "not-slave"
	case ErrLocked:
		return "locked"
	case ErrRecovering:
		return "recovering"
	}
	return "unavailable"
}

// skip returns a refusal for reason with detail.
func skip(reason error, format string, args ...any) *SkipError {
	return &SkipError{Reason: reason, detail: fmt.Sprintf(format, args...)}
}

// recovering is a refusal of what (the job lock or the role) by a store
// that grants nothing for another left: it says how to declare a new
// store.
func recovering(prefix, what string, left time.Duration) *SkipError {
	return skip(ErrRecovering, "%sthe store grants %s to nobody for another %v: it may have lost leases that their holders still use "+
		"(it restarted without its data, lost it, or is new to baton); a store known to hold no live lease is declared whole with `batonctl init`, "+
		"and tests on servers started for them make their store WithoutRestartGuard", prefix, what, left.Round(time.Millisecond))
}
