package role

import (
	"context"
	"sync"
)

// events runs an elector's callbacks in order, one at a time, on a
// goroutine it starts while any are queued, so a slow callback never
// delays a renewal and callbacks of one elector never overlap.
type events struct {
	elected      func(context.Context)
	demoted      func()
	masterChange func(string)
	duplicate    func(string)
	observer     func(Event)

	mu    sync.Mutex
	queue []func()
	busy  bool           // a goroutine is running the queue
	idle  sync.WaitGroup // waits for that goroutine; once Run waits on it, no step is queued
}

// step queues one step of the election: the observer's report obs (none
// if obs.Kind is 0), then f, if not nil. It never blocks.
func (ev *events) step(obs Event, f func()) {
	o := ev.observer
	if obs.Kind == 0 {
		o = nil
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.queue = append(ev.queue, func() {
		if o != nil {
			o(obs)
		}
		if f != nil {
			f()
		}
	})
	if !ev.busy {
		ev.busy = true
		ev.idle.Go(ev.deliver)
	}
}

// bind returns f applied to v, or nil if f is nil.
func bind[T any](f func(T), v T) func() {
	if f == nil {
		return nil
	}
	return func() { f(v) }
}

func (ev *events) deliver() {
	for {
		ev.mu.Lock()
		batch := ev.queue
		ev.queue, ev.busy = nil, len(batch) > 0
		ev.mu.Unlock()
		if len(batch) == 0 {
			return
		}
		for _, f := range batch {
			f()
		}
	}
}
