package synclock

import (
	"container/heap"
	"sync"
	"time"

	"github.com/baton-go/baton/internal/clock"
)

// alarm keeps the deadlines of a Locker's grants (when a renewal starts,
// when a lease is given up) on one timer of the clock, armed for the
// earliest of them.
//
// A timer of its own for every grant would cost more than the rest of a
// grant's bookkeeping: when a new runtime timer is due before every other
// timer of its P, the Go scheduler wakes a thread to watch it, which is a
// system call and, on a busy machine, a context switch on every lock
// cycle. Most grants are released long before their deadline, and the
// next grant's deadline lies after the one the timer is armed for, so a
// lock and unlock touch no timer at all. Now and then the timer goes off
// for a grant already released, finds nothing due and is armed again for
// the earliest deadline left.
type alarm struct {
	clock clock.Clock
	mu    sync.Mutex
	timer clock.Timer // made when first needed
	at    time.Time   // when timer goes off; zero when it is not armed
	due   dueGrants
}

// set makes g fire after d, replacing the deadline it had, if any.
func (a *alarm) set(g *grant, d time.Duration) {
	now := a.clock.Now()
	when := now.Add(d)
	a.mu.Lock()
	defer a.mu.Unlock()
	g.due = when
	if g.slot > 0 {
		heap.Fix(&a.due, g.slot-1)
	} else {
		heap.Push(&a.due, g)
	}
	if a.at.IsZero() || when.Before(a.at) {
		a.armLocked(now, when)
	}
}

// left returns how long until g's deadline, and false if g has none: it
// was cancelled, or it went off and g is firing.
func (a *alarm) left(g *grant) (time.Duration, bool) {
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if g.slot == 0 {
		return 0, false
	}
	return g.due.Sub(now), true
}

// extend moves g's deadline to when, but only while the deadline it has
// is still to come: once that has passed (g fires, or is about to) the
// deadline stays and extend reports false. This is what makes a late
// reply to a renewal void: the alarm, not the reply, decides the grant.
func (a *alarm) extend(g *grant, when time.Time) bool {
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if g.slot == 0 || !now.Before(g.due) {
		return false
	}
	g.due = when
	heap.Fix(&a.due, g.slot-1)
	if a.at.IsZero() || when.Before(a.at) {
		a.armLocked(now, when)
	}
	return true
}

// cancel takes g's deadline away. g no longer fires, unless it is firing
// already.
func (a *alarm) cancel(g *grant) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if g.slot > 0 {
		heap.Remove(&a.due, g.slot-1)
	}
}

func (a *alarm) armLocked(now, when time.Time) {
	a.at = when
	if a.timer == nil {
		a.timer = a.clock.AfterFunc(when.Sub(now), a.ring)
		return
	}
	a.timer.Reset(when.Sub(now))
}

// ring is the timer going off: every grant whose deadline has come fires,
// each in a goroutine of its own (a renewal runs as long as its section),
// and the timer is armed again for the earliest deadline left.
func (a *alarm) ring() {
	now := a.clock.Now()
	a.mu.Lock()
	a.at = time.Time{}
	var fired []*grant
	for len(a.due) > 0 && !a.due[0].due.After(now) {
		fired = append(fired, heap.Pop(&a.due).(*grant))
	}
	if len(a.due) > 0 {
		a.armLocked(now, a.due[0].due)
	}
	a.mu.Unlock()
	for _, g := range fired {
		go g.fire()
	}
}

// dueGrants is a min-heap of grants by deadline; each grant keeps its
// index plus one in slot (zero: not in the heap).
type dueGrants []*grant

func (h dueGrants) Len() int           { return len(h) }
func (h dueGrants) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h dueGrants) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].slot, h[j].slot = i+1, j+1
}

func (h *dueGrants) Push(x any) {
	g := x.(*grant)
	g.slot = len(*h) + 1
	*h = append(*h, g)
}

func (h *dueGrants) Pop() any {
	old := *h
	g := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	g.slot = 0
	return g
}
