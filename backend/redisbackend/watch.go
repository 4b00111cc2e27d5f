package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
)

// Watch implements backend.Store. It returns once the server has
// confirmed the subscription.
func (s *Store) Watch(ctx context.Context, key string) (backend.Watch, error) {
	if err := s.begin(ctx, "watch", key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		return nil, fmt.Errorf("redisbackend: watch %q: %w", key, backend.ErrClosed)
	}
	name := s.LeaseKey(key)
	shard := ""
	if s.sharded {
		shard = strconv.Itoa(hashSlot(name))
	}
	sub := s.subs[shard]
	if sub == nil {
		sub = newSubscriber(s.rdb, s.health, s.sharded, s.marker)
		s.subs[shard] = sub
	}
	s.mu.Unlock()

	w, err := sub.watch(ctx, name)
	if err != nil {
		return nil, s.transport("watch", key, ctx, err)
	}
	// Subscribed: now mark the key, so that releases are published from
	// here on (see marker).
	if err := s.marker.mark(ctx, name); err != nil {
		_ = w.Close()
		return nil, s.transport("watch", key, ctx, err)
	}
	return w, nil
}

// marker keeps the watch marker of watched keys alive. A release of a
// lease that nobody waits for publishes nothing (scripts.go); a Watch
// tells the scripts that someone listens by setting the marker
// "<lease key>:watch-mark" and flagging the current lease contended, and its
// subscriber refreshes the marker every ttl/3 while the watch is open.
// Once the last watch closes, the marker expires within ttl; until then
// releases are published for nobody, which costs a little and nothing
// else.
type marker struct {
	rdb     redis.UniversalClient
	scripts *scriptSet
	ttl     time.Duration
}

// defaultMarkerTTL is how long a watch marker outlives its last refresh.
const defaultMarkerTTL = 30 * time.Second

func (m *marker) mark(ctx context.Context, name string) error {
	return m.scripts.mark.Run(ctx, m.rdb, []string{name}, m.ttl.Milliseconds()).Err()
}

// subscriber multiplexes the watches of one Store (of one Cluster slot,
// with sharded pub/sub) over one pub/sub connection. Channels are subscribed while at least one watch needs them.
// At most one SUBSCRIBE per channel is in flight, so the first
// "subscribe" confirmation seen for a channel while one is pending is the
// answer to it.
type subscriber struct {
	client  redis.UniversalClient
	marker  *marker
	sharded bool // SSUBSCRIBE instead of SUBSCRIBE
	started sync.Once
	ps      *redis.PubSub // replaced only by the receive goroutine, under mu
	health  time.Duration
	stop    context.CancelFunc
	ctx     context.Context
	wg      sync.WaitGroup

	mu       sync.Mutex
	channels map[string]*channel
	closed   bool
}

type channel struct {
	watches    map[*watch]struct{}
	subscribed bool
	pending    bool            // a SUBSCRIBE is in flight
	confirmed  []chan struct{} // closed when the pending SUBSCRIBE is confirmed
}

// newSubscriber returns an idle subscriber; its connection is opened, and
// its receiving goroutine started, by the first subscription, so that on a
// Cluster the connection goes to the node of the slot.
func newSubscriber(rdb redis.UniversalClient, health time.Duration, sharded bool, m *marker) *subscriber {
	ctx, stop := context.WithCancel(context.Background())
	s := &subscriber{
		client:   rdb,
		marker:   m,
		sharded:  sharded,
		health:   health,
		ctx:      ctx,
		stop:     stop,
		channels: make(map[string]*channel),
	}
	s.ps = s.open(ctx)
	return s
}

// open returns a PubSub subscribed to names (none at first).
func (s *subscriber) open(ctx context.Context, names ...string) *redis.PubSub {
	if s.sharded {
		return s.client.SSubscribe(ctx, names...)
	}
	return s.client.Subscribe(ctx, names...)
}

func (s *subscriber) subscribe(ctx context.Context, name string) error {
	if s.sharded {
		return s.ps.SSubscribe(ctx, name)
	}
	return s.ps.Subscribe(ctx, name)
}

func (s *subscriber) unsubscribe(ctx context.Context, name string) error {
	if s.sharded {
		return s.ps.SUnsubscribe(ctx, name)
	}
	return s.ps.Unsubscribe(ctx, name)
}

func (s *subscriber) watch(ctx context.Context, name string) (*watch, error) {
	w := &watch{sub: s, name: name, ch: make(chan backend.Event, 1)}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, backend.ErrClosed
	}
	c := s.channels[name]
	if c == nil {
		c = &channel{watches: make(map[*watch]struct{})}
		s.channels[name] = c
	}
	c.watches[w] = struct{}{}
	if c.subscribed {
		s.mu.Unlock()
		return w, nil
	}
	ready := make(chan struct{})
	c.confirmed = append(c.confirmed, ready)
	if !c.pending {
		c.pending = true
		if err := s.subscribe(ctx, name); err != nil {
			c.pending = false
			c.confirmed = nil
			s.dropLocked(w)
			s.mu.Unlock()
			return nil, err
		}
		s.started.Do(func() {
			s.wg.Add(2)
			go s.receive()
			go s.keepMarks()
		})
	}
	s.mu.Unlock()

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

