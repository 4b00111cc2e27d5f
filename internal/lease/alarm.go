package lease

import (
	"container/heap"
	"sync"
	"time"

	"github.com/baton-go/baton/backend/clock"
)

// Alarm keeps the deadlines and wake-ups of many holdings on one timer of
// its clock, armed for the earliest of them.
//
// A timer of its own for every holding would cost more than the rest of a
// holding's bookkeeping: when a new runtime timer is due before every
// other timer of its P, the Go scheduler wakes a thread to watch it, a
// system call and, on a busy machine, a context switch on every lock
// cycle. Most holdings end long before their deadline, and the next
// holding's deadline lies after the one the timer is armed for, so a lock
// and unlock touch no timer. Now and then the timer goes off for a holding
// already ended, finds nothing due and is armed for the earliest left.
//
// Times are kept as nanoseconds since the Alarm was made, on its clock, so
// that a deadline can be read without a lock (Holder.Left).
type Alarm struct {
	clock clock.Clock
	real  bool // clock is clock.Real: read time.Since directly
	base  time.Time

	mu    sync.Mutex
	timer clock.Timer // made when first needed
	at    int64       // when timer goes off; 0 when it is not armed
	due   dueHolders
}

// NewAlarm returns an alarm on c.
func NewAlarm(c clock.Clock) *Alarm {
	return &Alarm{clock: c, real: c == clock.Real, base: c.Now()}
}

// Clock returns the alarm's clock.
func (a *Alarm) Clock() clock.Clock { return a.clock }

// now is the time on the alarm's scale; never 0.
func (a *Alarm) now() int64 {
	if a.real {
		return int64(time.Since(a.base)) + 1
	}
	return int64(a.clock.Since(a.base)) + 1
}

// of converts t to the alarm's scale.
func (a *Alarm) of(t time.Time) int64 { return int64(t.Sub(a.base)) + 1 }

// scheduleLocked puts h on the heap for the earlier of its wake-up and deadline.
func (a *Alarm) scheduleLocked(h *Holder, now int64) {
	h.due = h.deadline.Load()
	if h.wake != 0 && h.wake < h.due {
		h.due = h.wake
	}
	if h.slot > 0 {
		heap.Fix(&a.due, h.slot-1)
	} else {
		heap.Push(&a.due, h)
	}
	if a.at == 0 || h.due < a.at {
		a.armLocked(now, h.due)
	}
}

// set gives h the deadline and wake-up (0: none) given, whatever it had.
func (a *Alarm) set(h *Holder, deadline, wake int64) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	h.deadline.Store(deadline)
	h.wake = wake
	a.scheduleLocked(h, now)
}

// wakeIn makes h wake at now+d, before its deadline; false if the
// holding has no deadline on the alarm or it comes first.
func (a *Alarm) wakeIn(h *Holder, d time.Duration) bool {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	at := now + int64(d)
	if h.slot == 0 || at >= h.deadline.Load() {
		return false
	}
	h.wake = at
	a.scheduleLocked(h, now)
	return true
}

// extend moves h's deadline to deadline, but only while the one it has is
// still to come and h is on the alarm: once that has passed (h fires, or
// is about to) or h ended, the deadline stays and extend reports false.
// This is what makes a late reply to a renewal void.
func (a *Alarm) extend(h *Holder, deadline int64) bool {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	d := h.deadline.Load()
	// A reader (Left) that found d passed pins it to 0: the swap fails
	// then, also when now was read before d and is acted on after it.
	if h.slot == 0 || now >= d || !h.deadline.CompareAndSwap(d, deadline) {
		return false
	}
	a.scheduleLocked(h, now)
	return true
}

// cancel takes h off the alarm and its deadline away (Left is then
// negative): it no longer fires, unless it is firing, and no renewal
// extends it.
func (a *Alarm) cancel(h *Holder) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h.deadline.Store(0)
	if h.slot > 0 {
		heap.Remove(&a.due, h.slot-1)
	}
}

// Quiet stops the timer while no holding is on the alarm: for a policy
// that holds one lease at a long interval (a tenure), so that no timer
// stays armed between its holdings. Policies with many short holdings do
// not call it: their next holding would arm the timer again.
func (a *Alarm) Quiet() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.due) == 0 && a.at != 0 {
		a.timer.Stop()
		a.at = 0
	}
}

func (a *Alarm) armLocked(now, when int64) {
	a.at = when
	d := time.Duration(when - now)
	if a.timer == nil {
		a.timer = a.clock.AfterFunc(d, a.ring)
		return
	}
	a.timer.Reset(d)
}

// ring is the timer going off: every holding whose deadline has come is
// lost, every one whose wake-up has come is woken (each on a goroutine of
// its own), and the timer is armed again for the earliest time left.
func (a *Alarm) ring() {
	now := a.now()
	a.mu.Lock()
	a.at = 0
	var lost, woken []*Holder
	for len(a.due) > 0 && a.due[0].due <= now {
		h := a.due[0]
		if now >= h.deadline.Load() {
			heap.Pop(&a.due)
			lost = append(lost, h)
			continue
		}
		h.wake = 0 // the wake-up came before the deadline
		h.due = h.deadline.Load()
		heap.Fix(&a.due, 0)
		woken = append(woken, h)
	}
	if len(a.due) > 0 {
		a.armLocked(now, a.due[0].due)
	}
	a.mu.Unlock()
	for _, h := range lost {
		go h.Lose(ErrExpired)
	}
	for _, h := range woken {
		go h.hooks.Woken()
	}
}

// dueHolders is a min-heap of holdings by due time; each keeps its index
// plus one in slot (zero: not on the heap).
type dueHolders []*Holder

func (d dueHolders) Len() int           { return len(d) }
func (d dueHolders) Less(i, j int) bool { return d[i].due < d[j].due }
func (d dueHolders) Swap(i, j int) {
	d[i], d[j] = d[j], d[i]
	d[i].slot, d[j].slot = i+1, j+1
}

func (d *dueHolders) Push(x any) {
	h := x.(*Holder)
	h.slot = len(*d) + 1
	*d = append(*d, h)
}

func (d *dueHolders) Pop() any {
	old := *d
	h := old[len(old)-1]
	old[len(old)-1] = nil
	*d = old[:len(old)-1]
	h.slot = 0
	return h
}
