package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
)

// AwaitHandover implements backend.Handover. It waits on the store's
// pub/sub connection, never on a connection of the client's pool: the
// release that hands a key over publishes "renewed <token> <ttl> <owner>"
// on the key's channel, and the store's subscriber passes it to the
// owner's waiter. The channel stays subscribed for a while after the wait
// (channelLinger), and a handover it sees while the owner is not waiting
// is kept for the owner's next wait. A handover published before the
// subscription held is found by one look at the key's lease (GET and
// PTTL in one MULTI: a handover leaves "<token> <owner> contended") once
// the server has confirmed the subscription, and again after every
// re-subscription; but not when the subscription held already when the
// owner's last AcquireQueued was sent, and has held since. The look cannot
// tell a handover from a contended lease that AcquireQueued granted the
// owner itself: it takes that for one too, unless the store saw the
// owner given it (Store.taken). A caller waits only while it does not
// hold the key, as synclock's claims do (each with an owner of its own).
// A release writes no mailbox (MailboxKey): a waiter of an older baton
// that missed the message gets the lease from its next AcquireQueued.
//
// max is measured by a timer of the client: the wait ends at max even
// when the pub/sub connection is broken or the server stalls; the caller
// then asks again with AcquireQueued, which returns a lease handed to it
// meanwhile. A look that the server does not answer in time is
// abandoned (Close waits for it).
//
// A store made WithReplicaAck does not hand over (the releasing client
// could not wait for the grantee's replicas): AwaitHandover then fails
// with errors.ErrUnsupported.
func (s *Store) AwaitHandover(ctx context.Context, key, owner string, max time.Duration) (backend.Lease, bool, error) {
	if err := s.checkAwait(ctx, key, owner, max); err != nil {
		return backend.Lease{}, false, err
	}
	timer := time.NewTimer(max)
	defer timer.Stop()
	name := s.wakeChannel(key)
	sub, err := s.subscriber(name)
	if err != nil {
		return backend.Lease{}, false, fmt.Errorf("redisbackend: await handover %q: %w", key, err)
	}
	w, h, ok, err := sub.await(name, owner)
	if err != nil {
		return backend.Lease{}, false, fmt.Errorf("redisbackend: await handover %q: %w", key, err)
	}
	if ok {
		return h.lease(key, time.Now()), true, nil
	}
	var took uint64 // the token of the lease returned, if one
	defer func() { w.leave(took) }()
	l, ok, err := s.waitHandover(ctx, key, w, timer.C)
	if ok {
		took = l.Token
	}
	return l, ok, err
}

// checkAwait checks a call of AwaitHandover before it waits.
func (s *Store) checkAwait(ctx context.Context, key, owner string, max time.Duration) error {
	if err := s.begin(ctx, "await handover", key); err != nil {
		return err
	}
	if err := errors.Join(backend.ValidateOwner(owner), backend.ValidateMaxWait(max)); err != nil {
		return fmt.Errorf("redisbackend: await handover: %w", err)
	}
	if s.replicas > 0 {
		return fmt.Errorf("redisbackend: await handover %q: %w: a store that waits for replicas (WithReplicaAck) does not hand keys over; wait for releases instead", key, errors.ErrUnsupported)
	}
	return nil
}

// waitHandover waits as w for key's handover: announced on the channel
// (found), or found in the lease by a look, which w is told to take
// each time the subscription is confirmed; until the timer fires, ctx
// ends or the store closes.
func (s *Store) waitHandover(ctx context.Context, key string, w *waiter, timer <-chan time.Time) (backend.Lease, bool, error) {
	lk := &looker{s: s, ctx: ctx, key: key, owner: w.owner}
	for {
		select {
		case h := <-w.found:
			return h.lease(key, time.Now()), true, nil
		case <-w.look:
			if err := lk.ask(); err != nil {
				return backend.Lease{}, false, err
			}
		case r := <-lk.inflight:
			if l, ok, err := lk.back(r); ok || err != nil {
				return l, ok, err
			}
		case <-timer:
			return backend.Lease{}, false, nil
		case <-ctx.Done():
			return backend.Lease{}, false, fmt.Errorf("redisbackend: await handover %q: %w", key, backend.ContextError(ctx))
		case <-w.sub.ctx.Done():
			return backend.Lease{}, false, fmt.Errorf("redisbackend: await handover %q: %w", key, backend.ErrClosed)
		}
	}
}