// dropLocked removes w and unsubscribes its channel when nobody needs it
// and no SUBSCRIBE is in flight (the receiver handles that case when the
// confirmation arrives).
func (s *subscriber) dropLocked(w *watch) {
	c := s.channels[w.name]
	if c == nil {
		return
	}
	delete(c.watches, w)
	if len(c.watches) > 0 || c.pending {
		return
	}
	if c.subscribed && !s.closed {
		// Best effort: a failed UNSUBSCRIBE leaves a harmless
		// subscription that the receiver drops on its next confirmation.
		_ = s.unsubscribe(context.Background(), w.name)
	}
	delete(s.channels, w.name)
}

func (s *subscriber) receive() {
	defer s.wg.Done()
	silent := 0     // health intervals without any traffic
	broken := false // the last receive failed
	for {
		msg, err := s.ps.ReceiveTimeout(s.ctx, s.health)
		if s.ctx.Err() != nil {
			return
		}
		if err != nil {
			var nerr interface{ Timeout() bool }
			if errors.As(err, &nerr) && nerr.Timeout() {
				silent++
				if silent >= 3 {
					// Pinged twice without an answer: the
					// connection is dead without having said so.
					s.reconnect()
					silent = 0
				} else {
					_ = s.ps.Ping(s.ctx)
				}
				continue
			}
			// The client reconnects and re-subscribes on the next
			// receive; releases published meanwhile are lost, so every
			// watcher is told to look again now and once more when the
			// connection is back.
			if !broken {
				broken = true
				s.signalAll()
			}
			select {
			case <-time.After(50 * time.Millisecond):
			case <-s.ctx.Done():
				return
			}
			continue
		}
		silent = 0
		if broken {
			broken = false
			s.signalAll()
		}
		switch m := msg.(type) {
		case *redis.Message:
			s.signal(m.Channel, parseEvent(m.Payload))
		case *redis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				s.confirm(m.Channel)
			}
		}
	}
}

// keepMarks refreshes the watch markers of the subscribed keys every
// third of their ttl. When a refresh fails, or comes too late, a marker
// may have lapsed and a release gone unpublished, so the key's watchers
// are told to look again.
func (s *subscriber) keepMarks() {
	defer s.wg.Done()
	every := s.marker.ttl / 3
	t := time.NewTicker(every)
	defer t.Stop()
	last := time.Now() // the oldest refresh any marker may date from
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		names := make([]string, 0, len(s.channels))
		for name := range s.channels {
			names = append(names, name)
		}
		s.mu.Unlock()
		start := time.Now()
		late := start.Sub(last) >= s.marker.ttl
		for _, name := range names {
			ctx, cancel := context.WithTimeout(s.ctx, every)
			err := s.marker.mark(ctx, name)
			cancel()
			if s.ctx.Err() != nil {
				return
			}
			if err != nil || late {
				s.signal(name, backend.Event{Kind: backend.EventMaybeFree})
			}
		}
		last = start
	}
}

// reconnect replaces a connection that stopped answering. Closing the
// old PubSub and subscribing a new one to every channel in use is the
// only way to force go-redis to dial again.
func (s *subscriber) reconnect() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	_ = s.ps.Close()
	names := make([]string, 0, len(s.channels))
	for name, c := range s.channels {
		names = append(names, name)
		c.pending, c.subscribed = true, false
	}
	s.ps = s.open(s.ctx, names...)
	s.signalAllLocked()
}

func (s *subscriber) confirm(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[name]
	if c == nil {
		// Re-subscribed after a reconnect but no longer needed.
		_ = s.unsubscribe(s.ctx, name)
		return
	}
	c.pending, c.subscribed = false, true
	for _, ready := range c.confirmed {
		close(ready)
	}
	c.confirmed = nil
	if len(c.watches) == 0 {
		_ = s.unsubscribe(s.ctx, name)
		delete(s.channels, name)
	}
}

// parseEvent reads a message published by the scripts: "released <token>
// <next>" (next may be empty; token is "-" when a waiter left the line)
// or "renewed <token> <ttl-ms>". Anything else counts as "may be free",
// the safe reading.
func parseEvent(payload string) backend.Event {
	f := strings.SplitN(payload, " ", 3)
	switch {
	case len(f) >= 2 && f[0] == "released":
		ev := backend.Event{Kind: backend.EventReleased}
		if len(f) == 3 {
			ev.Next = f[2]
		}
		return ev
	case len(f) == 3 && f[0] == "renewed":
		if ms, err := strconv.ParseInt(f[2], 10, 64); err == nil && ms > 0 {
			return backend.Event{Kind: backend.EventRenewed, TTL: time.Duration(ms) * time.Millisecond}
		}
	}
	return backend.Event{Kind: backend.EventMaybeFree}
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

func (s *subscriber) close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stop()
	err := s.ps.Close()
	s.wg.Wait()
	return err
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
		w.sub.mu.Lock()
		defer w.sub.mu.Unlock()
		w.sub.dropLocked(w)
	})
	return nil
}
