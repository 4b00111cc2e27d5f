package role

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/internal/lease"
)

// campaign is the state of one Run: only its goroutine touches it. It is
// the one source of truth for a tenure: it starts the tenure, moves its
// deadline when a renewal comes back in time, and ends it — IsMaster false,
// the tenure's context cancelled, OnDemoted queued, Status no longer naming it,
// the log line — at the deadline itself, whether or not a store call is
// still out. A store call never decides on its own that a tenure goes on.
type campaign struct {
	e     *Elector
	ev    *events
	watch backend.Watch

	// while slave: when, in nanoseconds since the elector's base, the
	// master's lease as last seen ends at the earliest; and whether the
	// wait is for a holder the slave has seen (not a refusal that named
	// nobody, as the restart guard's).
	heldUntil   int64
	holderKnown bool

	// while master: the tenure's holding of the role key (internal/lease),
	// which keeps its deadline and context; IsMaster reads it too.
	h *lease.Holder

	// inflight is a renewal the campaign stopped waiting for (the tenure
	// ended, or Run is stopping) and has not joined yet. Its reply is void.
	inflight *call
}

// call is one renewal running on its own goroutine, so that the campaign
// can wait for its reply and for the tenure's deadline at once and never
// depends on the store honouring the call's context. The campaign owns
// the goroutine and joins it: it reads done, or join does.
type call struct {
	cancel context.CancelFunc
	done   chan reply // capacity 1: the goroutine never blocks on it
}

type reply struct {
	l   backend.Lease
	err error
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
		l, start, ok := c.follow(ctx)
		if !ok {
			return
		}
		c.lead(ctx, l, start)
	}
}

// validity is how long a grant or renewal keeps this instance master,
// counted from when its request was sent: the lease less the margin.
func (c *campaign) validity() int64 {
	return int64(c.e.cfg.HeartbeatExpiration - c.e.terms.Margin)
}

// follow waits as a slave until this instance is granted the role. It
// returns the lease and when the winning request was sent.
func (c *campaign) follow(ctx context.Context) (backend.Lease, int64, bool) {
	e := c.e
	backoff := newBackoff(50*time.Millisecond, e.cfg.HeartbeatInterval)
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
		start := e.now()
		l, err := c.acquire(ctx)
		if ctx.Err() == nil {
			c.report(Event{Kind: EventClaim, Latency: time.Duration(e.now() - start), Err: err})
		}
		var held *backend.HeldError
		switch {
		case err == nil:
			c.observe(l.Token)
			if !e.terms.Late(e.base.Add(time.Duration(start)), e.cfg.HeartbeatExpiration) {
				return l, start, true
			}
			// The grant came back after the tenure it would have begun had
			// already ended by the local clock: void. The key stays ours on
			// the store until its TTL; the next claim finds it and starts a
			// new tenure with a new epoch.
			e.logger.Warn("role: the store granted the role too late to use; claiming again", "key", e.key, "epoch", l.Token)
			c.sleep(ctx, backoff.next())
		case errors.As(err, &held):
			reclaimed = c.refused(ctx, held.Holder, again, backoff)
		case ctx.Err() != nil:
		case errors.Is(err, backend.ErrFloorAhead) && e.epoch.Load() > 0:
			c.forgetFloor(err)
		case errors.Is(err, backend.ErrCorrupt):
			// Forged or foreign data under the role key: nothing of it
			// was taken as an epoch. Claims go on, and succeed once the
			// bad key is deleted.
			e.setErr(err)
			e.logger.Warn("role: corrupt data in the store at the role key; delete the key the error names and the role is claimed again", "key", e.key, "err", err)
			c.sleep(ctx, backoff.next())
		default:
			e.setErr(err)
			e.logger.Warn(claimFailed(err), "key", e.key, "err", err)
			c.sleep(ctx, backoff.next())
		}
	}
	return backend.Lease{}, 0, false
}

