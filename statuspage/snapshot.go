package statuspage

import (
	"context"
	"sync"
	"time"
)

// snapshots keeps the last Status read from the store and the read in
// flight, so that the page's cost does not grow with the number of
// requests: a request within maxAge of the last read gets that read, and
// requests that come while a read is in flight wait for it and share it.
// No lock is held across the read.
type snapshots struct {
	maxAge time.Duration

	mu     sync.Mutex
	last   *Status       // nil before the first read ends
	readAt time.Time     // when last was read (monotonic)
	flight chan struct{} // closed when the read in flight ends; nil if none
}

// get returns a Status at most maxAge old, calling read when there is
// none and no read is in flight. read runs in the calling request's
// goroutine, on a context that the request's end does not cancel (read
// bounds its own calls), so that the requests waiting for it get its
// result. ok is false when ctx ended while the request waited for
// another request's read.
func (c *snapshots) get(ctx context.Context, read func(context.Context) Status) (s Status, ok bool) {
	c.mu.Lock()
	if c.last != nil && time.Since(c.readAt) < c.maxAge {
		s = *c.last
		c.mu.Unlock()
		return s, true
	}
	if wait := c.flight; wait != nil {
		c.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return Status{}, false
		}
		return c.latest() // false only if the read panicked
	}
	done := make(chan struct{})
	c.flight = done
	c.mu.Unlock()
	return c.readShared(ctx, read, done), true
}

// readShared runs read for get and publishes its result; whatever
// happens, it ends the flight and wakes the requests waiting for it.
func (c *snapshots) readShared(ctx context.Context, read func(context.Context) Status, done chan struct{}) (s Status) {
	ended := false
	defer func() {
		c.mu.Lock()
		if ended {
			c.last, c.readAt = &s, time.Now()
		}
		c.flight = nil
		c.mu.Unlock()
		close(done)
	}()
	s = read(context.WithoutCancel(ctx))
	ended = true
	return s
}

// latest returns the last Status read, of any age, without reading.
func (c *snapshots) latest() (Status, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		return Status{}, false
	}
	return *c.last, true
}
