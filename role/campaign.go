package role

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/internal/lease"
)

// campaign is the state of one Run: only its goroutine touches it.
type campaign struct {
	e     *Elector
	watch backend.Watch

	// A renewal runs on a goroutine of its own (see await); one the
	// campaign stopped waiting for runs on until join.
	renewing    sync.WaitGroup
	cancelRenew context.CancelFunc
}

// outcome says why the campaign stopped waiting.
type outcome int

const (
	woke    outcome = iota // the wait ended as planned (timer or reply)
	expired                // the tenure's deadline came first
	stopped                // Run's context ended
)

func (c *campaign) loop(ctx context.Context) {
	defer c.join()
	defer c.closeWatch()
	for ctx.Err() == nil {
		if h, sent := c.follow(ctx); h != nil {
			c.lead(ctx, h, sent)
		}
	}
}

// follow waits as a slave until this instance is granted the role and its
// tenure has begun. It returns the tenure's holding and when the winning
// claim was sent; nil once ctx has ended.
func (c *campaign) follow(ctx context.Context) (*lease.Holder, time.Time) {
	e := c.e
	b := backoff{first: 50 * time.Millisecond, max: e.cfg.HeartbeatInterval}
	reclaimed := false // the last pass released our own stale lease
	for ctx.Err() == nil {
		again := reclaimed
		reclaimed = false
		// A renewal of an ended tenure may still be out; it must not land
		// after a new claim of ours.
		c.join()
		if c.watch == nil {
			c.openWatch(ctx)
		}
		sent := e.clock.Now()
		l, err := c.acquire(ctx)
		if ctx.Err() == nil {
			c.report(Event{Kind: EventClaim, Latency: e.clock.Since(sent), Err: err})
		}
		var held *backend.HeldError
		switch {
		case err == nil:
			if h := c.becomeMaster(ctx, l, sent); h != nil {
				return h, sent
			}
			c.pause(ctx, nil, b.next())
		case errors.As(err, &held):
			reclaimed = c.refused(ctx, held, again, &b)
		case ctx.Err() != nil:
		case e.epoch.Forget(err, e.logger, "role", e.key): // claim again without it
		default:
			e.warn(err, claimFailed(err), "key", e.key)
			c.pause(ctx, nil, b.next())
		}
	}
	return nil, time.Time{}
}

// claimFailed is the log message of a claim the store failed with err.
func claimFailed(err error) string {
	switch {
	case errors.Is(err, backend.ErrCorrupt):
		return "role: corrupt data in the store at the role key; delete the key the error names and the role is claimed again"
	case errors.Is(err, backend.ErrAuth):
		return "role: the store refused the credentials (fix the password or token); will retry"
	}
	return "role: cannot reach the store to claim the role; will retry"
}

// refused handles a claim the store refused because the holder it names
// holds the key, or grants it to nobody for a while; again says the last
// pass released our own stale lease. It reports whether this pass
// released one.
func (c *campaign) refused(ctx context.Context, held *backend.HeldError, again bool, b *backoff) bool {
	e, h := c.e, held.Holder
	e.epoch.Observe(h.Token)
	if h.Owner == e.owner {
		// Our own lease: a claim whose reply was lost or came too late, or
		// a tenure that ended while the store was out of reach. That
		// tenure is over for good; a new one must have a new epoch, so
		// give the key up and claim it afresh.
		if again {
			c.pause(ctx, nil, b.next()) // released, yet still ours: do not spin
		}
		if err := e.terms.Drop(ctx, e.key, e.owner, 0); err != nil && !errors.Is(err, backend.ErrNotHeld) {
			if ctx.Err() == nil {
				e.warn(err, "role: cannot release this process's stale role key; will retry", "key", e.key)
				c.pause(ctx, nil, b.next())
			}
			return true
		}
		e.logger.Info("role: released this process's lease of an ended tenure to claim a new one", "key", e.key, "epoch", h.Token)
		return true
	}
	b.reset()
	switch {
	case h.Owner != "":
		c.seeMaster(h.Owner)
	case h.TTL > 0:
		e.logger.Info("role: the store grants the role to nobody for a while; waiting", "key", e.key, "for", h.TTL, "err", held)
		e.mu.Lock()
		e.recovering = e.clock.Now().Add(h.TTL)
		e.mu.Unlock()
	default:
		c.pause(ctx, nil, b.next())
		return false
	}
	// The TTL counts from now, after the reply: not shorter than the store's.
	c.wait(ctx, e.clock.Now().Add(h.TTL), h.Owner != "")
	return false
}

