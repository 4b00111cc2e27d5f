package role

import "sync"

// events runs an elector's callbacks in order on one goroutine, so a slow
// callback never delays a renewal and callbacks of one elector never
// overlap.
type events struct {
	observer func(Event)

	mu     sync.Mutex
	queue  []func()
	closed bool
	wake   chan struct{}
	done   chan struct{}
}

func newEvents(observer func(Event)) *events {
	ev := &events{observer: observer, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go ev.deliver()
	return ev
}

// step queues one step of the election: the observer's report obs (none
// if obs.Kind is 0), then f, if not nil. It never blocks.
func (ev *events) step(obs Event, f func()) {
	o := ev.observer
	if obs.Kind == 0 {
		o = nil
	}
	ev.mu.Lock()
	ev.queue = append(ev.queue, func() {
		if o != nil {
			o(obs)
		}
		if f != nil {
			f()
		}
	})
	ev.mu.Unlock()
	poke(ev.wake)
}

// bind returns f applied to v, or nil if f is nil.
func bind[T any](f func(T), v T) func() {
	if f == nil {
		return nil
	}
	return func() { f(v) }
}

// close runs what is queued, then stops the goroutine and waits for it.
func (ev *events) close() {
	ev.mu.Lock()
	ev.closed = true
	ev.mu.Unlock()
	poke(ev.wake)
	<-ev.done
}

func (ev *events) deliver() {
	defer close(ev.done)
	for {
		ev.mu.Lock()
		batch, closed := ev.queue, ev.closed
		ev.queue = nil
		ev.mu.Unlock()
		for _, f := range batch {
			f()
		}
		if len(batch) == 0 {
			if closed {
				return
			}
			<-ev.wake
		}
	}
}

// poke signals ch, of capacity 1, without blocking.
func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
