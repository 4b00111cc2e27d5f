package synclock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-go/baton/backend"
)

// claim takes the lock in the store for the goroutine that owns q's turn,
// waiting as the package doc says; used is the retries spent behind local
// holders.
func (lk *Locker) claim(ctx context.Context, key, sk string, q *queue, wait bool, used int, detach bool, t *ticket) (*grant, int, error) {
	c := claimer{lk: lk, ctx: ctx, key: key, sk: sk, owner: lk.newOwner(), q: q, wait: wait, detach: detach, used: used}
	c.line, _ = lk.store.(backend.Queue)
	if !lk.noHandover.Load() {
		c.hand, _ = lk.store.(backend.Handover)
	}
	if wait {
		c.patience = lk.patience()
	}
	if t != nil {
		// The release before this turn took a place in line for it: wait
		// for the key to be handed over before asking.
		c.owner = t.owner
		g, again, err := c.await(&backend.HeldError{}, &LockedError{Key: key}, t.sent)
		if !again {
			return g, c.tries, err
		}
	}
	for {
		g, again, err := c.round()
		if !again {
			return g, c.tries, err
		}
	}
}

type claimer struct {
	lk           *Locker
	ctx          context.Context
	key, sk      string
	owner        string
	q            *queue
	wait, detach bool
	used         int // retries spent behind local holders
	tries        int // requests sent
	spared       int // tries refused as Recovering: not retries
	line         backend.Queue
	hand         backend.Handover
	patience     time.Duration
}

// round sends one request and, if refused, waits; it reports whether to
// ask again.
func (c *claimer) round() (*grant, bool, error) {
	lk := c.lk
	sent := lk.clock.Now()
	l, err := c.ask()
	c.tries++
	if err == nil {
		return c.granted(l, sent, false)
	}
	if lk.floor(c.sk).Forget(err, lk.logger, "synclock", c.key) {
		return nil, true, nil
	}
	var held *backend.HeldError
	if !errors.As(err, &held) {
		return nil, false, c.giveUp(nil, fmt.Errorf("synclock: acquiring lock %q: %w", c.key, err))
	}
	lk.floor(c.sk).Observe(held.Holder.Token)
	locked := &LockedError{Key: c.key, Holder: held.Holder, Next: held.Next, Recovering: held.Recovering}
	switch {
	case !c.wait:
		return nil, false, locked
	case held.Recovering:
		if err := c.sitOut(held, locked); err != nil {
			return nil, false, err
		}
		return nil, true, nil
	case lk.cfg.MaxRetries > 0 && c.tries-c.spared+c.used > lk.cfg.MaxRetries:
		c.leaveLine()
		locked.Tries = c.tries
		return nil, false, locked
	}
	return c.await(held, locked, sent)
}

func (c *claimer) ask() (backend.Lease, error) {
	lk := c.lk
	floor := lk.floor(c.sk).Load()
	if c.line != nil {
		return c.line.AcquireQueued(c.ctx, c.sk, c.owner, lk.cfg.ClaimWindow, floor, c.patience)
	}
	return lk.store.Acquire(c.ctx, c.sk, c.owner, lk.cfg.ClaimWindow, floor)
}

// granted starts the holding of l, asked for at sent. A grant that came
// back after its deadline is void (another holder may have the lock): it
// is given back, and asked for again when the caller waits.
func (c *claimer) granted(l backend.Lease, sent time.Time, handed bool) (*grant, bool, error) {
	lk := c.lk
	lk.floor(c.sk).Observe(l.Token)
	if g, err := c.newGrant(l, sent, handed); err == nil {
		return g, false, nil
	}
	lk.logger.Warn("synclock: a lock was granted too late to use: the store answered after the claim window; asking again", "key", c.key)
	if err := lk.terms.Drop(c.ctx, c.sk, c.owner, 0); err != nil && !errors.Is(err, backend.ErrNotHeld) {
		lk.logger.Warn("synclock: giving back a late grant failed; it expires by itself", "key", c.key, "err", err)
	}
	if !c.wait {
		return nil, false, fmt.Errorf("synclock: lock %q: %w: the grant came back after its claim window (%v) had passed", c.key, ErrLeaseExpired, lk.cfg.ClaimWindow)
	}
	return nil, true, nil
}

// sitOut sleeps through a recovering store's refusal: no release can
// come before Holder.TTL.
func (c *claimer) sitOut(held *backend.HeldError, locked *LockedError) error {
	lk := c.lk
	if c.spared == 0 {
		lk.logger.Info("synclock: the store grants the lock to nobody until leases it may have lost have ended (it restarted without its data, lost it, or is new to baton); waiting; "+
			declareWhole, "key", c.key, "for", held.Holder.TTL)
	}
	c.spared++
	if err := lk.waitTurn(c.ctx, nil, held.Holder.TTL, ""); err != nil {
		return c.giveUp(locked, err)
	}
	return nil
}

