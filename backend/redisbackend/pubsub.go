package redisbackend

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
)

// subscriber returns the subscriber of the shard of the lease key name,
// making it if needed. It does no I/O: the subscriber dials on its own
// goroutine when first asked to subscribe.
func (s *Store) subscriber(name string) (*subscriber, error) {
	shard := ""
	if s.sharded {
		shard = strconv.Itoa(hashSlot(name))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done {
		return nil, backend.ErrClosed
	}
	sub := s.subs[shard]
	if sub == nil {
		sub = newSubscriber(s.rdb, s.health, s.sharded, s.marker)
		s.subs[shard] = sub
	}
	return sub, nil
}

// channelLinger is how long a channel stays subscribed after its last
// watch closed and its last handover waiter left. A waiter whose wait
// ended asks the store again and usually waits again at once; the
// subscription, and the handover it may have seen meanwhile, are still
// there for it.
const channelLinger = 2 * time.Second

// retryDelay is how long the writer waits before it sends again a
// SUBSCRIBE that failed.
const retryDelay = 100 * time.Millisecond

// subscriber multiplexes the watches and the handover waiters of one Store
// (of one Cluster slot, with sharded pub/sub) over one pub/sub connection.
//
// Two goroutines own the connection. The writer alone sends on it:
// SUBSCRIBE, UNSUBSCRIBE, PING, and the re-dial that replaces a silent
// connection. The receiver alone reads it. The mutex guards the maps and
// flags they share with the callers and is never held across network
// I/O, so a stalled server delays only the calls that wait for it, each
// until its own deadline. Callers ask for changes by editing the maps and
// waking the writer; they learn that a subscription holds from its
// channel's ready, which the receiver closes on the server's confirmation.
//
// Each channel's SUBSCRIBE is answered before the writer sends its
// UNSUBSCRIBE, and a channel is unsubscribed only once nobody uses it, so
// the confirmations of one connection arrive in the order of the requests
// and each one is the answer to the request the channel's state expects.
type subscriber struct {
	client  redis.UniversalClient
	marker  *marker
	sharded bool // SSUBSCRIBE instead of SUBSCRIBE
	health  time.Duration

	ctx   context.Context // ends when the subscriber closes
	stop  context.CancelFunc
	wake  chan struct{}  // capacity 1: there is work for the writer
	marks chan struct{}  // capacity 1: keepMarks has keys to mark again now
	wg    sync.WaitGroup // the writer, the receiver, keepMarks

	mu       sync.Mutex
	ps       *redis.PubSub // the connection; replaced by the writer only
	armed    chan struct{} // closed once something was sent on ps
	channels map[string]*channel
	started  bool // the writer and keepMarks run
	reading  bool // the receiver runs
	closed   bool
	ping     bool                // the receiver asks the writer to ping
	redial   bool                // the receiver asks the writer to replace ps
	remark   map[string]struct{} // watched keys to mark again now (keepMarks)
}

// channel is the state of one subscribed (or to be subscribed) channel.
type channel struct {
	watches map[*watch]struct{}
	waiters map[*waiter]struct{}

	requested bool          // SUBSCRIBE sent on the current connection, no UNSUBSCRIBE since
	confirmed bool          // and the server confirmed it
	lost      bool          // a subscription was lost since the key was last marked
	ready     chan struct{} // closed when confirmed; a new one after a loss
	idle      time.Time     // when the last user left

	last  handover // the last handover seen while nobody waited for it
	taken uint64   // the newest token a caller of the store was given for the key
}

func (c *channel) used() bool { return len(c.watches) > 0 || len(c.waiters) > 0 }

// newSubscriber returns an idle subscriber. Its goroutines start, and its
// connection is dialed, when the first channel is asked for, so that on a
// Cluster the connection goes to the node of the slot.
func newSubscriber(rdb redis.UniversalClient, health time.Duration, sharded bool, m *marker) *subscriber {
	ctx, stop := context.WithCancel(context.Background())
	return &subscriber{
		client:   rdb,
		marker:   m,
		sharded:  sharded,
		health:   health,
		ctx:      ctx,
		stop:     stop,
		wake:     make(chan struct{}, 1),
		marks:    make(chan struct{}, 1),
		armed:    make(chan struct{}),
		channels: make(map[string]*channel),
		remark:   make(map[string]struct{}),
	}
}

// open returns a PubSub subscribed to names. With no names it does no
// I/O.
func (s *subscriber) open(ctx context.Context, names ...string) *redis.PubSub {
	if s.sharded {
		return s.client.SSubscribe(ctx, names...)
	}
	return s.client.Subscribe(ctx, names...)
}

func (s *subscriber) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// useLocked returns the channel name, making it, and starts the writer if
// it does not run yet. The caller holds mu and adds itself to the
// channel's watches or waiters.
func (s *subscriber) useLocked(name string) *channel {
	c := s.channels[name]
	if c == nil {
		c = &channel{watches: make(map[*watch]struct{}), waiters: make(map[*waiter]struct{}), ready: make(chan struct{})}
		s.channels[name] = c
	}
	if s.ps == nil {
		s.ps = s.open(s.ctx)
	}
	if !s.started {
		s.started = true
		s.wg.Add(2)
		go s.write()
		go s.keepMarks()
	}
	return c
}

// leftLocked notes that a user left c, and wakes the writer, which
// unsubscribes c once it has been idle for channelLinger.
func (s *subscriber) leftLocked(c *channel) {
	if !c.used() {
		c.idle = time.Now()
		s.poke()
	}
}

// write is the writer: the one goroutine that sends on the connection.
func (s *subscriber) write() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := s.writeOnce()
		if next > 0 {
			timer.Reset(next)
		}
		select {
		case <-s.ctx.Done():
			return
		case <-s.wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// writeOnce does what the maps ask for and returns when it should run
// again without being woken (0: only when woken).
func (s *subscriber) writeOnce() time.Duration {
	w, ok := s.work()
	if !ok {
		return 0
	}
	next := w.next
	if len(w.sub) > 0 {
		if err := s.subscribe(w.ps, w.sub); err != nil {
			// go-redis re-dials on the next read but may not
			// re-send these: send them again soon.
			s.unrequest(w.ps, w.sub)
			next = sooner(next, retryDelay)
		}
		s.arm(w.ps, w.armed)
	}
	if len(w.unsub) > 0 {
		// Best effort: a subscription left behind is harmless; the
		// receiver ignores messages for channels nobody uses.
		_ = s.unsubscribe(w.ps, w.unsub)
	}
	if w.ping {
		_ = w.ps.Ping(s.ctx)
	}
	return next
}

// writes is what one pass of the writer sends, on ps.
type writes struct {
	ps         *redis.PubSub
	armed      chan struct{}
	sub, unsub []string      // channels to subscribe and to unsubscribe
	ping       bool          // the receiver asked for a ping
	next       time.Duration // when a lingering channel is due (0: none)
}

// work takes what the maps ask the writer to send, first replacing the
// connection if the receiver asked for it. It reports false once the
// subscriber is closed.
func (s *subscriber) work() (writes, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return writes{}, false
	}
	if s.redial {
		s.redial, s.ping = false, false
		s.mu.Unlock()
		s.reconnect()
		s.mu.Lock()
	}
	w := writes{ping: s.ping}
	s.ping = false
	w.sub, w.unsub, w.next = s.planLocked(time.Now())
	w.ps, w.armed = s.ps, s.armed
	return w, true
}

// planLocked walks the channels: one in use and not yet asked for is to
// be subscribed; one idle for channelLinger, unsubscribed and forgotten
// (at once if it was never asked for). next is when the next idle one is
// due. A channel whose SUBSCRIBE is unanswered waits for the answer.
func (s *subscriber) planLocked(now time.Time) (sub, unsub []string, next time.Duration) {
	for name, c := range s.channels {
		switch {
		case c.used() && !c.requested:
			c.requested = true
			sub = append(sub, name)
		case c.used() || (c.requested && !c.confirmed):
			// In use, or waiting for the answer to its SUBSCRIBE.
		case !c.requested:
			delete(s.channels, name)
		case now.Sub(c.idle) >= channelLinger:
			unsub = append(unsub, name)
			delete(s.channels, name)
		default:
			next = sooner(next, channelLinger-now.Sub(c.idle))
		}
	}
	return sub, unsub, next
}

// unrequest notes that the SUBSCRIBE of names on ps failed: the channels
// not confirmed meanwhile are sent again by a later pass, unless ps was
// replaced since (reconnect subscribed them anew).
func (s *subscriber) unrequest(ps *redis.PubSub, names []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range names {
		if c := s.channels[name]; c != nil && ps == s.ps && !c.confirmed {
			c.requested = false
		}
	}
}

// sooner returns the shorter of two delays, where 0 is none.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || b < a {
		return b
	}
	return a
}

