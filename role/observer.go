package role

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-go/baton/internal/hook"
	"github.com/baton-go/baton/internal/lease"
)

// EventKind says what an elector reports to its observer.
type EventKind int

const (
	// EventClaim: a claim of the role came back. Event.Err is nil when
	// the store granted it (EventElected follows, unless the grant came
	// back too late to begin a tenure), wraps backend.ErrHeld when
	// another instance holds the role (or the store grants it to nobody
	// for a while), and is otherwise the store's error. Event.Latency is
	// the claim's round trip.
	EventClaim EventKind = iota + 1
	// EventElected: this instance became master; Event.Epoch is the
	// tenure's epoch.
	EventElected
	// EventDemoted: this instance's tenure ended; Event.Epoch is the
	// ended tenure's epoch.
	EventDemoted
	// EventMasterChange: this instance learnt that the master changed;
	// Event.Master names the new one, possibly this instance.
	EventMasterChange
	// EventRenewal: a renewal of the master's lease came back, or its
	// tenure's deadline came first. Event.Err is nil when it renewed in
	// time, wraps backend.ErrNotHeld when the store says the lease is
	// gone, wraps context.DeadlineExceeded when no reply came back before
	// the deadline, and is otherwise the store's error. Event.Latency is
	// the time from sending it to its reply or to the deadline.
	EventRenewal
	// EventStopped: Run ended; a master reports EventDemoted first.
	EventStopped
)

var eventKinds = [...]string{EventClaim: "claim", EventElected: "elected", EventDemoted: "demoted",
	EventMasterChange: "master-change", EventRenewal: "renewal", EventStopped: "stopped"}

// String returns "claim", "elected", "demoted", "master-change",
// "renewal" or "stopped".
func (k EventKind) String() string {
	if k > 0 && int(k) < len(eventKinds) {
		return eventKinds[k]
	}
	return "unknown"
}

// Event is one step of an election, for metrics (see WithObserver).
type Event struct {
	Kind EventKind
	// Epoch is the tenure's epoch for EventElected, EventDemoted and
	// EventRenewal, else the highest epoch seen at the step.
	Epoch uint64
	// Master: see EventMasterChange.
	Master string
	// Latency: see EventClaim and EventRenewal.
	Latency time.Duration
	// Err: see EventClaim and EventRenewal.
	Err error
}

// WithObserver makes the elector report every step of its election to f,
// for metrics and logs. f runs on the callback goroutine, in order with
// the callbacks (before each of them for the same step), and never holds
// up a renewal or a claim; it must return quickly, or it delays the
// callbacks. Given more than once, every observer gets every report.
func WithObserver(f func(Event)) Option {
	return func(e *Elector) { e.ev.observer = hook.Join(e.ev.observer, f) }
}

// report queues ev for the observer, if there is one, with the highest
// epoch seen unless ev names one.
func (c *campaign) report(ev Event) {
	if c.e.ev.observer == nil {
		return
	}
	if ev.Epoch == 0 {
		ev.Epoch = c.e.epoch.Load()
	}
	c.e.ev.step(ev, nil)
}

// renewFailed reports a failed renewal of the tenure with epoch; err nil
// or lease.ErrLate means that no reply came back before the tenure's
// deadline.
func (c *campaign) renewFailed(epoch uint64, took time.Duration, err error) {
	if err == nil || err == lease.ErrLate {
		err = fmt.Errorf("role: no renewal of %s came back before the tenure's deadline: %w", c.e.key, context.DeadlineExceeded)
	}
	c.report(Event{Kind: EventRenewal, Epoch: epoch, Latency: took, Err: err})
}