// await waits for a handover, else for an announced release or the poll.
// A handed lease is counted from sent, the refused request, which came
// before any handover to the owner can happen.
func (c *claimer) await(held *backend.HeldError, locked *LockedError, sent time.Time) (*grant, bool, error) {
	lk := c.lk
	poll := lk.cfg.RetryInterval
	if held.Holder.Owner != "" {
		poll = min(poll, held.Holder.TTL+time.Millisecond)
	}
	if c.hand != nil {
		l, ok, err := c.hand.AwaitHandover(c.ctx, c.sk, c.owner, poll)
		switch {
		case ok:
			return c.granted(l, sent, true)
		case errors.Is(err, errors.ErrUnsupported):
			lk.noHandover.Store(true)
			c.hand = nil
		case err != nil:
			return nil, false, c.giveUp(locked, fmt.Errorf("synclock: waiting for lock %q, %s: %w", c.key, locked.holderText(), err))
		default:
			return nil, true, nil // nothing handed over in time: ask again, which keeps the place
		}
	}
	if c.q.watch == nil && c.subscribe() {
		return nil, true, nil
	}
	if err := lk.waitTurn(c.ctx, c.q.watch, poll, c.owner); err != nil {
		return nil, false, c.giveUp(locked, err)
	}
	return nil, true, nil
}

// subscribe watches the key once per queue and reports whether to look
// again at once: a release between the failed claim and the subscription
// would otherwise go unseen until the poll.
func (c *claimer) subscribe() bool {
	w, err := c.lk.store.Watch(c.ctx, c.sk)
	if err == nil {
		c.q.watch = w
		return true
	}
	// The client's network timeout can fire a moment before ctx.Err is
	// set: that is the caller giving up, not a store problem to log.
	if d, ok := c.ctx.Deadline(); c.ctx.Err() == nil && (!ok || time.Now().Before(d)) {
		c.lk.logger.Warn("synclock: cannot watch the lock key; falling back to polling", "key", c.key, "err", err)
	}
	return false
}

// giveUp leaves the line and returns err or, if ctx ended, the context's
// error joined with the last refusal, if any.
func (c *claimer) giveUp(locked *LockedError, err error) error {
	c.leaveLine()
	if c.ctx.Err() == nil {
		return err
	}
	if locked == nil {
		return errors.Join(fmt.Errorf("synclock: waiting for lock %q: the caller's context ended", c.key), backend.ContextError(c.ctx))
	}
	return errors.Join(locked, backend.ContextError(c.ctx))
}

// leaveLine takes a waiter that gives up out of the key's line at once,
// so that the lock is not kept idle for it.
func (c *claimer) leaveLine() {
	if c.patience > 0 {
		c.lk.dequeue(c.ctx, c.key, c.sk, c.owner)
	}
}

// patience is how long a waiter's place in the store's line lasts. A live
// waiter asks again at least every RetryInterval; its place outlives that
// three times over, so only a waiter that is gone loses it, and the lock
// waits at most that long for a dead one.
func (lk *Locker) patience() time.Duration { return 3 * lk.cfg.RetryInterval }

// dequeue takes owner out of the line of sk (the store key of key) in the
// store, even when ctx has ended: a waiter that gave up, or a place that
// nobody took.
func (lk *Locker) dequeue(ctx context.Context, key, sk, owner string) {
	line, ok := lk.store.(backend.Queue)
	if !ok {
		return
	}
	dctx, cancel := context.WithTimeout(uncancelled(ctx), lk.cfg.OperationTimeout)
	defer cancel()
	if err := line.Dequeue(dctx, sk, owner); err != nil {
		lk.logger.Warn("synclock: leaving the lock's waiting line failed; the place lapses by itself", "key", key, "patience", lk.patience(), "err", err)
	}
}

// waitTurn sleeps until d passes, ctx ends, or w (if any) announces a
// release that does not keep the key for another waiter in line. An
// announced renewal moves the wake-up to the holder's new expiry, never
// past d: a waiter keeps its place by asking again at least every d.
func (lk *Locker) waitTurn(ctx context.Context, w backend.Watch, d time.Duration, owner string) error {
	var events <-chan backend.Event
	if w != nil {
		events = w.C()
	}
	start := lk.clock.Now()
	t := lk.clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case ev := <-events:
			switch {
			case ev.Kind == backend.EventRenewed:
				// Held for ev.TTL more: poll no earlier than that allows.
				t.Reset(min(lk.cfg.RetryInterval-lk.clock.Since(start), ev.TTL+time.Millisecond))
				continue
			case ev.Kind == backend.EventReleased && ev.Next != "" && ev.Next != owner:
				continue // the store keeps the key for the waiter first in line
			}
			return nil
		case <-t.C():
			return nil
		case <-ctx.Done():
			return backend.ContextError(ctx)
		}
	}
}
