package synclock

import (
	"context"
	"log/slog"
	"time"

	"github.com/baton-go/baton/internal/hook"
)

// EventKind says what a Locker reports to its observer.
type EventKind int

const (
	// EventAcquired: a holding began (Wait, Tries, Handed).
	EventAcquired EventKind = iota + 1
	// EventRefused: a call did not get the lock (Wait, Tries, Err).
	EventRefused
	// EventExtended: the lease of a running section was extended, past
	// the claim window or by Config.AutoRenew.
	EventExtended
	// EventLost: the lease ended, or was about to, while the section ran
	// (Held; Err wraps ErrLeaseExpired).
	EventLost
	// EventReleased: a holding ended (Held, Err).
	EventReleased
)

// String returns "acquired", "refused", "extended", "lost" or "released".
func (k EventKind) String() string {
	if k < EventAcquired || k > EventReleased {
		return "unknown"
	}
	return [...]string{"acquired", "refused", "extended", "lost", "released"}[k-EventAcquired]
}

// Event is one step of a lock, for metrics (see WithObserver). The
// fields after Token are set for the kinds whose doc names them.
type Event struct {
	Kind   EventKind
	Key    string        // as the caller gave it (Do: the function name)
	Token  uint64        // the holding's fencing token; 0 for EventRefused
	Wait   time.Duration // from the call to the grant or the refusal
	Tries  int           // claims sent to the store
	Handed bool          // a release handed the lock over
	Held   time.Duration // from the grant to the loss or the release
	Err    error         // why it was refused, lost, or what the release reported
}

// WithObserver makes the Locker report every step of its locks to f,
// synchronously on the goroutine that took the step: f must return
// quickly. Given more than once, every observer gets every step, in the
// order given.
func WithObserver(f func(Event)) Option {
	return func(lk *Locker) { lk.observer = hook.Join(lk.observer, f) }
}

// report logs e and reports it to the observer. Only a lost lease is a
// warning: a log kept at info shows no lock traffic.
func (lk *Locker) report(e Event) {
	level := slog.LevelDebug
	if e.Kind == EventLost {
		level = slog.LevelWarn
	}
	if ctx := context.Background(); lk.logger.Enabled(ctx, level) {
		attrs := []slog.Attr{slog.String("key", e.Key)}
		if e.Token != 0 {
			attrs = append(attrs, slog.Uint64("token", e.Token))
		}
		switch e.Kind {
		case EventAcquired:
			attrs = append(attrs, slog.Duration("wait", e.Wait), slog.Int("tries", e.Tries), slog.Bool("handed", e.Handed))
		case EventRefused:
			attrs = append(attrs, slog.Duration("wait", e.Wait), slog.Int("tries", e.Tries))
		case EventLost, EventReleased:
			attrs = append(attrs, slog.Duration("held", e.Held))
		}
		if e.Err != nil {
			attrs = append(attrs, slog.Any("err", e.Err))
		}
		lk.logger.LogAttrs(ctx, level, "synclock: lock "+e.Kind.String(), attrs...)
	}
	if lk.observer != nil {
		lk.observer(e)
	}
}
