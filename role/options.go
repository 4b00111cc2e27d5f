package role

import (
	"context"
	"log/slog"

	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/internal/hook"
)

// Option configures an Elector. The callback options (OnElected,
// OnDemoted, OnMasterChange, OnDuplicateID, WithObserver) add to each
// other: given twice, both callbacks run, in the order given.
type Option func(*Elector)

// OnElected registers f to be called when this instance becomes master,
// with the tenure's context: cancelled as soon as the tenure ends (at its
// deadline, when the store reports the lease gone, or when Run's context
// ends), the signal to stop the tenure's work. EpochFromContext(ctx)
// returns the tenure's epoch; each tenure has its own context and epoch.
func OnElected(f func(ctx context.Context)) Option {
	return func(e *Elector) { e.ev.elected = hook.Join(e.ev.elected, f) }
}

// OnDemoted registers f to be called when this instance stops being
// master, after the fact (see the package doc): use it to record the
// loss, and stop the tenure's work on the tenure's context.
func OnDemoted(f func()) Option {
	return func(e *Elector) { e.ev.demoted = hook.Join0(e.ev.demoted, f) }
}

// OnMasterChange registers f to be called with the instance ID of the
// master each time this instance learns that the master changed,
// including to itself.
func OnMasterChange(f func(instanceID string)) Option {
	return func(e *Elector) { e.ev.masterChange = hook.Join(e.ev.masterChange, f) }
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
