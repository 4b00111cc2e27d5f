package role

import (
	"context"
	"sync"
)

type eventKind int

const (
	evElected eventKind = iota
	evDemoted
	evMasterChange
	evDuplicate
	evObserved // for the observer only
)

type event struct {
	kind  eventKind
	ctx   context.Context // evElected: the tenure's context
	id    string          // evMasterChange: the new master; evDuplicate: the other owner
	epoch uint64          // evElected, evDemoted: the tenure's epoch
	obs   Event           // evObserved
}

// events delivers callbacks in order on one goroutine, so a slow callback
// never delays a renewal and callbacks of one elector never overlap.
type events struct {
	hooks hooks

	mu     sync.Mutex
	queue  []event
	wake   chan struct{}
	closed bool
	done   chan struct{}
}

func newEvents(h hooks) *events {
	ev := &events{hooks: h, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go ev.deliver()
	return ev
}

// push queues e; it never blocks.
func (ev *events) push(e event) {
	ev.mu.Lock()
	ev.queue = append(ev.queue, e)
	ev.mu.Unlock()
	select {
	case ev.wake <- struct{}{}:
	default:
	}
}

// close delivers what is queued, then stops the goroutine and waits for it.
func (ev *events) close() {
	ev.mu.Lock()
	ev.closed = true
	ev.mu.Unlock()
	select {
	case ev.wake <- struct{}{}:
	default:
	}
	<-ev.done
}

func (ev *events) deliver() {
	defer close(ev.done)
	for {
		ev.mu.Lock()
		batch := ev.queue
		ev.queue = nil
		closed := ev.closed
		ev.mu.Unlock()
		for _, e := range batch {
			ev.call(e)
		}
		if len(batch) == 0 {
			if closed {
				return
			}
			<-ev.wake
		}
	}
}

func (ev *events) call(e event) {
	if f := ev.hooks.observer; f != nil {
		switch e.kind {
		case evObserved:
			f(e.obs)
		case evElected:
			f(Event{Kind: EventElected, Epoch: e.epoch})
		case evDemoted:
			f(Event{Kind: EventDemoted, Epoch: e.epoch})
		case evMasterChange:
			f(Event{Kind: EventMasterChange, Epoch: e.epoch, Master: e.id})
		}
	}
	switch e.kind {
	case evElected:
		if ev.hooks.elected != nil {
			ev.hooks.elected(e.ctx)
		}
	case evDemoted:
		if ev.hooks.demoted != nil {
			ev.hooks.demoted()
		}
	case evMasterChange:
		if ev.hooks.masterChange != nil {
			ev.hooks.masterChange(e.id)
		}
	case evDuplicate:
		if ev.hooks.duplicate != nil {
			ev.hooks.duplicate(e.id)
		}
	}
}