// refused handles a claim the store refused because h holds the key, or
// grants it to nobody for a while; again says the last pass released our
// own stale lease. It reports whether this pass released one.
func (c *campaign) refused(ctx context.Context, h backend.Lease, again bool, backoff *backoff) bool {
	e := c.e
	c.observe(h.Token)
	switch {
	case h.Owner == e.owner:
		// Our own lease: a claim whose reply was lost or came too late,
		// or a tenure that ended while the store was out of reach. That
		// tenure is over for good; a new one must have a new epoch, so
		// give the key up and claim it afresh.
		if again {
			// Released, yet still ours: do not spin on a store that
			// keeps it; the back-off grows while it does.
			c.sleep(ctx, backoff.next())
		}
		if err := c.release(ctx); err != nil {
			if ctx.Err() == nil {
				e.setErr(err)
				e.logger.Warn("role: cannot release this process's stale role key; will retry", "key", e.key, "err", err)
				c.sleep(ctx, backoff.next())
			}
			return true
		}
		e.logger.Info("role: released this process's lease of an ended tenure to claim a new one", "key", e.key, "epoch", h.Token)
		return true
	case h.Owner == "" && h.TTL > 0:
		backoff.reset()
		// The store grants nothing for a while (it may have lost data,
		// and leases granted before may still be believed in): nobody is
		// master; wait it out, or for a release.
		e.logger.Info("role: the store grants no role until leases it may have lost have ended (it restarted without its data, lost it, or is new to baton); waiting. "+
			"A store known to hold no live lease is declared whole with `batonctl init`; tests on servers started for them make their store WithoutRestartGuard",
			"key", e.key, "for", h.TTL)
		e.mu.Lock()
		e.recovering = e.clock.Now().Add(h.TTL)
		e.mu.Unlock()
		c.heldUntil, c.holderKnown = e.now()+int64(h.TTL), false
		c.wait(ctx)
	case h.Owner == "":
		backoff.reset()
		c.sleep(ctx, backoff.next())
	default:
		backoff.reset()
		c.seeMaster(h.Owner)
		// Sleep until the holder's lease ends or a release wakes us; the
		// TTL counts from now, after the reply, so it is not shorter than
		// the store's.
		c.heldUntil, c.holderKnown = e.now()+int64(h.TTL), true
		c.wait(ctx)
	}
	return false
}

// forgetFloor drops the epoch this elector keeps as the floor of its
// claims, which the store refused as beyond any token it can have granted
// (learnt from forged data, or from a store whose clock went back by more
// than backend.MaxTokenLead), so that it never locks the elector out of
// the role. The next claim asks without a floor; its grant sets the
// epoch again.
func (c *campaign) forgetFloor(err error) {
	e := c.e
	e.logger.Warn("role: the store refused the highest epoch seen as the floor of a claim; forgetting it", "key", e.key, "epoch", e.epoch.Load(), "err", err)
	e.epoch.Store(0)
}

// claimFailed is the log message of a claim the store failed with err: a
// refused login is not a store out of reach.
func claimFailed(err error) string {
	if errors.Is(err, backend.ErrAuth) {
		return "role: the store refused the credentials (fix the password or token); will retry"
	}
	return "role: cannot reach the store to claim the role; will retry"
}

// lead keeps the role until the tenure ends: at its deadline, when the
// store says the lease is gone, or when ctx ends.
func (c *campaign) lead(ctx context.Context, l backend.Lease, start int64) {
	e := c.e
	c.closeWatch()
	if !c.becomeMaster(ctx, l, start) {
		return
	}
	interval := int64(e.cfg.HeartbeatInterval)
	retry := int64(min(e.cfg.HeartbeatInterval/5, time.Second))
	next := start + interval // when to send the next renewal
	for {
		switch c.pause(ctx, time.Duration(next-e.now())) {
		case stopped:
			c.stepDown(ctx)
			return
		case expired:
			c.expire("renewals failed until the safety deadline", nil)
			return
		}
		sent := e.now()
		if c.h.Left() <= 0 {
			c.expire("renewals failed until the safety deadline", nil)
			return
		}
		// The holding bounds the renewal by the deadline and voids a
		// reply that lands after it; the campaign stops waiting for it at
		// the deadline even if the store does not honour the context.
		k := c.startRenew(ctx)
		r, out := c.await(ctx, k)
		took := time.Duration(e.now() - sent)
		switch {
		case out == stopped:
			c.stepDown(ctx)
			return
		case out == expired || errors.Is(r.err, lease.ErrLate):
			err := r.err
			if err == lease.ErrLate {
				err = nil // a reply that came back too late, or none
			}
			c.renewFailed(l.Token, took, err)
			c.expire("no renewal came back before the safety deadline", err)
			return
		case r.err == nil:
			c.report(Event{Kind: EventRenewal, Epoch: l.Token, Latency: took})
			next = sent + interval
		case ctx.Err() != nil:
			c.stepDown(ctx)
			return
		case errors.Is(r.err, backend.ErrNotHeld):
			c.renewFailed(l.Token, took, r.err)
			c.lost(r.err)
			return
		default:
			c.renewFailed(l.Token, took, r.err)
			e.setErr(r.err)
			e.logger.Warn("role: renewal failed; retrying until the safety deadline", "key", e.key, "epoch", l.Token, "err", r.err)
			next = e.now() + retry
		}
	}
}

