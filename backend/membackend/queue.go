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
	deadline time.Time // the place lapses at this moment of the store's clock
}

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
		s.joinLocked(key, owner, now, patience)
		return backend.Lease{}, &backend.HeldError{Holder: e.lease(key, now), Next: s.nextLocked(key, now)}
	}
	if next != "" && next != owner {
		s.joinLocked(key, owner, now, patience)
		return backend.Lease{}, &backend.HeldError{Holder: backend.Lease{Key: key}, Next: next}
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
	if !s.leaveLineLocked(key, owner) {
		return nil
	}
	if first && s.liveLocked(key, now) == nil {
		s.notifyLocked(key, backend.Event{Kind: backend.EventReleased, Next: s.nextLocked(key, now)})
	}
	return nil
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
// moves its deadline, for patience from now. Patience 0 changes nothing.
func (s *Store) joinLocked(key, owner string, now time.Time, patience time.Duration) {
	if patience <= 0 {
		return
	}
	deadline := now.Add(backend.RoundUpMillis(patience))
	line := s.lines[key]
	for i := range line {
		if line[i].owner == owner {
			line[i].deadline = deadline
			return
		}
	}
	s.lines[key] = append(line, waiter{owner: owner, deadline: deadline})
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
