package redisbackend

import (
	"context"
	"fmt"
	"sync"

	"github.com/baton-go/baton/backend"
)

// Watch implements backend.Store. It returns once the server has
// confirmed the subscription and the key is marked, or when ctx ends,
// whichever comes first: a stalled server delays only this call.
func (s *Store) Watch(ctx context.Context, key string) (backend.Watch, error) {
	if err := s.begin(ctx, "watch", key); err != nil {
		return nil, err
	}
	name := s.LeaseKey(key)
	sub, err := s.subscriber(name)
	if err != nil {
		return nil, fmt.Errorf("redisbackend: watch %q: %w", key, err)
	}
	w, err := sub.watch(ctx, name)
	if err != nil {
		return nil, s.transport("watch", key, ctx, err)
	}
	// Subscribed: now mark the key, so that releases are published from
	// here on (see marker).
	if err := s.bounded(ctx, func(ctx context.Context) error { return s.marker.mark(ctx, name) }); err != nil {
		_ = w.Close()
		return nil, s.transport("watch", key, ctx, err)
	}
	return w, nil
}

func (s *subscriber) watch(ctx context.Context, name string) (*watch, error) {
	w := &watch{sub: s, name: name, ch: make(chan backend.Event, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, backend.ErrClosed
	}
	c := s.useLocked(name)
	c.watches[w] = struct{}{}
	ready := c.ready
	s.mu.Unlock()
	s.poke()

	select {
	case <-ready:
		return w, nil
	case <-ctx.Done():
		w.Close()
		return nil, backend.ContextError(ctx)
	case <-s.ctx.Done():
		w.Close()
		return nil, backend.ErrClosed
	}
}

func (s *subscriber) signal(name string, ev backend.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.channels[name]; c != nil {
		for w := range c.watches {
			backend.Notify(w.ch, ev)
		}
	}
}

func (s *subscriber) signalAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.signalAllLocked()
}

func (s *subscriber) signalAllLocked() {
	for _, c := range s.channels {
		for w := range c.watches {
			backend.Notify(w.ch, backend.Event{Kind: backend.EventMaybeFree})
		}
	}
}

type watch struct {
	sub  *subscriber
	name string
	ch   chan backend.Event
	once sync.Once
}

func (w *watch) C() <-chan backend.Event { return w.ch }

func (w *watch) Close() error {
	w.once.Do(func() {
		s := w.sub
		s.mu.Lock()
		defer s.mu.Unlock()
		if c := s.channels[w.name]; c != nil {
			delete(c.watches, w)
			s.leftLocked(c)
		}
	})
	return nil
}
