package consulbackend

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"
)

// Idle sessions.
//
// Creating a session and destroying it are Raft writes; renewing one is
// not. So a session of a lease or a place in line that no longer holds
// anything (its lease was released or handed over, its place left the
// line, or the write it was made for lost a race) is not destroyed but
// kept, idle, for the store's next lease or place of the same TTL, up to
// idleMax of each TTL. A session taken from there is renewed first, so
// that Consul keeps it as long as a new one; one that Consul ended
// meanwhile (it was idle for longer than its TTL allows) is dropped.
// Close destroys the idle sessions.
//
// An idle session holds nothing, so its ending, whenever it comes, frees
// nothing and puts no key under lock-delay.

// idleMax is how many idle sessions of one TTL a store keeps.
const idleMax = 16

// sessionFor returns a session of ttl for a lease or a place in line: an idle
// one, renewed, or a new one.
func (s *Store) sessionFor(ctx context.Context, op, key string, ttl time.Duration) (string, error) {
	for {
		id := s.takeIdle(ttl)
		if id == "" {
			return s.createSession(ctx, op, key, "lease under "+s.prefix, ttl)
		}
		entries, _, err := s.session.Renew(id, s.writeOpts(ctx))
		if err != nil {
			s.destroyLater(id)
			if ctx.Err() == nil {
				// The idle session only saves a create: a renewal the
				// agent refused (a 500 while it has no leader, which the
				// client reports without its status) or that failed on
				// the way does not fail the caller. A new session is
				// made, whose error, if the agent is down, is the
				// caller's.
				return s.createSession(ctx, op, key, "lease under "+s.prefix, ttl)
			}
			return "", s.transport(op, key, ctx, fmt.Errorf("renew an idle session: %w", err))
		}
		if entries != nil {
			return id, nil
		}
		// Consul ended it: try the next.
	}
}

func (s *Store) takeIdle(ttl time.Duration) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.idle[ttl]
	if len(ids) == 0 {
		return ""
	}
	id := ids[len(ids)-1]
	s.idle[ttl] = ids[:len(ids)-1]
	return id
}

// putIdle keeps sessions of ttl that hold nothing any more for the
// store's next lease or place of that TTL, and destroys those it has no
// room for (or all, once the store is closed).
func (s *Store) putIdle(ttl time.Duration, ids ...string) {
	var extra []string
	s.mu.Lock()
	for _, id := range ids {
		if id == "" {
			continue
		}
		if s.done || len(s.idle[ttl]) >= idleMax {
			extra = append(extra, id)
			continue
		}
		s.idle[ttl] = append(s.idle[ttl], id)
	}
	s.mu.Unlock()
	if len(extra) > 0 {
		s.destroyLater(extra...)
	}
}

// dropIdle destroys the idle sessions of a closed store.
func (s *Store) dropIdle() {
	s.mu.Lock()
	var ids []string
	for _, l := range s.idle {
		ids = append(ids, l...)
	}
	clear(s.idle)
	s.mu.Unlock()
	for _, id := range ids {
		s.destroySession(context.Background(), id)
	}
}

// millis is a record's TTL in milliseconds as a duration.
func millis(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

// createSession creates the session of one lease (or place in line, or
// member), named after whom it is for: TTL ttl, the store's lock-delay,
// keys deleted when it ends, and no health checks, so that only its TTL
// (or a release) ends it, never a flapping agent.
func (s *Store) createSession(ctx context.Context, op, key, whom string, ttl time.Duration) (string, error) {
	return s.newSession(ctx, op, key, whom, ttl, s.lockDelay)
}

// newSession is createSession with the given lock-delay.
func (s *Store) newSession(ctx context.Context, op, key, whom string, ttl, lockDelay time.Duration) (string, error) {
	// The body is written out here because the client's helpers leave
	// out a zero LockDelay, which the agent reads as its default of 15 s.
	body := map[string]any{
		"Name":       "baton " + whom,
		"TTL":        ttl.String(),
		"Behavior":   api.SessionBehaviorDelete,
		"LockDelay":  lockDelay.String(),
		"NodeChecks": []string{},
	}
	var out struct{ ID string }
	if _, err := s.raw.Write("/v1/session/create", body, &out, s.writeOpts(ctx)); err != nil {
		return "", s.transport(op, key, ctx, fmt.Errorf("create session: %w", err))
	}
	if out.ID == "" {
		return "", fmt.Errorf("consulbackend: %s %q: the agent at %s created a session without an ID", op, key, s.addr)
	}
	return out.ID, nil
}

// destroyLater ends sessions that no longer hold anything (a released
// lease's, a place's that left the line), off the caller's path. Close
// waits for it.
func (s *Store) destroyLater(ids ...string) {
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		for _, id := range ids {
			s.destroySession(context.Background(), id)
		}
		return
	}
	s.cleanups.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.cleanups.Done()
		for _, id := range ids {
			s.destroySession(context.Background(), id)
		}
	}()
}

// destroySession ends a session the store no longer needs, also after ctx
// ended; a failure leaves it to its TTL.
func (s *Store) destroySession(ctx context.Context, id string) {
	if id == "" {
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = s.session.Destroy(id, (&api.WriteOptions{}).WithContext(dctx))
}
