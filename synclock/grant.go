package synclock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/internal/clock"
)

// grant is one holding of a lock.
type grant struct {
	lk     *Locker
	key    string // the caller's key
	sk     string // the store key
	q      *queue
	owner  string
	lease  backend.Lease
	outer  *grant          // the section ctx came from, if any (reentrancy)
	ctx    context.Context // carries the grant; cancelled when the lease ends or is about to
	cancel context.CancelCauseFunc
	start  time.Time     // when the holding began
	sent   time.Time     // when the request that got the lease was sent
	first  time.Duration // the first lease, counted from sent
	handed bool          // a release handed the lock over

	// One deadline per grant on the Locker's alarm (fire): if the grant
	// renews, the first starts the renewal (renews is then set), and from
	// then on, or from the start if it does not renew, the deadline is a
	// margin before the lease ends. due and slot belong to the alarm.
	due    time.Time
	slot   int
	renews atomic.Bool

	// The grant's state, one of held, renewing, lost, released, changes
	// under mu and only forward: held -> renewing when the renewal
	// starts, held or renewing -> lost when the lease ends first (lose),
	// and any state but released -> released when release begins. over
	// mirrors "lost or released" for reads without the lock (Token,
	// Assert). A renewal that starts sets stopRen, which cancels its store
	// call and its waits; release calls it and waits on renewWG.
	mu      sync.Mutex
	state   grantState
	stopRen context.CancelFunc
	renewWG sync.WaitGroup
	over    atomic.Bool
}

// grantState is where a grant is in its life.
type grantState int

const (
	grantHeld     grantState = iota // the section runs on the first lease
	grantRenewing                   // a renewal goroutine extends the lease
	grantLost                       // the lease ended first: the context is cancelled, the turn passed on
	grantReleased                   // release began: no renewal starts, no loss is reported
)

// newGrant starts the holding of a lease. Its context keeps ctx's values;
// with detach it does not end with ctx.
func (lk *Locker) newGrant(ctx context.Context, detach bool, key, sk string, q *queue, owner string, l backend.Lease, sent time.Time) *grant {
	g := &grant{lk: lk, key: key, sk: sk, q: q, owner: owner, lease: l, outer: sectionOf(ctx), start: lk.clock.Now(), sent: sent}
	parent := ctx
	if detach {
		parent = uncancelled(ctx)
	}
	g.ctx, g.cancel = context.WithCancelCause(context.WithValue(parent, sectionKey{}, g))
	// The lease ends ClaimWindow after the request was sent, or sooner if
	// the store says so (a lease handed over a while ago); give up a
	// margin before that.
	g.first = lk.firstLease(l)
	d := lk.lossIn(g.first, sent)
	if lk.ceiling() > g.first && g.first/3 < d {
		// No goroutine until the section has run a third of the lease:
		// most sections are shorter.
		d = g.first / 3
		g.renews.Store(true)
	}
	lk.alarm.set(g, d)
	return g
}

// lossIn is how long from now a lease of ttl, counted from sent, lasts,
// less the margin: when the grant gives the lease up.
func (lk *Locker) lossIn(ttl time.Duration, sent time.Time) time.Duration {
	return ttl - lk.leaseMargin - lk.clock.Since(sent)
}

// fire is the grant's deadline coming: the first time for a grant that
// renews, the renewal starts; otherwise the lease is about to end.
func (g *grant) fire() {
	if g.renews.CompareAndSwap(true, false) {
		g.renew()
		return
	}
	g.lose(ErrLeaseExpired)
}

// ceiling is how long a holding may last in all: HoldDuration, or the
// ceiling of WithAutoRenew.
func (lk *Locker) ceiling() time.Duration {
	return max(lk.cfg.HoldDuration, lk.autoRenew)
}