// arm lets the receiver read ps, now that something was sent on it (on
// a Cluster, reading first would dial a node at random), starting the
// receiver the first time.
func (s *subscriber) arm(ps *redis.PubSub, armed chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ps != ps || s.closed {
		return
	}
	select {
	case <-armed:
	default:
		close(armed)
	}
	if !s.reading {
		s.reading = true
		s.wg.Add(1)
		go s.receive()
	}
}

func (s *subscriber) subscribe(ps *redis.PubSub, names []string) error {
	if s.sharded {
		return ps.SSubscribe(s.ctx, names...)
	}
	return ps.Subscribe(s.ctx, names...)
}

func (s *subscriber) unsubscribe(ps *redis.PubSub, names []string) error {
	if s.sharded {
		return ps.SUnsubscribe(s.ctx, names...)
	}
	return ps.Unsubscribe(s.ctx, names...)
}

// reconnect replaces a connection that stopped answering. Closing the old
// PubSub and subscribing a new one to every channel in use is the only way
// to force go-redis to dial again. The dial happens before the swap,
// outside mu; confirmations read from the old connection after the swap
// are ignored.
func (s *subscriber) reconnect() {
	s.mu.Lock()
	names := make([]string, 0, len(s.channels))
	for name, c := range s.channels {
		if c.requested {
			names = append(names, name)
		}
		s.lostLocked(c)
	}
	s.mu.Unlock()

	ps := s.open(s.ctx, names...)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = ps.Close()
		return
	}
	old := s.ps
	s.ps, s.armed = ps, make(chan struct{})
	if len(names) > 0 {
		close(s.armed)
	}
	// A channel asked for while the new connection was dialed is sent
	// on it by the next pass.
	for name, c := range s.channels {
		if !c.confirmed && !slices.Contains(names, name) {
			c.requested = false
		}
	}
	s.signalAllLocked()
	s.mu.Unlock()
	_ = old.Close()
}

