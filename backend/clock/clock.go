// Package clock is the time source baton's stores and policy read, so
// that a test can drive them on a fake clock instead of by sleeps.
//
// Real is backed by the time package and keeps Go's monotonic clock
// readings, so durations computed from its Now values are immune to wall
// clock jumps. Fake moves only when Advance is called: a program's own
// tests can run the memory store on it (membackend.WithClock) and see a
// lease expire without waiting for it.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock is the part of the time package baton uses.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Since returns the time elapsed since t.
	Since(t time.Time) time.Duration
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine after d.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a one-shot timer created by a Clock.
type Timer interface {
	// C delivers the fire time. It is nil for timers made by AfterFunc.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was active.
	Stop() bool
	// Reset changes the timer to fire after d; it reports whether it was active.
	Reset(d time.Duration) bool
}

// Real is the Clock of the time package.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (realClock) NewTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Fake is a Clock that moves only when Advance is called. It is safe for
// concurrent use.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever the timer set changes
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns the fake time elapsed since t.
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// NewTimer returns a timer that fires when the fake clock reaches now+d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{clock: f, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// AfterFunc calls fn in its own goroutine when the fake clock reaches now+d.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{clock: f, fn: fn}
	t.Reset(d)
	return t
}

// Advance moves the clock forward by d and fires, in deadline order, every
// timer whose deadline is reached.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	target := f.now.Add(d)
	for {
		sort.Slice(f.timers, func(i, j int) bool { return f.timers[i].at.Before(f.timers[j].at) })
		if len(f.timers) == 0 || f.timers[0].at.After(target) {
			break
		}
		t := f.timers[0]
		f.timers = f.timers[1:]
		t.active = false
		if t.at.After(f.now) {
			f.now = t.at
		}
		f.notifyLocked()
		t.fire(f.now)
	}
	f.now = target
	f.mu.Unlock()
}

// Timers reports how many timers are waiting to fire.
func (f *Fake) Timers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitForTimers blocks until at least n timers are waiting or done is
// closed; it reports whether the count was reached. Tests use it to know
// that the code under test has armed its timers before they Advance; most
// should call AwaitTimers, which cannot hang.
func (f *Fake) WaitForTimers(n int, done <-chan struct{}) bool {
	for {
		f.mu.Lock()
		if len(f.timers) >= n {
			f.mu.Unlock()
			return true
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

// TB is the part of testing.TB that AwaitTimers uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// awaitTimeout is how long AwaitTimers waits before it fails the test: far
// longer than code that arms a timer needs even on a loaded machine, short
// enough that a test whose code never arms it fails with a message instead
// of hanging until the test binary's timeout. Only this package's tests
// change it.
var awaitTimeout = time.Minute

// AwaitTimers waits, on the real clock, until at least n timers are
// waiting, and fails tb if that does not happen within a minute.
func (f *Fake) AwaitTimers(tb TB, n int) {
	tb.Helper()
	timeout := time.NewTimer(awaitTimeout)
	defer timeout.Stop()
	done, finished := make(chan struct{}), make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-timeout.C:
			close(done)
		case <-finished:
		}
	}()
	if !f.WaitForTimers(n, done) {
		f.mu.Lock()
		have := len(f.timers)
		f.mu.Unlock()
		tb.Fatalf("fake clock: %d timers waiting after %v, want at least %d: the code under test did not arm them", have, awaitTimeout, n)
	}
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	clock  *Fake
	ch     chan time.Time
	fn     func()
	at     time.Time
	active bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) fire(now time.Time) {
	if t.fn != nil {
		go t.fn()
		return
	}
	select {
	case t.ch <- now:
	default:
	}
}

func (t *fakeTimer) Stop() bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	return t.stopLocked()
}

// stopLocked disarms t. As with Go 1.23+ timers, a fire time sent before
// the Stop or Reset but not yet received is dropped, so a reader never
// sees a stale fire after either call.
func (t *fakeTimer) stopLocked() bool {
	if t.ch != nil {
		select {
		case <-t.ch:
		default:
		}
	}
	if !t.active {
		return false
	}
	t.active = false
	for i, o := range t.clock.timers {
		if o == t {
			t.clock.timers = append(t.clock.timers[:i], t.clock.timers[i+1:]...)
			break
		}
	}
	t.clock.notifyLocked()
	return true
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	was := t.stopLocked()
	t.at = f.now.Add(d)
	if d <= 0 {
		t.fire(f.now)
		return was
	}
	t.active = true
	f.timers = append(f.timers, t)
	f.notifyLocked()
	return was
}