// renew extends the lease while the section runs: first when a third of
// the first lease has passed, then every third of a hold, each time to
// HoldDuration or to what is left of the ceiling, whichever is shorter,
// until the lease lasts to the ceiling. A failed extension is tried again
// before the lease runs out. It runs on a goroutine of its own, and sets
// the grant's deadline to when the lease is about to end.
//
// The deadline on the alarm is the one source of truth for the grant: an
// extension is not sent once it has passed, each call is bounded by it,
// and a reply that lands after it is void (alarm.extend refuses it), so
// a late success never revives a grant that lose gave up, nor moves its
// deadline.
func (g *grant) renew() {
	g.mu.Lock()
	if g.state != grantHeld {
		g.mu.Unlock()
		return
	}
	rctx, stop := context.WithCancel(g.ctx)
	g.state, g.stopRen = grantRenewing, stop
	g.renewWG.Add(1)
	g.mu.Unlock()
	defer g.renewWG.Done()
	defer stop()
	lk := g.lk
	lk.alarm.set(g, lk.lossIn(g.first, g.sent))

	sent := g.sent
	hold, ceiling := lk.cfg.HoldDuration, lk.ceiling()
	end := g.first // the lease lasts until sent+end, counted from before each request
	var t clock.Timer
	for {
		left := ceiling - lk.clock.Since(sent)
		if left <= 0 || end >= ceiling {
			return
		}
		until, ok := lk.alarm.left(g)
		if !ok || until <= 0 {
			return // the deadline passed: the alarm gives the grant up
		}
		ttl := min(hold, left)
		rsent := lk.clock.Now()
		cctx, cancel := context.WithTimeout(rctx, min(lk.opTimeout, until))
		_, err := lk.store.Renew(cctx, g.sk, g.owner, ttl)
		cancel()
		wait := hold / 3
		switch {
		case err == nil:
			if !lk.alarm.extend(g, rsent.Add(ttl-lk.leaseMargin)) {
				return // the reply came after the deadline: void
			}
			end = rsent.Sub(sent) + ttl
			lk.report(Event{Kind: EventExtended, Key: g.key, Token: g.lease.Token})
		case errors.Is(err, backend.ErrNotHeld):
			g.lose(fmt.Errorf("%w: %w", ErrLeaseExpired, err))
			return
		case rctx.Err() != nil:
			return
		default:
			lk.logger.Warn("synclock: extending a lock's lease failed; will retry until the lease ends", "key", g.key, "err", err)
			wait = max((end-lk.clock.Since(sent))/3, time.Millisecond)
		}
		if t == nil {
			t = lk.clock.NewTimer(wait)
			defer t.Stop()
		} else {
			t.Reset(wait)
		}
		select {
		case <-rctx.Done():
			return
		case <-t.C():
		}
	}
}

// lose ends the section's context because the lease ended or is about
// to, reports it and passes the local turn on, so that the next goroutine
// of this process waiting for the key goes to the store; once, and not
// after the release began. It holds mu throughout, so a release that
// begins meanwhile waits for the report: EventLost always comes before
// EventReleased.
func (g *grant) lose(cause error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state == grantLost || g.state == grantReleased {
		return
	}
	g.state = grantLost
	g.over.Store(true)
	g.cancel(cause)
	g.lk.report(Event{Kind: EventLost, Key: g.key, Token: g.lease.Token, Held: g.lk.clock.Since(g.start), Err: cause})
	g.passTurn()
}

// passTurn gives the local turn to the next waiter: at the loss or at the
// release, whichever comes first (the grant's state decides which).
func (g *grant) passTurn() { g.lk.exit(g.sk, g.q) }

// release ends the holding: stops renewals, deletes the key in the store
// (owner-checked, even when the caller's context has ended) and passes the
// local turn on, unless the loss did already. It reports ErrLeaseExpired
// if the lease ended first.
func (g *grant) release(ctx context.Context) error {
	lk := g.lk
	lk.alarm.cancel(g)
	g.mu.Lock()
	was := g.state
	if was == grantReleased {
		g.mu.Unlock()
		return nil
	}
	g.state = grantReleased // no renewal starts, and no loss is reported, from now on
	g.over.Store(true)
	stop := g.stopRen
	g.mu.Unlock()
	if stop != nil {
		stop() // cancels an extension in flight
		g.renewWG.Wait()
		lk.alarm.cancel(g) // the renewal may have set it again
	}
	g.cancel(context.Canceled)
	rctx, cancel := context.WithTimeout(uncancelled(ctx), lk.opTimeout)
	rerr := lk.store.Release(rctx, g.sk, g.owner, 0)
	cancel()
	if was != grantLost {
		g.passTurn()
	}
	var err error
	switch {
	case errors.Is(rerr, backend.ErrNotHeld):
		err = fmt.Errorf("synclock: lock %q: %w: %w", g.key, ErrLeaseExpired, rerr)
	case rerr != nil:
		lk.logger.Warn("synclock: releasing a lock failed; it expires after its hold duration", "key", g.key, "err", rerr)
		err = fmt.Errorf("synclock: releasing lock %q: %w", g.key, rerr)
	case was == grantLost:
		err = fmt.Errorf("synclock: lock %q: %w (hold duration %v, claim window %v)", g.key, ErrLeaseExpired, lk.cfg.HoldDuration, lk.cfg.ClaimWindow)
	}
	lk.report(Event{Kind: EventReleased, Key: g.key, Token: g.lease.Token, Held: lk.clock.Since(g.start), Err: err})
	return err
}
