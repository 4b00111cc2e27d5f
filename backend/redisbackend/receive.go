package redisbackend

import (
	"errors"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
)

// receive is the receiver: the one goroutine that reads the connection.
func (s *subscriber) receive() {
	defer s.wg.Done()
	var h readHealth
	for {
		ps, ok := s.armedConn()
		if !ok {
			return
		}
		msg, err := ps.ReceiveTimeout(s.ctx, s.health)
		if s.ctx.Err() != nil {
			return
		}
		if err != nil {
			if !s.failed(ps, err, &h) {
				return
			}
			continue
		}
		h.silent = 0
		if h.broken {
			h.broken = false
			s.signalAll()
		}
		s.dispatch(ps, msg)
	}
}

// readHealth is what the receiver knows of the connection.
type readHealth struct {
	silent int  // health intervals without any traffic
	broken bool // the last receive failed
}

// armedConn waits until something was sent on the current connection
// and returns it. It reports false once the subscriber closes.
func (s *subscriber) armedConn() (*redis.PubSub, bool) {
	s.mu.Lock()
	ps, armed := s.ps, s.armed
	s.mu.Unlock()
	select {
	case <-armed:
		return ps, true
	case <-s.ctx.Done():
		return nil, false
	}
}

// failed handles a receive from ps that failed with err: a health
// interval of silence asks the writer for a ping, three in a row for a
// new connection; any other error counts as a broken connection. It
// reports false once the subscriber closes.
func (s *subscriber) failed(ps *redis.PubSub, err error, h *readHealth) bool {
	var nerr interface{ Timeout() bool }
	if errors.As(err, &nerr) && nerr.Timeout() {
		h.silent++
		s.mu.Lock()
		if h.silent >= 3 {
			// Pinged twice without an answer: the connection is
			// dead without having said so.
			s.redial = true
			h.silent = 0
		} else {
			s.ping = true
		}
		s.mu.Unlock()
		s.poke()
		return true
	}
	// The client reconnects and re-subscribes on the next receive;
	// releases published meanwhile are lost, so every watcher is told to
	// look again now and once more when the connection is back.
	if !h.broken {
		h.broken = true
		s.broke(ps)
	}
	select {
	case <-time.After(50 * time.Millisecond):
		return true
	case <-s.ctx.Done():
		return false
	}
}

// broke notes that ps failed: if it is still the connection, every
// channel's subscription may be lost; every watcher is told to look.
func (s *subscriber) broke(ps *redis.PubSub) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ps == s.ps {
		for _, c := range s.channels {
			s.lostLocked(c)
		}
	}
	s.signalAllLocked()
}

// dispatch hands a message read from ps to its step: a published
// message, or the server's answer to a SUBSCRIBE or an UNSUBSCRIBE.
func (s *subscriber) dispatch(ps *redis.PubSub, msg any) {
	switch m := msg.(type) {
	case *redis.Message:
		s.deliver(ps, m.Channel, m.Payload)
	case *redis.Subscription:
		switch m.Kind {
		case "subscribe", "ssubscribe":
			s.confirm(ps, m.Channel)
		case "unsubscribe", "sunsubscribe":
			s.unsubscribed(ps, m.Channel)
		}
	}
}

// confirm marks name subscribed, as the server confirmed on ps, and tells
// its waiters to look at the lease.
func (s *subscriber) confirm(ps *redis.PubSub, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[name]
	if c == nil || ps != s.ps || !c.requested || c.confirmed {
		return
	}
	c.confirmed = true
	s.gens++
	c.gen = s.gens
	close(c.ready)
	if c.lost {
		// Subscribed again after a loss: the server may have lost the
		// marker with its data, and releases of plain leases would go
		// unpublished until the next refresh. Mark the key now (the
		// subscription holds, so nothing published after the mark is
		// missed); keepMarks does it, off the receiver and off mu.
		c.lost = false
		if len(c.watches) > 0 {
			s.remark[name] = struct{}{}
			select {
			case s.marks <- struct{}{}:
			default:
			}
		}
	}
	for w := range c.waiters {
		select {
		case w.look <- struct{}{}:
		default:
		}
	}
	if !c.used() {
		s.poke()
	}
}

// unsubscribed handles an UNSUBSCRIBE confirmation. One for a confirmed
// channel was not asked for (a Cluster moved the slot): the channel is
// subscribed again and its users are told to look.
func (s *subscriber) unsubscribed(ps *redis.PubSub, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[name]
	if c == nil || ps != s.ps || !c.confirmed {
		return
	}
	s.lostLocked(c)
	c.requested = false
	for w := range c.watches {
		backend.Notify(w.ch, backend.Event{Kind: backend.EventMaybeFree})
	}
	s.poke()
}

// parseEvent reads a message published by the scripts: "released <token>
// <next>" (next may be empty; token is "-" when a waiter left the line),
// "renewed <token> <ttl-ms>", or, for a handover, "renewed <token> <ttl-ms>
// <new owner>". Anything else counts as "may be free", the safe reading:
// so does a release naming as next a waiter no line could hold. h names
// the new owner of a handover, and is zero otherwise; a handover whose
// token or owner no script could have written is only a renewal.
func parseEvent(payload string) (backend.Event, handover) {
	f := strings.SplitN(payload, " ", 4)
	switch {
	case len(f) >= 2 && len(f) <= 3 && f[0] == "released":
		ev := backend.Event{Kind: backend.EventReleased}
		if len(f) == 3 && f[2] != "" {
			if backend.ValidateOwner(f[2]) != nil {
				break // no line could hold that waiter: may be free
			}
			ev.Next = f[2]
		}
		return ev, handover{}
	case len(f) >= 3 && f[0] == "renewed":
		ttl, ok := parsePositiveMillis(f[2])
		if !ok {
			break
		}
		ev := backend.Event{Kind: backend.EventRenewed, TTL: ttl}
		var h handover
		if len(f) == 4 && f[3] != "" {
			if tok, ok := backend.ParseToken(f[1]); ok && backend.ValidateOwner(f[3]) == nil {
				h = handover{owner: f[3], token: tok, ttl: ev.TTL}
			}
		}
		return ev, h
	}
	return backend.Event{Kind: backend.EventMaybeFree}, handover{}
}

// deliver passes a published message to the channel's watchers and, for a
// handover, to the new owner's waiter, or remembers it for the owner's
// next wait when no waiter of it is there. Every message replaces the
// memory: a later one means the handover was taken or is over. A message
// read from a connection whose subscription was since given up (a
// re-dial) reaches watchers only: the waiters look at the lease again
// once the new subscription holds.
func (s *subscriber) deliver(ps *redis.PubSub, name, payload string) {
	arrived := time.Now()
	ev, h := parseEvent(payload)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[name]
	if c == nil {
		return
	}
	for w := range c.watches {
		backend.Notify(w.ch, ev)
	}
	c.last = handover{}
	if h.owner == "" || h.token <= c.taken || ps != s.ps || !c.confirmed {
		return
	}
	h.at = arrived
	// A handover heard on the key's own channel (watched) goes to the
	// owner's waiter on the key's wake-up channel, if one waits there.
	if twin := s.twinLocked(name); twin != nil && h.token > twin.taken && handLocked(twin, h) {
		return
	}
	if !handLocked(c, h) {
		c.last = h
	}
}

// handLocked passes h to its owner's waiter on c, if one waits there.
func handLocked(c *channel, h handover) bool {
	for w := range c.waiters {
		if w.owner == h.owner {
			select {
			case w.found <- h:
			default:
			}
			return true
		}
	}
	return false
}
