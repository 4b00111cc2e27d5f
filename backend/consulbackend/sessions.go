package consulbackend

import (
	"context"
	"fmt"
	"time"
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
