package synclock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-go/baton/backend"
)

// claim takes the lock in the store for the goroutine that owns q's turn.
// On a store with waiting lines (backend.Queue) a waiter holds a place in
// the key's line while it waits, so that the lock goes to the instance that
// has waited longest, and it leaves the line when it gives up. On a store
// that hands over (backend.Handover) the release grants the key to the
// first waiter, who collects it without another request; elsewhere a
// waiter sleeps until a release is announced and then asks again. used is
// the retries the caller already spent waiting behind local holders. A
// store that refuses because it restarted without its data (Recovering)
// grants the key to nobody for the time it names: the waiter sleeps that
// long, bounded by ctx, and the refusal is not counted as a retry.
func (lk *Locker) claim(ctx context.Context, key, sk string, q *queue, wait bool, used int, detach bool) (*grant, int, error) {
	tries := 0
	spared := 0 // tries refused as Recovering: not retries
	owner := lk.newOwner()
	// A grant, and a handover asked for in line, first lasts ClaimWindow;
	// the holder extends it if its section runs long (renew).
	ttl := lk.cfg.ClaimWindow
	line, _ := lk.store.(backend.Queue)
	hand, _ := lk.store.(backend.Handover)
	if lk.noHandover.Load() {
		hand = nil
	}
	var patience time.Duration
	if wait {
		patience = lk.patience
	}
	for {
		sent := lk.clock.Now()
		var l backend.Lease
		var err error
		if line != nil {
			l, err = line.AcquireQueued(ctx, sk, owner, ttl, lk.floor(sk), patience)
		} else {
			l, err = lk.store.Acquire(ctx, sk, owner, ttl, lk.floor(sk))
		}
		tries++
		if err == nil {
			lk.observe(sk, l.Token)
			g, err := lk.newGrant(ctx, detach, key, sk, q, owner, l, sent)
			if err == nil {
				return g, tries, nil
			}
			// The grant came back after its lease ended by this process's
			// clock (the store or the network stalled): another holder
			// may already have the lock. It is void: give it back and ask
			// again.
			lk.dropLate(ctx, key, sk, owner)
			if !wait {
				return nil, tries, fmt.Errorf("synclock: lock %q: %w: the grant came back after its claim window (%v) had passed", key, ErrLeaseExpired, lk.cfg.ClaimWindow)
			}
			continue
		}
		if errors.Is(err, backend.ErrFloorAhead) && lk.forgetFloor(key, sk, err) {
			continue
		}
		var held *backend.HeldError
		if !errors.As(err, &held) {
			return nil, tries, lk.giveUp(ctx, line, key, sk, owner, patience, nil, fmt.Errorf("synclock: acquiring lock %q: %w", key, err))
		}
		lk.observe(sk, held.Holder.Token)
		locked := &LockedError{Key: key, Holder: held.Holder, Next: held.Next, Recovering: held.Recovering}
		if !wait {
			return nil, tries, locked
		}
		if held.Recovering {
			// Nobody gets the key before Holder.TTL, and no release can
			// come sooner: sleep it out, then ask again.
			if spared == 0 {
				lk.logger.Info("synclock: the store grants the lock to nobody until leases it may have lost have ended (it restarted without its data, lost it, or is new to baton); waiting. "+
					"A store known to hold no live lease is declared whole with `batonctl init`; tests on servers started for them make their store WithoutRestartGuard",
					"key", key, "for", held.Holder.TTL)
			}
			spared++
			if err := lk.sleep(ctx, held.Holder.TTL); err != nil {
				return nil, tries, lk.giveUp(ctx, line, key, sk, owner, patience, locked, err)
			}
			continue
		}
		if lk.cfg.MaxRetries > 0 && tries-spared+used > lk.cfg.MaxRetries {
			lk.leaveLine(ctx, line, key, sk, owner, patience)
			locked.Tries = tries
			return nil, tries, locked
		}
		poll := lk.cfg.RetryInterval
		if held.Holder.Owner != "" {
			poll = min(poll, held.Holder.TTL+time.Millisecond)
		}
		if hand != nil {
			// The refused request was sent before any handover to
			// owner can happen, so the lease is counted from then.
			l, ok, err := hand.AwaitHandover(ctx, sk, owner, poll)
			switch {
			case ok:
				lk.observe(sk, l.Token)
				g, err := lk.newGrant(ctx, detach, key, sk, q, owner, l, sent)
				if err != nil {
					lk.dropLate(ctx, key, sk, owner)
					continue
				}
				g.handed = true
				return g, tries, nil
			case errors.Is(err, errors.ErrUnsupported):
				// Wait for releases instead, from now on.
				lk.noHandover.Store(true)
				hand = nil
			case err != nil:
				return nil, tries, lk.giveUp(ctx, line, key, sk, owner, patience, locked,
					fmt.Errorf("synclock: waiting for lock %q, %s: %w", key, locked.holderText(), err))
			default:
				continue // nothing handed over in time: ask again, which keeps the place
			}
		}
		if q.watch == nil {
			// Subscribe once per queue, then look again at once: a
			// release between the failed claim and the subscription
			// would otherwise go unseen until the fallback poll.
			if w, err := lk.store.Watch(ctx, sk); err == nil {
				q.watch = w
				continue
			} else if !ended(ctx) {
				lk.logger.Warn("synclock: cannot watch the lock key; falling back to polling", "key", key, "err", err)
			}
		}
		if err := lk.waitTurn(ctx, q, poll, owner); err != nil {
			return nil, tries, lk.giveUp(ctx, line, key, sk, owner, patience, locked, err)
		}
	}
}

