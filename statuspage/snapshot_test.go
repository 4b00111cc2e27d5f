package statuspage

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSnapshotsShareOneRead checks that requests that come while a read
// is in flight wait for it and get its result, that a request whose
// context ends while it waits returns without it, that a read that
// panics still wakes the waiters, and that a snapshot older than maxAge
// is read again.
func TestSnapshotsShareOneRead(t *testing.T) {
	c := &snapshots{maxAge: time.Hour}
	var reads atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	read := func(context.Context) Status {
		if reads.Add(1) == 1 {
			close(started)
			<-release
		}
		return Status{Healthy: true}
	}
	first := make(chan Status)
	go func() { s, _ := c.get(context.Background(), read); first <- s }()
	<-started

	const waiters = 8
	var wg sync.WaitGroup
	results := make(chan Status, waiters)
	for range waiters {
		wg.Go(func() {
			s, ok := c.get(context.Background(), read)
			if !ok {
				t.Errorf("a request waiting for the read in flight got nothing")
			}
			results <- s
		})
	}
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := c.get(ended, read); ok {
		t.Errorf("a request whose context ended while a read was in flight got a status")
	}
	close(release)
	wg.Wait()
	close(results)
	for s := range results {
		if !s.Healthy {
			t.Errorf("a waiting request got %+v; want the shared read's result", s)
		}
	}
	if s := <-first; !s.Healthy {
		t.Errorf("the reading request got %+v", s)
	}
	if n := reads.Load(); n != 1 {
		t.Errorf("%d reads for %d concurrent requests; want 1", n, waiters+2)
	}

	// A read that panics ends the flight: the next request reads again.
	c = &snapshots{maxAge: time.Hour}
	func() {
		defer func() { recover() }()
		c.get(context.Background(), func(context.Context) Status { panic("boom") })
	}()
	if s, ok := c.get(context.Background(), read); !ok || !s.Healthy {
		t.Errorf("after a read panicked, get = %+v, %v; want a new read", s, ok)
	}

	// A snapshot older than maxAge is read again.
	c = &snapshots{maxAge: time.Nanosecond}
	reads.Store(1)
	c.get(context.Background(), read)
	time.Sleep(time.Millisecond) // let the snapshot age past maxAge; not a wait for an event
	c.get(context.Background(), read)
	if n := reads.Load(); n != 3 {
		t.Errorf("%d reads for two requests maxAge apart; want 2", n-1)
	}
}