// becomeMaster begins the tenure of lease l, claimed at sent, and returns
// its holding; nil if its deadline has passed already: the next claim
// finds the key ours and starts a new tenure with a new epoch.
func (c *campaign) becomeMaster(ctx context.Context, l backend.Lease, sent time.Time) *lease.Holder {
	e := c.e
	e.epoch.Observe(l.Token)
	h := new(lease.Holder)
	parent := context.WithValue(context.WithoutCancel(ctx), epochKey{}, l.Token)
	g := lease.Grant{Key: e.key, Owner: e.owner, Lease: l, Sent: sent, TTL: e.cfg.HeartbeatExpiration}
	if err := h.Start(parent, &e.terms, tenureHooks{}, g); err != nil {
		e.logger.Warn("role: the store granted the role too late to use; claiming again", "key", e.key, "epoch", l.Token)
		return nil
	}
	e.mu.Lock()
	e.held.Store(h) // IsMaster reads true from here
	e.master, e.since = e.idText, e.clock.Now()
	e.mu.Unlock()
	e.logger.Info("role: became master", "key", e.key, "epoch", l.Token)
	e.ev.step(Event{Kind: EventElected, Epoch: l.Token}, bind(e.ev.elected, h.Context()))
	e.ev.step(Event{Kind: EventMasterChange, Epoch: l.Token, Master: e.idText}, bind(e.ev.masterChange, e.idText))
	e.roleChanged()
	return h
}

// tenureHooks are a tenure's side of its holding: the campaign ends the
// rest (endTenure) when it sees the context end.
type tenureHooks struct{}

// errDeadline is the cause a tenure's context ends with at its deadline.
var errDeadline = fmt.Errorf("%w: no renewal came back before the tenure's deadline", ErrNotMaster)

func (tenureHooks) Lost(cause error) error {
	if errors.Is(cause, lease.ErrExpired) {
		return errDeadline
	}
	return cause
}

func (tenureHooks) Woken() {}

// lead keeps the role until the tenure ends: at its deadline, when the
// store says the lease is gone, or when ctx ends.
func (c *campaign) lead(ctx context.Context, h *lease.Holder, sent time.Time) {
	c.closeWatch()
	next := sent.Add(c.e.cfg.HeartbeatInterval) // when to send the next renewal
	for {
		out := c.pause(ctx, h.Context().Done(), next.Sub(c.e.clock.Now()))
		if out == woke && h.Left() <= 0 {
			out = expired
		}
		switch out {
		case stopped:
			c.stepDown(ctx, h)
			return
		case expired:
			c.lose(h, errDeadline, nil)
			return
		}
		var ok bool
		if next, ok = c.renew(ctx, h); !ok {
			return
		}
	}
}