// looker runs the looks of one wait at key's lease, one at a time: a
// look asked for while one is in flight follows when it is back.
type looker struct {
	s          *Store
	ctx        context.Context
	key, owner string
	inflight   chan lookResult // the look in flight, if any
	again      bool            // look again once it is back
}

// ask starts a look, or asks for one more once the look in flight is
// back.
func (lk *looker) ask() error {
	if lk.inflight != nil {
		lk.again = true
		return nil
	}
	return lk.start()
}

func (lk *looker) start() error {
	var err error
	if lk.inflight, err = lk.s.look(lk.ctx, lk.key, lk.owner); err != nil {
		return fmt.Errorf("redisbackend: await handover %q: %w", lk.key, err)
	}
	return nil
}

// back takes the result of the look in flight: the lease handed to the
// owner (ok), the look's error, or neither, after starting the look
// asked for meanwhile, if any.
func (lk *looker) back(r lookResult) (backend.Lease, bool, error) {
	lk.inflight = nil
	if r.err != nil {
		return backend.Lease{}, false, lk.s.transport("await handover", lk.key, lk.ctx, r.err)
	}
	if r.ok {
		return r.lease, true, nil
	}
	if lk.again {
		lk.again = false
		return backend.Lease{}, false, lk.start()
	}
	return backend.Lease{}, false, nil
}

// taken notes that a caller of s now knows of the lease of key with
// token: a handover announced with that token or an older one, seen on
// key's channels, is not returned by a later AwaitHandover (its owner may
// have released it since, before the release's message arrived).
func (s *Store) taken(key string, token uint64) {
	s.onChannel(key, func(c *channel) { c.taken = max(c.taken, token) })
}

// asking notes, before owner's AcquireQueued of key is sent, whether the
// store's subscription to key's wake-up channel holds then (see
// subscriber.asking). It reports whether the store has a channel of key:
// a wait or watch of key is under way or ended lately, so the key is
// likely held.
func (s *Store) asking(key, owner string) bool {
	sub, name := s.subscribed(key)
	if sub == nil {
		return false
	}
	return sub.asking(name, owner)
}

// forgetAsk forgets what asking noted for owner's AcquireQueued of key,
// which no wait follows (it was granted or failed), so that the notes of
// the owners of a key that stays subscribed do not pile up.
func (s *Store) forgetAsk(key, owner string) {
	s.onChannel(key, func(c *channel) { delete(c.asked, owner) })
}

