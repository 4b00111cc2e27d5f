package schedlock

import "time"

// EventKind says what a gate reports to its observer.
type EventKind int

const (
	// EventAdmitted: a run passed the gate (and holds its job lock).
	EventAdmitted EventKind = iota + 1
	// EventSkipped: a run was refused; Event.Err is the *SkipError.
	EventSkipped
	// EventReleased: an admitted run ended; Event.Held is how long it
	// held the gate and Event.Err the release error, if any (a lock that
	// had already lapsed wraps ErrLost).
	EventReleased
	// EventLost: a run in flight lost its role or its job lock's lease;
	// Event.Err wraps ErrLost. A lost role is seen by Assert, Extend and
	// runs watched by Context or Run; a lost lease always.
	EventLost
)

// String returns "admitted", "skipped", "released" or "lost".
func (k EventKind) String() string {
	names := [...]string{"unknown", "admitted", "skipped", "released", "lost"}
	if k < 0 || int(k) >= len(names) {
		k = 0
	}
	return names[k]
}

// Event is one decision of a gate, for metrics (see WithObserver).
type Event struct {
	Kind EventKind
	// Job is the job's name (gocron's job name, or what Run names it).
	Job string
	// Lock is the name of the gate's job lock, "" without one.
	Lock string
	// Err is the *SkipError of EventSkipped, the release error of
	// EventReleased (nil when fine) and the cause of EventLost.
	Err error
	// Reason is, for EventSkipped, the skip's Label ("not-master",
	// "locked", ...), for metric labels.
	Reason string
	// Held is, for EventReleased, the time from admission to release.
	Held time.Duration
}