// renew renews the tenure once: it returns when to renew next, or false
// once the tenure has ended.
func (c *campaign) renew(ctx context.Context, h *lease.Holder) (time.Time, bool) {
	e, epoch := c.e, h.Token()
	sent := e.clock.Now()
	out, err := c.await(ctx, h)
	took := e.clock.Since(sent)
	switch {
	case out == stopped:
		c.stepDown(ctx, h)
	case out == expired || errors.Is(err, lease.ErrLate):
		c.renewFailed(epoch, took, err)
		c.lose(h, errDeadline, err)
	case err == nil:
		c.report(Event{Kind: EventRenewal, Epoch: epoch, Latency: took})
		return sent.Add(e.cfg.HeartbeatInterval), true
	case ctx.Err() != nil:
		c.stepDown(ctx, h)
	case errors.Is(err, backend.ErrNotHeld):
		c.renewFailed(epoch, took, err)
		c.lose(h, fmt.Errorf("%w: the store no longer holds the role key for this tenure: %w", ErrNotMaster, err), err)
	default:
		c.renewFailed(epoch, took, err)
		e.warn(err, "role: renewal failed; retrying until the safety deadline", "key", e.key, "epoch", epoch)
		return e.clock.Now().Add(min(e.cfg.HeartbeatInterval/5, time.Second)), true
	}
	return time.Time{}, false
}

// await sends a renewal and waits for its reply, the tenure's deadline or
// the end of ctx, whichever comes first: the renewal runs on a goroutine
// of its own, so that the tenure ends at its deadline even when the store
// does not honour the call's context (go-redis ends a read at a context's
// deadline only with ContextTimeoutEnabled). The holding voids a reply
// that lands after the deadline.
func (c *campaign) await(ctx context.Context, h *lease.Holder) (outcome, error) {
	done := make(chan error, 1) // capacity 1: the goroutine never blocks on it
	rctx, cancel := context.WithCancel(ctx)
	c.cancelRenew = cancel
	c.renewing.Go(func() {
		_, err := h.Renew(rctx, c.e.cfg.HeartbeatExpiration)
		done <- err
	})
	select {
	case err := <-done:
		cancel()
		return woke, err
	case <-h.Context().Done():
		return expired, nil
	case <-ctx.Done():
		return stopped, nil
	}
}

// join cancels the renewal still in flight, if any, and waits for it.
func (c *campaign) join() {
	if c.cancelRenew != nil {
		c.cancelRenew()
	}
	c.renewing.Wait()
}

// pause waits d, or until tenure (nil: none) or ctx ends first.
func (c *campaign) pause(ctx context.Context, tenure <-chan struct{}, d time.Duration) outcome {
	if ctx.Err() != nil {
		return stopped
	}
	if d <= 0 {
		return woke
	}
	t := c.e.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return woke
	case <-tenure:
		return expired
	case <-ctx.Done():
		return stopped
	}
}

// lose ends the tenure before Run stops: at its deadline (cause
// errDeadline) or on a renewal the store refused with err (someone else
// holds the role, or the key vanished). A holder err names is the master
// seen next.
func (c *campaign) lose(h *lease.Holder, cause error, err error) {
	e := c.e
	h.Lose(cause)
	c.endTenure(h)
	if cause == errDeadline {
		e.logger.Info("role: no longer master", "key", e.key, "reason", "no renewal came back before the safety deadline")
	} else {
		e.logger.Warn("role: mastership lost", "key", e.key, "err", err)
	}
	var nh *backend.NotHeldError
	if errors.As(err, &nh) && nh.Holder.Owner != "" {
		e.epoch.Observe(nh.Holder.Token)
		c.seeMaster(nh.Holder.Owner)
	}
}

// stepDown ends the tenure because Run is stopping: first locally, then in
// the store, so that a slave takes over at once instead of after the TTL.
func (c *campaign) stepDown(ctx context.Context, h *lease.Holder) {
	e := c.e
	c.endTenure(h)
	if err := h.Drop(ctx, 0); err != nil && !errors.Is(err, backend.ErrNotHeld) {
		e.warn(err, "role: could not release the role key on stop; it expires after its TTL", "key", e.key)
	}
	e.logger.Info("role: no longer master", "key", e.key, "reason", "stopping")
}

