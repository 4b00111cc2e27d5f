package synclock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/internal/lease"
)

// grant is one holding of a lock: a lease.Holder plus synclock's policy,
// the local turn and the renewal up to the ceiling.
type grant struct {
	lease.Holder
	lk     *Locker
	key    string // the caller's key (Key() is the store's)
	q      *queue
	outer  *grant    // the section ctx came from, if any (reentrancy)
	start  time.Time // when the holding began
	sent   time.Time // when the request that got the lease was sent
	handed bool

	// A renewal starts under mu unless the holding is over; release
	// waits on renewWG for the one in flight (End cancelled its context).
	mu      sync.Mutex
	renewWG sync.WaitGroup
}

// newGrant starts the holding of l, asked for at sent, or returns
// lease.ErrLate. With detach its context does not end with the caller's.
func (c *claimer) newGrant(l backend.Lease, sent time.Time, handed bool) (*grant, error) {
	lk := c.lk
	g := &grant{lk: lk, key: c.key, q: c.q, outer: sectionOf(c.ctx), start: lk.clock.Now(), sent: sent, handed: handed}
	parent := c.ctx
	if c.detach {
		parent = uncancelled(c.ctx)
	}
	// ClaimWindow from sent, or less if the store says so (a lease handed
	// over a while ago).
	first := max(min(l.TTL, lk.cfg.ClaimWindow), 0)
	gr := lease.Grant{Key: c.sk, Owner: c.owner, Lease: l, Sent: sent, TTL: first}
	if lk.ceiling() > first {
		// On the alarm: no goroutine until then; most sections are shorter.
		gr.Wake = first / 3
	}
	if err := g.Start(context.WithValue(parent, sectionKey{}, g), &lk.terms, g, gr); err != nil {
		return nil, err
	}
	return g, nil
}

func (lk *Locker) ceiling() time.Duration {
	return max(lk.cfg.HoldDuration, lk.cfg.AutoRenew)
}

// Lost reports the loss (lease.Hooks). It runs under the holding's lock,
// so EventLost always comes before EventReleased.
func (g *grant) Lost(cause error) error {
	if errors.Is(cause, lease.ErrExpired) {
		cause = ErrLeaseExpired
	}
	g.lk.report(Event{Kind: EventLost, Key: g.key, Token: g.Token(), Held: g.lk.clock.Since(g.start), Err: cause})
	return cause
}

// AfterLost passes the local turn on once the lost holder's context is
// cancelled (lease.AfterLoss), never while the lapsed section is live.
func (g *grant) AfterLost() { g.lk.exit(g.Key(), g.q, nil) }

// Woken starts the renewal a third into the first lease (lease.Hooks).
func (g *grant) Woken() {
	g.mu.Lock()
	if g.Over() {
		g.mu.Unlock()
		return
	}
	g.renewWG.Add(1)
	g.mu.Unlock()
	defer g.renewWG.Done()
	g.renew(g.Context())
}

// renew extends the lease every third of a hold, each time to
// HoldDuration or what is left of the ceiling, until it lasts to the
// ceiling; a failed extension is tried again before the lease runs out.
func (g *grant) renew(rctx context.Context) {
	lk := g.lk
	hold := lk.cfg.HoldDuration
	for {
		lasts := g.Left() + lk.terms.Margin // the lease, a margin past the deadline
		left := lk.ceiling() - lk.clock.Since(g.sent)
		if left <= 0 || lasts >= left {
			return
		}
		_, err := g.Renew(rctx, min(hold, left))
		wait := hold / 3
		switch {
		case err == nil:
			lk.report(Event{Kind: EventExtended, Key: g.key, Token: g.Token()})
		case errors.Is(err, lease.ErrLate):
			return // the deadline passed: the alarm gives the holding up
		case errors.Is(err, backend.ErrNotHeld):
			g.Lose(fmt.Errorf("%w: %w", ErrLeaseExpired, err))
			return
		case rctx.Err() != nil:
			return
		default:
			lk.logger.Warn("synclock: extending a lock's lease failed; will retry until the lease ends", "key", g.key, "err", err)
			wait = max((g.Left()+lk.terms.Margin)/3, time.Millisecond)
		}
		if lk.waitTurn(rctx, nil, wait, "") != nil {
			return
		}
	}
}

// release ends the holding, deletes the key even when ctx has ended, and
// reports ErrLeaseExpired if the lease ended first.
func (g *grant) release(ctx context.Context) error {
	lk := g.lk
	wasLost := g.End() // no renewal and no loss from now on
	g.mu.Lock()
	g.renewWG.Wait()
	g.mu.Unlock()
	var t *ticket
	var rerr error
	if wasLost {
		rerr = g.Drop(ctx, 0) // the loss passed the local turn on
	} else {
		t, rerr = g.drop(ctx)
		lk.exit(g.Key(), g.q, t)
	}
	var err error
	switch {
	case errors.Is(rerr, backend.ErrNotHeld):
		err = fmt.Errorf("synclock: lock %q: %w: %w", g.key, ErrLeaseExpired, rerr)
	case rerr != nil:
		lk.logger.Warn("synclock: releasing a lock failed; it expires after its hold duration", "key", g.key, "err", rerr)
		err = fmt.Errorf("synclock: releasing lock %q: %w", g.key, rerr)
	case wasLost:
		err = fmt.Errorf("synclock: lock %q: %w (hold duration %v, claim window %v)", g.key, ErrLeaseExpired, lk.cfg.HoldDuration, lk.cfg.ClaimWindow)
	}
	lk.report(Event{Kind: EventReleased, Key: g.key, Token: g.Token(), Held: lk.clock.Since(g.start), Err: err})
	return err
}

// drop gives the lease back. When the store can put a waiter in line as
// it releases (backend.Rejoin) and another goroutine of this process waits
// for the key, the release takes a place in line for that goroutine, so
// that it need not ask: it returns the place, which the goroutine gets
// with the turn.
func (g *grant) drop(ctx context.Context) (*ticket, error) {
	lk := g.lk
	r, ok := lk.store.(backend.Rejoin)
	if !ok || lk.noHandover.Load() || !lk.waitedFor(g.q) {
		return nil, g.Drop(ctx, 0)
	}
	t := &ticket{owner: lk.newOwner(), sent: lk.clock.Now()}
	joined, err := g.DropJoin(ctx, r, t.owner, lk.cfg.ClaimWindow, lk.floor(g.Key()).Load(), lk.patience())
	if err != nil && !errors.Is(err, backend.ErrNotHeld) {
		// The release may have run, and taken the place, without its
		// reply reaching us: nobody will wait as that owner.
		lk.dequeue(ctx, g.key, g.Key(), t.owner)
	}
	if !joined {
		return nil, err
	}
	return t, nil
}
