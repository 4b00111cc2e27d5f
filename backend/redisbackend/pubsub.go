package redisbackend

import (
	"context"
	"slices"
	"strconv"
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
		sub = newSubscriber(s.rdb, s.health, s.sharded, s.marker, s.wakeSuffix)
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
	// wakeSuffix is what the store adds to a lease key's name to name
	// the key's wake-up channel (wakeChannel).
	wakeSuffix string

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
	gens     uint64              // confirmations so far, numbering each channel's (channel.gen)
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

	// gen numbers the confirmation the channel's subscription holds by
	// (unique within the subscriber); asked is, for each owner whose
	// AcquireQueued was sent while the subscription held, the gen it held
	// by then (see subscriber.asking).
	gen   uint64
	asked map[string]uint64
}

func (c *channel) used() bool { return len(c.watches) > 0 || len(c.waiters) > 0 }

// newSubscriber returns an idle subscriber. Its goroutines start, and its
// connection is dialed, when the first channel is asked for, so that on a
// Cluster the connection goes to the node of the slot.
func newSubscriber(rdb redis.UniversalClient, health time.Duration, sharded bool, m *marker, wakeSuffix string) *subscriber {
	ctx, stop := context.WithCancel(context.Background())
	return &subscriber{
		client:     rdb,
		marker:     m,
		sharded:    sharded,
		wakeSuffix: wakeSuffix,
		health:     health,
		ctx:        ctx,
		stop:       stop,
		wake:       make(chan struct{}, 1),
		marks:      make(chan struct{}, 1),
		armed:      make(chan struct{}),
		channels:   make(map[string]*channel),
		remark:     make(map[string]struct{}),
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
