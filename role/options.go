package role

import (
	"context"
	"log/slog"

	"github.com/baton-go/baton/internal/clock"
	"github.com/baton-go/baton/internal/hook"
)

type hooks struct {
	elected      func(context.Context)
	demoted      func()
	masterChange func(string)
	duplicate    func(string)
	observer     func(Event)
}

// Option configures an Elector. The callback options (OnElected,
// OnDemoted, OnMasterChange, OnDuplicateID, WithObserver) add to each
// other: given twice, both callbacks run, in the order given.
type Option func(*Elector)

// OnElected registers f to be called when this instance becomes master.
// Its context is the tenure's: cancelled as soon as the tenure ends — at
// the tenure's deadline when no renewal came back in time, when the store
// reports the lease gone, or when Run's context ends — so work started for the tenure can
// watch ctx.Done(); that context, not OnDemoted, is the signal to stop.
// EpochFromContext(ctx) returns the tenure's epoch. A tenure that ended is
// never resumed: when this instance is master again, f is called with a
// new context and a larger epoch.
func OnElected(f func(ctx context.Context)) Option {
	return func(e *Elector) { e.hooks.elected = hook.Join(e.hooks.elected, f) }
}

// OnDemoted registers f to be called when this instance stops being
// master. It reports after the fact: by the time it is queued, IsMaster
// already reads false, the tenure's context is cancelled and Status().Master no
// longer names this instance, and it runs later still, on the callback
// goroutine. Use it to record or report the loss; stop the tenure's work
// by watching the tenure's context.
func OnDemoted(f func()) Option {
	return func(e *Elector) { e.hooks.demoted = hook.Join0(e.hooks.demoted, f) }
}

// OnMasterChange registers f to be called with the instance ID of the
// master each time this instance learns that the master changed,
// including to itself.
func OnMasterChange(f func(instanceID string)) Option {
	return func(e *Elector) { e.hooks.masterChange = hook.Join(e.hooks.masterChange, f) }
}

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(e *Elector) {
		if l != nil {
			e.logger = l
		}
	}
}

// withClock drives the elector from c; baton's tests use a fake clock.
func withClock(c clock.Clock) Option {
	return func(e *Elector) { e.clock = c }
}