// becomeMaster begins the tenure of lease l, claimed at start. It reports
// false, beginning nothing, if the lease's deadline passed meanwhile.
func (c *campaign) becomeMaster(ctx context.Context, l backend.Lease, start int64) bool {
	e := c.e
	c.observe(l.Token)
	h := new(lease.Holder)
	parent := context.WithValue(context.WithoutCancel(ctx), epochKey{}, l.Token)
	g := lease.Grant{Key: e.key, Owner: e.owner, Lease: l, Sent: e.base.Add(time.Duration(start)), TTL: e.cfg.HeartbeatExpiration}
	if err := h.Start(parent, &e.terms, tenureHooks{}, g); err != nil {
		e.logger.Warn("role: the store granted the role too late to use; claiming again", "key", e.key, "epoch", l.Token)
		return false
	}
	c.h = h
	e.mu.Lock()
	e.tenure, e.tenureEpoch = h.Context(), l.Token
	e.mu.Unlock()
	e.held.Store(h) // IsMaster reads true from here
	e.mu.Lock()
	e.master = e.idText
	e.since = e.clock.Now()
	e.mu.Unlock()
	e.logger.Info("role: became master", "key", e.key, "epoch", l.Token)
	c.ev.push(event{kind: evElected, ctx: h.Context(), epoch: l.Token})
	c.ev.push(event{kind: evMasterChange, id: e.idText, epoch: l.Token})
	e.roleChanged()
	return true
}

// tenureHooks are a tenure's side of its holding: the campaign does the
// rest of the ending (endTenure) when it sees the context end.
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

// pause waits d, or until the tenure's deadline or ctx ends first.
func (c *campaign) pause(ctx context.Context, d time.Duration) outcome {
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
	case <-c.h.Context().Done():
		return expired
	case <-ctx.Done():
		return stopped
	}
}

// startRenew sends a renewal on its own goroutine.
func (c *campaign) startRenew(ctx context.Context) *call {
	e, h := c.e, c.h
	c.join()
	octx, cancel := context.WithCancel(ctx)
	k := &call{cancel: cancel, done: make(chan reply, 1)}
	c.inflight = k
	go func() {
		l, err := h.Renew(octx, e.cfg.HeartbeatExpiration)
		k.done <- reply{l, err}
	}()
	return k
}

// await waits for the reply of k, the tenure's deadline or the end of
// ctx, whichever comes first. When await returns without the reply, k
// stays in flight until join; its reply is void (the holding refuses it).
func (c *campaign) await(ctx context.Context, k *call) (reply, outcome) {
	select {
	case r := <-k.done:
		k.cancel()
		c.inflight = nil
		return r, woke
	case <-c.h.Context().Done():
		return reply{}, expired
	case <-ctx.Done():
		return reply{}, stopped
	}
}

// join cancels the renewal still in flight, if any, and waits for it to
// return. Its reply is dropped.
func (c *campaign) join() {
	if k := c.inflight; k != nil {
		k.cancel()
		<-k.done
		c.inflight = nil
	}
}

// expire ends the tenure at its deadline. err is the reply of a renewal
// that came back too late, if one did.
func (c *campaign) expire(why string, err error) {
	e := c.e
	c.h.Lose(errDeadline)
	c.endTenure()
	e.logger.Info("role: no longer master", "key", e.key, "reason", why)
	c.seeHolder(err)
}

// seeHolder records the holder a refused renewal names, if it names one.
func (c *campaign) seeHolder(err error) {
	var nh *backend.NotHeldError
	if errors.As(err, &nh) && nh.Holder.Owner != "" {
		c.observe(nh.Holder.Token)
		c.seeMaster(nh.Holder.Owner)
	}
}

// stepDown ends this instance's tenure because Run is stopping: first
// locally (IsMaster false, tenure context cancelled), then in the store,
// so that a slave takes over at once instead of after the TTL.
func (c *campaign) stepDown(ctx context.Context) {
	e := c.e
	h := c.h
	c.endTenure()
	err := h.Drop(ctx, 0)
	if err != nil && !errors.Is(err, backend.ErrNotHeld) {
		e.setErr(err)
		e.logger.Warn("role: could not release the role key on stop; it expires after its TTL", "key", e.key, "err", err)
	}
	e.logger.Info("role: no longer master", "key", e.key, "reason", "stopping")
}

