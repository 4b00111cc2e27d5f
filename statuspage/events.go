package statuspage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/synclock"
)

// DefaultEventCount is how many events of each kind an Events keeps when
// NewEvents is given no positive size.
const DefaultEventCount = 50

// Event is one recent happening that the status page lists.
type Event struct {
	// Time is when this process learned of it, on its own clock.
	Time time.Time `json:"time"`
	// Kind says what happened: "elected", "demoted", "master" (the master
	// changed), "duplicate-id", "lock-lost", "lock-error" (a store error
	// while taking or releasing a lock), "skipped" (a job run was
	// refused), "job-lost" (a running job lost its role or lock) or
	// "job-error" (a job lock's release failed).
	Kind string `json:"kind"`
	// Subject is what it happened to: an instance ID, a lock key or a job
	// name; "this instance" for elected and demoted.
	Subject string `json:"subject"`
	// Detail says more: the epoch, the skip reason, the error.
	Detail string `json:"detail,omitempty"`
}

// Events keeps the recent role transitions, lost locks and skipped jobs
// of one process, in two rings of a fixed size: one for transitions and
// lock troubles, one for jobs, so that a flood of skips (every slave skips
// every run of a master-only job) never pushes a transition out. Feed it
// from the elector's callbacks (RoleOptions, or the methods named after
// them), schedlock.WithObserver(ev.Job) and synclock.WithObserver(ev.Lock),
// and hand it to New with WithEvents. All methods are safe for concurrent
// use and return at once.
type Events struct {
	mu          sync.Mutex
	now         func() time.Time
	transitions ring
	jobs        ring
}

// NewEvents returns an Events that keeps the last size events of each
// ring (DefaultEventCount if size <= 0).
func NewEvents(size int) *Events {
	if size <= 0 {
		size = DefaultEventCount
	}
	return &Events{now: time.Now, transitions: ring{size: size}, jobs: ring{size: size}}
}

// ring keeps the last size events, oldest first.
type ring struct {
	size   int
	events []Event
}

func (r *ring) add(e Event) {
	if len(r.events) == r.size {
		r.events = slices.Delete(r.events, 0, 1)
	}
	r.events = append(r.events, e)
}

// newest returns the events, newest first.
// newest returns the events newest first: an empty list, not nil, when
// there are none, so that JSON shows [] rather than null.
func (r *ring) newest() []Event {
	out := append(make([]Event, 0, len(r.events)), r.events...)
	slices.Reverse(out)
	return out
}

func (ev *Events) add(jobs bool, kind, subject, detail string) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	e := Event{Time: ev.now(), Kind: kind, Subject: subject, Detail: detail}
	if jobs {
		ev.jobs.add(e)
	} else {
		ev.transitions.add(e)
	}
}

// Transitions returns the recent role transitions and lock troubles,
// newest first.
func (ev *Events) Transitions() []Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.transitions.newest()
}

// Jobs returns the recent skipped jobs and job troubles, newest first.
func (ev *Events) Jobs() []Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return ev.jobs.newest()
}

// RoleOptions returns the elector options that record its transitions:
// OnElected, OnDemoted, OnMasterChange and OnDuplicateID. They add to
// the callbacks of the same kind given to role.NewElector; both run.
func (ev *Events) RoleOptions() []role.Option {
	return []role.Option{
		role.OnElected(ev.Elected),
		role.OnDemoted(ev.Demoted),
		role.OnMasterChange(ev.MasterChanged),
		role.OnDuplicateID(ev.DuplicateID),
	}
}

// Elected records that this instance became master; ctx is the tenure's
// context as role.OnElected passes it, which carries the epoch.
func (ev *Events) Elected(ctx context.Context) {
	detail := ""
	if epoch, ok := role.EpochFromContext(ctx); ok {
		detail = fmt.Sprintf("epoch %d", epoch)
	}
	ev.add(false, "elected", "this instance", detail)
}

// Demoted records that this instance stopped being master.
func (ev *Events) Demoted() { ev.add(false, "demoted", "this instance", "") }

// MasterChanged records that this instance learned of a new master.
func (ev *Events) MasterChanged(instanceID string) {
	ev.add(false, "master", instanceID, "")
}

// DuplicateID records another live process that claims this instance's
// ID (its owner string).
func (ev *Events) DuplicateID(otherOwner string) {
	ev.add(false, "duplicate-id", otherOwner, "another live process claims this instance's ID")
}

// Job records what a job gate reports that a status page should show:
// skipped runs with their reason, runs that lost their role or lock, and
// job locks whose release failed. Admissions and plain releases are not
// kept. Pass it to schedlock.WithObserver.
func (ev *Events) Job(e schedlock.Event) {
	switch {
	case e.Kind == schedlock.EventSkipped:
		ev.add(true, "skipped", e.Job, e.Reason+": "+errText(e.Err))
	case e.Kind == schedlock.EventLost:
		ev.add(true, "job-lost", e.Job, errText(e.Err))
	case e.Kind == schedlock.EventReleased && e.Err != nil:
		ev.add(true, "job-error", e.Job, errText(e.Err))
	}
}

// Lock records what a Locker reports that a status page should show:
// leases lost while a section ran, and store errors while taking or
// releasing a lock. Acquisitions, ordinary refusals (the lock was held,
// the caller's context ended) and plain releases are not kept. Pass it to
// synclock.WithObserver.
func (ev *Events) Lock(e synclock.Event) {
	switch {
	case e.Kind == synclock.EventLost:
		ev.add(false, "lock-lost", e.Key, errText(e.Err))
	case e.Kind == synclock.EventRefused && e.Err != nil &&
		!errors.Is(e.Err, synclock.ErrLocked) && !errors.Is(e.Err, context.Canceled) && !errors.Is(e.Err, context.DeadlineExceeded) &&
		!errors.Is(e.Err, synclock.ErrDisabled):
		ev.add(false, "lock-error", e.Key, errText(e.Err))
	case e.Kind == synclock.EventReleased && e.Err != nil:
		ev.add(false, "lock-error", e.Key, errText(e.Err))
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
