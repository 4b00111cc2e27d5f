package membackend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/baton-go/baton/backend"
)

// waiter is one owner's place in a key's line.
type waiter struct {
	owner    string
	deadline time.Time     // the place lapses at this moment of the store's clock
	ttl      time.Duration // what it asked for, should the key be handed to it
	floor    uint64
}

// mailKey names the mailbox in which a waiter finds the key handed to it.
type mailKey struct{ key, owner string }

// AcquireQueued implements backend.Queue.
func (s *Store) AcquireQueued(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
	if err := s.check(ctx, "acquire", key); err != nil {
		return backend.Lease{}, err
	}
	if err := errors.Join(backend.ValidateArgs(key, owner, ttl), backend.ValidateFloor(floor), backend.ValidatePatience(patience)); err != nil {
		return backend.Lease{}, fmt.Errorf("membackend: acquire queued: %w", err)
	}
	ttl = backend.RoundUpMillis(ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return backend.Lease{}, err
	}
	now := s.clock.Now()
	next := s.nextLocked(key, now)
	if e := s.liveLocked(key, now); e != nil {
		if e.owner == owner && !e.released {
			// A release handed the key to owner (Handover).
			delete(s.mail, mailKey{key, owner})
			return e.lease(key, now), nil
		}
		s.joinLocked(key, owner, now, patience, ttl, floor)
		return backend.Lease{}, &backend.HeldError{Holder: e.lease(key, now), Next: s.nextLocked(key, now)}
	}
	if next != "" && next != owner {
		s.joinLocked(key, owner, now, patience, ttl, floor)
		return backend.Lease{}, &backend.HeldError{Holder: backend.Lease{Key: key}, Next: next}
	}
	if err := s.refusalLocked(key, ttl, floor, now); err != nil {
		return backend.Lease{}, err
	}
	s.leaveLineLocked(key, owner)
	return s.grantLocked(key, owner, ttl, floor, now), nil
}