// onChannel runs f on each channel of key that the store has (its
// wake-up channel, and the key's own, which watches use), under their
// subscriber's lock.
func (s *Store) onChannel(key string, f func(c *channel)) {
	sub, name := s.subscribed(key)
	if sub == nil {
		return
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if c := sub.channels[name]; c != nil {
		f(c)
	}
	if c := sub.twinLocked(name); c != nil {
		f(c)
	}
}

// subscribed returns the subscriber of key's shard, or nil if the store
// has none (it makes none), and key's wake-up channel (wakeChannel).
func (s *Store) subscribed(key string) (*subscriber, string) {
	name := s.wakeChannel(key)
	shard := ""
	if s.sharded {
		shard = strconv.Itoa(hashSlot(name))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subs[shard], name
}

// lease is the lease h announced, on key, with the TTL left of it at now
// (as a Lease's TTL is everywhere: what was left when the store
// answered). A remembered handover has aged since it arrived.
func (h handover) lease(key string, now time.Time) backend.Lease {
	return backend.Lease{Key: key, Owner: h.owner, Token: h.token, TTL: h.ttl - now.Sub(h.at)}
}

type lookResult struct {
	lease backend.Lease
	ok    bool
	err   error
}

// look reads key's lease once, on a goroutine that Close waits for,
// and delivers it on the returned channel (capacity 1, so an abandoned
// look does not leak) if it is a handover to owner that no caller of the
// store was given yet (see handedOver and Store.taken).
func (s *Store) look(ctx context.Context, key, owner string) (chan lookResult, error) {
	res := make(chan lookResult, 1)
	err := s.spawn(func() {
		name := s.LeaseKey(key)
		var get *redis.StringCmd
		var pttl *redis.DurationCmd
		_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			get, pttl = p.Get(ctx, name), p.PTTL(ctx, name)
			return nil
		})
		if err != nil && !errors.Is(err, redis.Nil) {
			res <- lookResult{err: lookError(name, txError(err, get, pttl))}
			return
		}
		l, ok, err := handedOver(key, owner, name, get, pttl)
		if ok && l.Token <= s.givenOut(key) {
			ok, l = false, backend.Lease{} // AcquireQueued returned it
		}
		res <- lookResult{l, ok, err}
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// txError returns the error of a transaction of cmds: for EXECABORT, the
// error the server gave the first command it would not queue, which says
// why (LOADING while a restarted server loads its data, NOPERM for a user
// refused the command), wrapped with the abort.
func txError(err error, cmds ...redis.Cmder) error {
	if !redis.HasErrorPrefix(err, "EXECABORT") {
		return err
	}
	for _, c := range cmds {
		if cerr := c.Err(); cerr != nil && !errors.Is(cerr, redis.Nil) {
			return fmt.Errorf("%w (the transaction was discarded: %v)", cerr, err)
		}
	}
	return err
}

// lookError is the error of a look at the lease name that failed with
// err: a value of another type than a string is not a baton lease.
func lookError(name string, err error) error {
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		return fmt.Errorf("%w: key %s is not a string, not a baton lease; delete the key or use another prefix", backend.ErrCorrupt, name)
	}
	return err
}

// handedOver reads a handover to owner out of the lease name of key, as
// GET and PTTL read it in one transaction: the lease's TTL is what was
// left of it then. A handover leaves "<token> <owner> contended"; a
// lease of another owner, plain or released is none.
func handedOver(key, owner, name string, get *redis.StringCmd, pttl *redis.DurationCmd) (backend.Lease, bool, error) {
	v, err := get.Result()
	if errors.Is(err, redis.Nil) {
		return backend.Lease{}, false, nil
	}
	if err != nil {
		return backend.Lease{}, false, err
	}
	bad := func(what string) error {
		return fmt.Errorf("%w: key %s %s; delete the key or use another prefix", backend.ErrCorrupt, name, what)
	}
	tok, rest, ok := strings.Cut(v, " ")
	who, flag, _ := strings.Cut(rest, " ")
	token, tokOK := backend.ParseToken(tok)
	if !ok || !tokOK || backend.ValidateOwner(who) != nil || (flag != "" && flag != "contended" && flag != "released") {
		return backend.Lease{}, false, bad(fmt.Sprintf("holds %.40q, not a baton lease \"<token> <owner>\"", v))
	}
	left, err := pttl.Result()
	if err != nil {
		return backend.Lease{}, false, err
	}
	if left == -1 {
		return backend.Lease{}, false, bad("has no expiry")
	}
	if who != owner || flag != "contended" || left <= 0 {
		return backend.Lease{}, false, nil // another's, not handed over, or gone since
	}
	return backend.Lease{Key: key, Owner: owner, Token: token, TTL: left}, true, nil
}

// handover is a handover announced on a channel: the lease of owner, with
// token and ttl, published at about at (when it arrived).
type handover struct {
	owner string
	token uint64
	ttl   time.Duration
	at    time.Time
}

// valid reports whether h names owner and its lease may still be live.
func (h handover) valid(owner string, now time.Time) bool {
	return h.owner == owner && now.Sub(h.at) < h.ttl
}

// waiter is a caller of AwaitHandover waiting on a channel.
type waiter struct {
	name  string
	owner string
	found chan handover // capacity 1: the handover to owner
	look  chan struct{} // capacity 1: the subscription was (re)confirmed
	c     *channel      // its channel, while it waits
	sub   *subscriber
}

// await adds a waiter for a handover of name to owner. If the channel
// already saw one that may still be live, it returns that instead (ok).
// The waiter is told to look at the lease each time the subscription
// is confirmed, the first time included, since a handover published
// before that was not seen; but not for a confirmation that held already
// when owner's last AcquireQueued was sent and has held since (asking):
// every handover to owner after that call was published on the
// subscribed channel and seen, and one before it that call returned.
func (s *subscriber) await(name, owner string) (w *waiter, h handover, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, handover{}, false, backend.ErrClosed
	}
	c := s.useLocked(name)
	gen, asked := c.asked[owner]
	delete(c.asked, owner)
	if h, ok := s.recallLocked(c, s.twinLocked(name), owner); ok {
		if !c.used() {
			c.idle = time.Now()
		}
		return nil, h, true, nil
	}
	w = &waiter{name: name, owner: owner, found: make(chan handover, 1), look: make(chan struct{}, 1), c: c, sub: s}
	c.waiters[w] = struct{}{}
	if c.confirmed && !(asked && gen == c.gen) {
		w.look <- struct{}{}
	}
	s.poke()
	return w, handover{}, false, nil
}

// recallLocked returns the handover to owner that c, a wake-up channel,
// or twin, the key's own channel (nil: none), saw while nobody waited
// for it and that may still be live, forgetting it; ok false when
// neither did, or the store's callers were given that lease since.
// A handover seen on both is forgotten by both.
func (s *subscriber) recallLocked(c, twin *channel, owner string) (handover, bool) {
	seen, taken, now := [2]*channel{c, twin}, c.taken, time.Now()
	if twin != nil {
		taken = max(taken, twin.taken)
	}
	var h handover
	for _, x := range seen {
		if x != nil && x.last.valid(owner, now) && x.last.token > max(taken, h.token) {
			h = x.last
		}
	}
	if h.owner == "" {
		return h, false
	}
	for _, x := range seen {
		if x != nil && x.last.owner == owner {
			x.last = handover{}
		}
	}
	return h, true
}

// twinLocked returns the subscriber's other channel of the key of the
// channel name: the key's own channel for its wake-up channel, and the
// other way round; nil when it has none (or the key has only one: no
// hash tag).
func (s *subscriber) twinLocked(name string) *channel {
	other, ok := strings.CutSuffix(name, s.wakeSuffix)
	if !ok {
		other = wakeChannel(name, s.wakeSuffix)
	}
	if other == name {
		return nil
	}
	return s.channels[other]
}

// leave removes w, whose wait returned the lease with token took (0:
// none). A newer handover delivered to it but not taken goes back to the
// channel's memory, for the owner's next wait.
func (w *waiter) leave(took uint64) {
	s := w.sub
	s.mu.Lock()
	defer s.mu.Unlock()
	c := w.c
	delete(c.waiters, w)
	c.taken = max(c.taken, took)
	select {
	case h := <-w.found:
		if h.token > c.taken {
			c.last = h
		}
	default:
	}
	s.leftLocked(c)
}

// maxAsked bounds the notes of asking per channel: owners that were
// refused and never waited (a try, a claim given up) leave theirs.
const maxAsked = 64

// asking notes that owner's AcquireQueued of name is about to be sent:
// if the channel's subscription holds now, the server runs the call after
// it, and a handover to owner that follows is published where the
// subscriber hears it, unless the subscription is lost meanwhile (a new
// confirmation then has a new gen). A channel not subscribed now forgets
// what owner asked before. It reports whether the channel exists.
func (s *subscriber) asking(name, owner string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.channels[name]
	switch {
	case c == nil:
		return s.twinLocked(name) != nil
	case c.confirmed:
		if c.asked == nil || len(c.asked) >= maxAsked {
			c.asked = make(map[string]uint64) // the notes dropped cost a look each
		}
		c.asked[owner] = c.gen
	default:
		delete(c.asked, owner)
	}
	return true
}

// givenOut returns the newest token of key that a caller of s was given
// while the store's subscription to one of key's channels held
// (Store.taken), or 0.
func (s *Store) givenOut(key string) (taken uint64) {
	s.onChannel(key, func(c *channel) { taken = max(taken, c.taken) })
	return taken
}
