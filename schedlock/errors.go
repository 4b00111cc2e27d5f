package schedlock

import (
	"errors"
	"fmt"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/role"
)

var (
	// ErrSkipped matches every refusal of a gate: errors.Is(err,
	// ErrSkipped) is true for each *SkipError, whatever its reason.
	ErrSkipped = errors.New("schedlock: run skipped")

	// ErrNotMaster is the reason a master-only run was skipped: this
	// instance is not the master. It is role.ErrNotMaster, so errors.Is
	// matches either name, and the same error gocron receives from
	// Elector.IsLeader.
	ErrNotMaster = role.ErrNotMaster

	// ErrNotSlave is the reason a slave-only run was skipped: this instance
	// is the master, its mastership is ending, its elector does not run, or
	// it has not yet seen a master.
	ErrNotSlave = errors.New("schedlock: this instance is not a slave")

	// ErrDisabled is the reason a role-gated run was skipped: the role
	// feature is turned off (scheduler-lock.enabled=false), so jobs gated
	// by role never run.
	ErrDisabled = errors.New("schedlock: the role is disabled (scheduler-lock.enabled=false)")

	// ErrLocked is the reason a locked run was skipped: another run holds
	// the job lock, or kept it after finishing (lockAtLeastFor). The
	// *SkipError names the holder.
	ErrLocked = errors.New("schedlock: job lock is held")

	// ErrRecovering is the reason a run was skipped because the store
	// grants no fresh key for a while: it may have lost leases that their
	// holders still use (it restarted without its data, lost it, or is
	// new to baton), so it refuses the job lock, or the role, until those
	// would have ended (its restart guard). Nobody holds the lock. The
	// *SkipError says for how long; a store known to hold no live lease
	// is declared whole with batonctl init, and tests on servers started
	// for them make their store WithoutRestartGuard.
	ErrRecovering = errors.New("schedlock: the store grants nothing until leases it may have lost have ended")

	// ErrFireDone is the reason a locked run was skipped because its fire
	// has already run: the job lock remembers the latest fire time run
	// under it, and this run's fire time is not later. It is how an
	// instance that starts an overdue fire late (it was paused, or
	// overloaded, over the fire) does not run that fire a second time
	// after the lock was released. The *SkipError names both fire times.
	ErrFireDone = errors.New("schedlock: the fire has already run")

	// ErrUnavailable is the reason a locked run was skipped when the lock
	// store could not answer (or the scheduler's context ended while it
	// asked). The *SkipError wraps the store's error.
	ErrUnavailable = errors.New("schedlock: job lock store unavailable")

	// ErrLost reports that a run that was admitted no longer holds what
	// admitted it: its mastership or slave role ended, or its job lock's
	// lease ran out (lockAtMostFor) or was taken away. Assert and Extend
	// return it, and the context of Context, Task and Run is cancelled
	// with a cause that wraps it.
	ErrLost = errors.New("schedlock: run lost its gate")

	// ErrNoRun reports a call of Assert, Extend or Context with a context
	// that no gated run handed out.
	ErrNoRun = errors.New("schedlock: context is not from a gated run")

	// ErrOverlap reports a call of Assert, Extend, Context, Epoch or
	// Token with gocron's job context, from a goroutine that runs none of
	// the job's runs, while several runs of the job are in flight: gocron
	// gives all of them that one context, so it cannot say whose run the
	// caller's is, and the call fails closed instead of answering for
	// another run. Use the context of Context (called in the task) or
	// Task, or give the job gocron.WithSingletonMode.
	ErrOverlap = errors.New("schedlock: overlapping runs share the job's context")

	// ErrNoLock reports Extend on a run whose gate has no job lock.
	ErrNoLock = errors.New("schedlock: run holds no job lock")

	// ErrConflict reports a second distributed locker on one gocron job: a
	// job has a single locker, so a gate must be its only one. Combine
	// conditions in one option instead: MasterOnly(el, WithLock(...)).
	ErrConflict = errors.New("schedlock: job already has a distributed locker")

	// ErrInvalid reports a gate built from unusable arguments; the message
	// names the argument and its value.
	ErrInvalid = errors.New("schedlock: invalid gate")
)

// SkipError is what a gate returns when it refuses a run. gocron hands it
// to the job's AfterLockError listener; Run returns it. errors.Is matches
// ErrSkipped and the Reason.
type SkipError struct {
	// Job is the job's name: the key gocron passed to the gate, or what
	// Run names the run.
	Job string
	// Reason is ErrNotMaster, ErrNotSlave, ErrDisabled, ErrLocked,
	// ErrRecovering, ErrFireDone or ErrUnavailable.
	Reason error
	// Holder is the lease that holds the job lock, for ErrLocked.
	Holder backend.Lease
	// Fire is the run's fire time, for ErrFireDone; Done is the latest
	// fire time already run under the lock (not earlier than Fire).
	Fire, Done time.Time
	// Err is the underlying error, for ErrUnavailable.
	Err error

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

// Label returns a short, stable name of the reason for logs and metric
// labels: "not-master", "not-slave", "disabled", "locked", "recovering",
// "already-ran" or "unavailable".
func (e *SkipError) Label() string { return reasonLabel(e.Reason) }

func reasonLabel(reason error) string {
	switch reason {
	case ErrNotMaster:
		return "not-master"
	case ErrNotSlave:
		return "not-slave"
	case ErrDisabled:
		return "disabled"
	case ErrLocked:
		return "locked"
	case ErrRecovering:
		return "recovering"
	case ErrFireDone:
		return "already-ran"
	case ErrUnavailable:
		return "unavailable"
	}
	return "other"
}

func lockedDetail(key string, h backend.Lease) string {
	return fmt.Sprintf("job lock %q is held by %q (token %d) for another %v",
		key, h.Owner, h.Token, h.TTL.Round(time.Millisecond))
}

// recoveringDetail says why the store refused what (the job lock or the
// role), for how long, and how to declare a new store.
func recoveringDetail(what string, left time.Duration) string {
	return fmt.Sprintf("the store grants %s to nobody for another %v: it may have lost leases that their holders still use "+
		"(it restarted without its data, lost it, or is new to baton); a store known to hold no live lease is declared whole with `batonctl init`, "+
		"and tests on servers started for them make their store WithoutRestartGuard", what, left.Round(time.Millisecond))
}