// lostLocked notes that c's subscription may no longer hold: its waiters
// and watchers wait for the next confirmation, and a handover remembered
// from before may since have been released unseen. No message from before
// can arrive any more, so the tokens given out before no longer matter
// (and a server that lost its data may give out lower ones). The server
// may also have lost the watch marker (a restart without its data), so
// the key is marked again once the subscription is confirmed.
func (s *subscriber) lostLocked(c *channel) {
	if c.confirmed {
		c.confirmed = false
		c.ready = make(chan struct{})
	}
	c.lost = true
	c.last = handover{}
	c.taken = 0
}

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
// its waiters to look in their mailboxes.
func (s *subscriber) confirm(ps *redis.PubSub, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[name]
	if c == nil || ps != s.ps || !c.requested || c.confirmed {
		return
	}
	c.confirmed = true
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
			if tok, ok := parseToken(f[1]); ok && backend.ValidateOwner(f[3]) == nil {
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
// re-dial) reaches watchers only: the waiters look in their mailboxes
// again once the new subscription holds.
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
	for w := range c.waiters {
		if w.owner == h.owner {
			select {
			case w.found <- h:
			default:
			}
			return
		}
	}
	c.last = h
}

// close stops the goroutines and closes the connection. It waits for the
// writer to finish what it is sending, then closes the connection so that
// the receiver's read ends.
func (s *subscriber) close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.mu.Lock()
	ps := s.ps
	s.mu.Unlock()
	var err error
	if ps != nil {
		err = ps.Close()
	}
	s.wg.Wait()
	// The writer may have swapped in a new connection meanwhile; reconnect
	// closes one it made after closed was set, and Close of the one
	// closed above reports ErrClosed for it.
	s.mu.Lock()
	last := s.ps
	s.mu.Unlock()
	if last != ps {
		_ = last.Close()
	}
	return err
}
