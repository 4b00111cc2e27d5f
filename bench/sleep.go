package bench

import (
	"runtime"
	"time"
)

// spinBelow is how close to a deadline sleepUntil stops sleeping and
// spins: nanosleep overshoots by about the kernel's timer slack (50 µs).
const spinBelow = 120 * time.Microsecond

// sleepUntil returns at deadline, within a few microseconds when the
// machine is not overloaded. time.Sleep cannot do that: the Go timer
// rounds short sleeps up to about a millisecond on Linux, which would
// stretch a 1 ms critical section by as much again.
func sleepUntil(deadline time.Time) {
	for {
		d := time.Until(deadline)
		switch {
		case d <= 0:
			return
		case d > spinBelow:
			nanosleep(d - spinBelow)
		default:
			runtime.Gosched()
		}
	}
}