// lost handles a renewal refused by the store: someone else holds the
// role, or the key vanished (expired, or the store lost its data).
func (c *campaign) lost(err error) {
	e := c.e
	c.h.Lose(fmt.Errorf("%w: the store no longer holds the role key for this tenure: %w", ErrNotMaster, err))
	c.endTenure()
	c.seeHolder(err)
	e.logger.Warn("role: mastership lost", "key", e.key, "err", err)
}

// endTenure ends the tenure locally, in the order a reader may rely on:
// IsMaster turns false, then the tenure's context is cancelled (the
// holding does both, at its deadline, on Lose or here), then Tenure and
// Status stop naming it, then OnDemoted is queued.
func (c *campaign) endTenure() {
	e := c.e
	c.h.End()
	c.h = nil
	e.terms.Alarm.Quiet()
	e.mu.Lock()
	epoch := e.tenureEpoch
	e.tenure, e.tenureEpoch = nil, 0
	if e.master == e.idText {
		e.master = ""
	}
	e.since = e.clock.Now()
	e.mu.Unlock()
	c.ev.push(event{kind: evDemoted, epoch: epoch})
	e.roleChanged()
}

// acquire claims the role. The claim is bounded by the tenure it would
// begin: a grant that comes back later is void.
func (c *campaign) acquire(ctx context.Context) (backend.Lease, error) {
	e := c.e
	octx, cancel := context.WithTimeout(ctx, min(e.cfg.OperationTimeout, time.Duration(c.validity())))
	defer cancel()
	// The floor is the highest epoch this elector has seen, in this Run or
	// an earlier one.
	return e.store.Acquire(octx, e.key, e.owner, e.cfg.HeartbeatExpiration, e.epoch.Load())
}

// release gives up this process's lease on the role key, if it still
// holds one.
func (c *campaign) release(ctx context.Context) error {
	e := c.e
	octx, cancel := context.WithTimeout(ctx, e.cfg.OperationTimeout)
	defer cancel()
	err := e.store.Release(octx, e.key, e.owner, 0)
	if errors.Is(err, backend.ErrNotHeld) {
		return nil
	}
	return err
}

// observe raises the visible epoch, which is also the fencing floor of
// the elector's claims, to token.
func (c *campaign) observe(token uint64) {
	for {
		old := c.e.epoch.Load()
		if token <= old || c.e.epoch.CompareAndSwap(old, token) {
			return
		}
	}
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
		e.reportDuplicate(c.ev, owner)
	}
	if changed {
		c.ev.push(event{kind: evMasterChange, id: id, epoch: e.epoch.Load()})
	}
}

func (c *campaign) openWatch(ctx context.Context) {
	e := c.e
	octx, cancel := context.WithTimeout(ctx, e.cfg.OperationTimeout)
	defer cancel()
	w, err := e.store.Watch(octx, e.key)
	if err != nil {
		if ctx.Err() == nil {
			e.setErr(err)
			e.logger.Warn("role: cannot watch the role key; falling back to its TTL", "key", e.key, "err", err)
		}
		return
	}
	c.watch = w
}

func (c *campaign) closeWatch() {
	if c.watch != nil {
		c.watch.Close()
		c.watch = nil
	}
}

// wait sleeps until the role key is worth claiming: its holder released
// it, or the lease last seen (heldUntil) has ended, or ctx ended. An
// announced renewal moves heldUntil to the renewed lease's end, so a slave
// asks the store nothing while the master is healthy; but a wait that
// began with no holder named (the restart guard's refusal) ends at the
// first renewal, so that the slave looks and learns who was elected. A "maybe free"
// event (a lost connection, a store that lost its data) does not end the
// wait early: the old master may still believe in a lease the store
// forgot, and it stops believing only at its own deadline, which is before
// heldUntil.
func (c *campaign) wait(ctx context.Context) {
	e := c.e
	var events <-chan backend.Event
	if c.watch != nil {
		events = c.watch.C()
	}
	ttl := e.cfg.HeartbeatExpiration
	t := e.clock.NewTimer(c.waitBound(time.Duration(c.heldUntil-e.now()) + jitter(ttl)))
	defer t.Stop()
	for {
		select {
		case ev := <-events:
			switch ev.Kind {
			case backend.EventReleased:
				return
			case backend.EventRenewed:
				if !c.holderKnown {
					// A master was elected while the store was refusing
					// everyone: look, to learn who it is.
					return
				}
				c.heldUntil = e.now() + int64(ev.TTL)
				t.Reset(c.waitBound(ev.TTL + jitter(ttl)))
			default:
				if e.now() >= c.heldUntil {
					return
				}
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

// sleep waits d; it reports false if ctx ended first.
func (c *campaign) sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := c.e.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}