// Dequeue implements backend.Queue.
func (s *Store) Dequeue(ctx context.Context, key, owner string) error {
	if err := s.check(ctx, "dequeue", key); err != nil {
		return err
	}
	if err := errors.Join(backend.ValidateKey(key), backend.ValidateOwner(owner)); err != nil {
		return fmt.Errorf("membackend: dequeue: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return err
	}
	now := s.clock.Now()
	first := s.nextLocked(key, now) == owner
	left := s.leaveLineLocked(key, owner)
	if e := s.liveLocked(key, now); e != nil && e.owner == owner && !e.released {
		// The key was handed to owner, who gave up before it knew: pass
		// it on.
		s.freeLocked(key, e, now)
		return nil
	}
	delete(s.mail, mailKey{key, owner})
	if left && first && s.liveLocked(key, now) == nil {
		s.passLocked(key, now)
	}
	return nil
}

// AwaitHandover implements backend.Handover. max is measured on the
// store's clock.
func (s *Store) AwaitHandover(ctx context.Context, key, owner string, max time.Duration) (backend.Lease, bool, error) {
	if err := s.check(ctx, "await handover", key); err != nil {
		return backend.Lease{}, false, err
	}
	if err := errors.Join(backend.ValidateKey(key), backend.ValidateOwner(owner), backend.ValidateMaxWait(max)); err != nil {
		return backend.Lease{}, false, fmt.Errorf("membackend: await handover: %w", err)
	}
	if s.noHandover {
		return backend.Lease{}, false, fmt.Errorf("membackend: await handover %q: %w: the store was made WithoutHandover", key, errors.ErrUnsupported)
	}
	mk := mailKey{key, owner}
	s.mu.Lock()
	if err := s.openLocked(); err != nil {
		s.mu.Unlock()
		return backend.Lease{}, false, err
	}
	box := s.mailboxLocked(mk)
	s.mu.Unlock()

	l, ok, err := s.awaitMail(ctx, key, box, max)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ok && err == nil {
		select { // a handover that came with the timer
		case l = <-box:
			ok = true
		default:
		}
	}
	if s.mail[mk] == box && (ok || len(box) == 0) {
		delete(s.mail, mk)
	}
	if ok {
		l, ok = s.collectLocked(mk, l)
	}
	return l, ok, err
}

// awaitMail waits for a lease in box for up to max on the store's clock;
// ok false when max passed, an error when ctx ended first.
func (s *Store) awaitMail(ctx context.Context, key string, box chan backend.Lease, max time.Duration) (backend.Lease, bool, error) {
	t := s.clock.NewTimer(max)
	defer t.Stop()
	select {
	case l := <-box:
		return l, true, nil
	case <-t.C():
		return backend.Lease{}, false, nil
	case <-ctx.Done():
		return backend.Lease{}, false, fmt.Errorf("membackend: await handover %q: %w", key, backend.ContextError(ctx))
	}
}

// collectLocked returns what is left now of the lease l handed over in
// mk: what every Lease says; a lease that ended before it was collected
// is not returned (ok false).
func (s *Store) collectLocked(mk mailKey, l backend.Lease) (backend.Lease, bool) {
	now := s.clock.Now()
	e := s.leases[mk.key]
	if e == nil || e.owner != mk.owner || e.token != l.Token || !now.Before(e.expires) {
		return backend.Lease{}, false
	}
	return e.lease(mk.key, now), true
}

// mailboxLocked returns the mailbox of mk, making it if needed.
func (s *Store) mailboxLocked(mk mailKey) chan backend.Lease {
	box := s.mail[mk]
	if box == nil {
		box = make(chan backend.Lease, 1)
		s.mail[mk] = box
	}
	return box
}

// freeLocked ends key's lease e (a release without keep time) and passes
// the key on (passLocked); it reports whether it handed the key over.
func (s *Store) freeLocked(key string, e *entry, now time.Time) bool {
	s.dropLocked(key, e)
	return s.passLocked(key, now)
}

// passLocked gives the free key to the first live waiter in line, or else
// tells watchers it is free (EventReleased, naming the waiter it is kept
// for when the store does not hand over); it reports whether it handed
// the key over.
func (s *Store) passLocked(key string, now time.Time) bool {
	if s.handOverLocked(key, now) {
		return true
	}
	s.notifyLocked(key, backend.Event{Kind: backend.EventReleased, Next: s.nextLocked(key, now)})
	return false
}

// handOverLocked grants the free key to the first live waiter in its line,
// with the ttl and floor it asked for, tells watchers the key is held for
// that ttl and leaves the lease in the waiter's mailbox. It reports
// whether anyone was in line.
func (s *Store) handOverLocked(key string, now time.Time) bool {
	if s.noHandover {
		return false
	}
	if s.nextLocked(key, now) == "" {
		return false
	}
	w := s.lines[key][0] // nextLocked left the first live waiter in front
	if s.refusalLocked(key, w.ttl, w.floor, now) != nil {
		return false // it asks again and is refused the same way
	}
	s.leaveLineLocked(key, w.owner)
	l := s.grantLocked(key, w.owner, w.ttl, w.floor, now)
	s.notifyLocked(key, backend.Event{Kind: backend.EventRenewed, TTL: w.ttl})
	box := s.mailboxLocked(mailKey{key, w.owner})
	select {
	case <-box: // a stale lease from an earlier holding
	default:
	}
	box <- l
	return true
}

// nextLocked drops the waiters of key whose place lapsed by now and
// returns the first of the others, or "".
func (s *Store) nextLocked(key string, now time.Time) string {
	line := slices.DeleteFunc(s.lines[key], func(w waiter) bool { return !now.Before(w.deadline) })
	if len(line) == 0 {
		delete(s.lines, key)
		return ""
	}
	s.lines[key] = line
	return line[0].owner
}

// joinLocked puts owner at the back of key's line, or keeps its place and
// moves its deadline, for patience from now, with the ttl and floor it
// asks for should the key be handed to it. Patience 0 changes nothing.
func (s *Store) joinLocked(key, owner string, now time.Time, patience, ttl time.Duration, floor uint64) {
	if patience <= 0 {
		return
	}
	w := waiter{owner: owner, deadline: now.Add(backend.RoundUpMillis(patience)), ttl: ttl, floor: floor}
	line := s.lines[key]
	for i := range line {
		if line[i].owner == owner {
			line[i] = w
			return
		}
	}
	s.lines[key] = append(line, w)
}

// leaveLineLocked takes owner out of key's line and reports whether it was
// in it.
func (s *Store) leaveLineLocked(key, owner string) bool {
	line := s.lines[key]
	i := slices.IndexFunc(line, func(w waiter) bool { return w.owner == owner })
	if i < 0 {
		return false
	}
	line = slices.Delete(line, i, i+1)
	if len(line) == 0 {
		delete(s.lines, key)
	} else {
		s.lines[key] = line
	}
	return true
}

var _ backend.Rejoin = (*Store)(nil)

// ReleaseAndJoin implements backend.Rejoin.
func (s *Store) ReleaseAndJoin(ctx context.Context, key, owner, next string, ttl time.Duration, floor uint64, patience time.Duration) (bool, error) {
	if err := s.check(ctx, "release", key); err != nil {
		return false, err
	}
	if err := errors.Join(backend.ValidateKey(key), backend.ValidateRejoin(owner, next, ttl, floor, patience)); err != nil {
		return false, fmt.Errorf("membackend: release and join: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, now, err := s.heldLocked(key, owner)
	if err != nil {
		return false, err
	}
	if !s.freeLocked(key, e, now) {
		return false, nil
	}
	s.joinLocked(key, next, now, patience, backend.RoundUpMillis(ttl), floor)
	return true, nil
}