// dropLate releases a grant that came back too late, so that it does not
// keep the lock from others until it expires (owner-checked: a lease that
// already ended, or went to another holder, is left alone).
func (lk *Locker) dropLate(ctx context.Context, key, sk, owner string) {
	lk.logger.Warn("synclock: a lock was granted too late to use: the store answered after the claim window; asking again", "key", key)
	if err := lk.terms.Drop(ctx, sk, owner, 0); err != nil && !errors.Is(err, backend.ErrNotHeld) {
		lk.logger.Warn("synclock: giving back a late grant failed; it expires by itself", "key", key, "err", err)
	}
}

// giveUp leaves the line after a failed wait or store call and returns
// err, or, if ctx ended, ErrTimeout (naming the holder when the last
// refusal, locked, is known) joined with the context's error.
func (lk *Locker) giveUp(ctx context.Context, line backend.Queue, key, sk, owner string, patience time.Duration, locked *LockedError, err error) error {
	lk.leaveLine(ctx, line, key, sk, owner, patience)
	if ctx.Err() == nil {
		return err
	}
	if locked == nil {
		return errors.Join(fmt.Errorf("synclock: waiting for lock %q: %w", key, ErrTimeout), backend.ContextError(ctx))
	}
	return errors.Join(fmt.Errorf("synclock: waiting for lock %q, %s: %w", key, locked.holderText(), ErrTimeout), backend.ContextError(ctx))
}

// leaveLine takes a waiter that gives up out of the key's line, so that
// the lock does not sit idle, kept for it, until its place lapses. It runs
// even when ctx has ended.
func (lk *Locker) leaveLine(ctx context.Context, line backend.Queue, key, sk, owner string, patience time.Duration) {
	if line == nil || patience <= 0 {
		return
	}
	dctx, cancel := context.WithTimeout(uncancelled(ctx), lk.opTimeout)
	defer cancel()
	if err := line.Dequeue(dctx, sk, owner); err != nil {
		lk.logger.Warn("synclock: leaving the lock's waiting line failed; the place lapses by itself", "key", key, "patience", patience, "err", err)
	}
}

// waitTurn sleeps until a release is announced that does not keep the key
// for another waiter in line, d passes, or ctx ends. Announced renewals
// move the wake-up to the holder's new expiry, but never past d: a waiter
// asks again at least every d, which keeps its place in the line.
func (lk *Locker) waitTurn(ctx context.Context, q *queue, d time.Duration, owner string) error {
	var events <-chan backend.Event
	if q.watch != nil {
		events = q.watch.C()
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

// sleep waits d on the Locker's clock, or until ctx ends.
func (lk *Locker) sleep(ctx context.Context, d time.Duration) error {
	t := lk.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return backend.ContextError(ctx)
	}
}