// endTenure ends the tenure locally, in the order the package doc
// promises: the holding ends, then Status stops naming it, then OnDemoted
// is queued.
func (c *campaign) endTenure(h *lease.Holder) {
	e, epoch := c.e, h.Token()
	h.End()
	e.terms.Alarm.Quiet()
	e.mu.Lock()
	e.held.Store(nil)
	if e.master == e.idText {
		e.master = ""
	}
	e.since = e.clock.Now()
	e.mu.Unlock()
	e.ev.step(Event{Kind: EventDemoted, Epoch: epoch}, e.ev.demoted)
	e.roleChanged()
}

// acquire claims the role, the highest epoch seen as the floor, bounded by
// the tenure it would begin.
func (c *campaign) acquire(ctx context.Context) (backend.Lease, error) {
	e := c.e
	actx, cancel := context.WithTimeout(ctx, min(e.cfg.OperationTimeout, e.cfg.HeartbeatExpiration-e.terms.Margin))
	defer cancel()
	return e.store.Acquire(actx, e.key, e.owner, e.cfg.HeartbeatExpiration, e.epoch.Load())
}

// seeMaster records the master named by a role owner string.
func (c *campaign) seeMaster(owner string) {
	e := c.e
	id := ownerID(owner)
	e.mu.Lock()
	changed := e.master != id
	e.master, e.recovering = id, time.Time{}
	e.mu.Unlock()
	if id == e.idText && owner != e.owner {
		e.reportDuplicate(owner)
	}
	if changed {
		e.ev.step(Event{Kind: EventMasterChange, Epoch: e.epoch.Load(), Master: id}, bind(e.ev.masterChange, id))
	}
}

func (c *campaign) openWatch(ctx context.Context) {
	e := c.e
	wctx, cancel := context.WithTimeout(ctx, e.cfg.OperationTimeout)
	defer cancel()
	w, err := e.store.Watch(wctx, e.key)
	if err == nil {
		c.watch = w
	} else if ctx.Err() == nil {
		e.warn(err, "role: cannot watch the role key; falling back to its TTL", "key", e.key)
	}
}

func (c *campaign) closeWatch() {
	if c.watch != nil {
		c.watch.Close()
		c.watch = nil
	}
}

// wait sleeps until the role key is worth claiming: its holder released
// it, or the lease last seen has ended (at heldUntil at the earliest), or
// ctx ended. An announced renewal moves heldUntil to the renewed lease's
// end, so a slave asks the store nothing while the master is healthy; but
// a wait for no holder named (holderKnown false: the restart guard's
// refusal) ends at the first renewal, so that the slave learns who won. A
// "maybe free" event (a lost connection, a store that lost its data) does
// not end the wait early: the old master may still believe in a lease the
// store forgot, and it stops believing only at its own deadline, which is
// before heldUntil.
func (c *campaign) wait(ctx context.Context, heldUntil time.Time, holderKnown bool) {
	e := c.e
	var events <-chan backend.Event
	if c.watch != nil {
		events = c.watch.C()
	}
	ttl := e.cfg.HeartbeatExpiration
	t := e.clock.NewTimer(c.waitBound(heldUntil.Sub(e.clock.Now()) + jitter(ttl)))
	defer t.Stop()
	for {
		select {
		case ev := <-events:
			switch {
			case ev.Kind == backend.EventReleased, ev.Kind == backend.EventRenewed && !holderKnown:
				return
			case ev.Kind == backend.EventRenewed:
				heldUntil = e.clock.Now().Add(ev.TTL)
				t.Reset(c.waitBound(ev.TTL + jitter(ttl)))
			case !e.clock.Now().Before(heldUntil):
				return
			}
		case <-t.C():
			return
		case <-ctx.Done():
			return
		}
	}
}

// waitBound is how long a slave waits, d, unless another system may free
// the role key without the watch telling (backend.Unannounced): it then
// looks again at the next heartbeat, as the framework's slaves do.
func (c *campaign) waitBound(d time.Duration) time.Duration {
	if u, ok := c.e.store.(backend.Unannounced); ok && u.ReleasesUnannounced() {
		return min(d, c.e.cfg.HeartbeatInterval)
	}
	return d
}
