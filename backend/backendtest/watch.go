package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// awaitEvent reads w until done says an event ends the wait, and returns
// done's error, or an error if an event is malformed (see checkEvent) or
// none ends the wait within waitTimeout (want says what was awaited).
func awaitEvent(w backend.Watch, maxTTL time.Duration, want string, done func(backend.Event) (bool, error)) error {
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		select {
		case ev := <-w.C():
			if err := checkEvent(ev, maxTTL); err != nil {
				return err
			}
			if ok, err := done(ev); ok || err != nil {
				return err
			}
		case <-timer.C:
			return fmt.Errorf("no %s within %v", want, waitTimeout)
		}
	}
}

// awaitFreeEvent reads w until it delivers an event other than a
// renewal (the key was released or may be free), and returns an error if
// none comes within waitTimeout or if an event is malformed (see
// checkEvent).
func awaitFreeEvent(w backend.Watch, maxTTL time.Duration) error {
	return awaitEvent(w, maxTTL, "event saying the key was released or may be free", func(ev backend.Event) (bool, error) {
		return ev.Kind != backend.EventRenewed, nil
	})
}

// checkEvent returns an error if ev is not one of the documented kinds,
// or is a renewal whose TTL is outside (0, maxTTL], maxTTL being the
// longest lease given on the key.
func checkEvent(ev backend.Event, maxTTL time.Duration) error {
	switch ev.Kind {
	case backend.EventRenewed:
		if ev.TTL <= 0 || ev.TTL > maxTTL {
			return fmt.Errorf("renewal event with TTL %v; no lease on the key was given more than %v", ev.TTL, maxTTL)
		}
	case backend.EventReleased, backend.EventMaybeFree:
	default:
		return fmt.Errorf("event %+v is of no documented kind", ev)
	}
	return nil
}

// lateEventWait is how long the suite looks for an event that must not be
// a release after a lease ended some other way. An event that comes later
// is not looked at: the check can miss a wrong event, never invent one.
const lateEventWait = 100 * time.Millisecond

// checkNotReleaseEvent fails t if w delivers an EventReleased within
// lateEventWait: the key's lease ended without its holder releasing it
// (what says how), and a waiter told "released" would claim the key at
// once instead of as cautiously as EventMaybeFree asks.
func checkNotReleaseEvent(t testing.TB, w backend.Watch, what string) {
	t.Helper()
	timer := time.NewTimer(lateEventWait)
	defer timer.Stop()
	select {
	case ev := <-w.C():
		if ev.Kind == backend.EventReleased {
			t.Errorf("%s: the watch reported %v; nobody released the key", what, ev.Kind)
		}
	case <-timer.C:
	}
}

// signalled fails t unless w delivers an event saying the key may be free
// within waitTimeout (see awaitFreeEvent).
func signalled(t testing.TB, w backend.Watch, maxTTL time.Duration, what string) {
	t.Helper()
	if err := awaitFreeEvent(w, maxTTL); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// watch opens a Watch on key and fails t on error. The Watch is closed
// when t ends.
func watch(t testing.TB, ctx context.Context, st backend.Store, key string) backend.Watch {
	t.Helper()
	w, err := st.Watch(ctx, key)
	if err != nil {
		t.Fatalf("Watch(%q): %v", key, err)
	}
	if w == nil {
		t.Fatalf("Watch(%q) returned a nil Watch and no error", key)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// testWatchSeesRelease releases a key many times, each after a Watch was
// opened, and checks that every release is signalled. It alternates
// between a watcher on the releasing client and one on another client,
// and between watching a held key and a key not yet acquired, to catch
// races between subscribing and publishing.
func (s *suite) testWatchSeesRelease(t *testing.T) {
	const rounds = 20
	ctx := testCtx(t)
	owner, other := s.store(t), s.store(t)
	for i := range rounds {
		key := s.key("watch-release", fmt.Sprint(i))
		ws := other
		if i%2 == 0 {
			ws = owner
		}
		beforeAcquire := i%4 >= 2
		var w backend.Watch
		if beforeAcquire {
			w = watch(t, ctx, ws, key)
		}
		s.acquire(t, ctx, owner, key, "owner", longTTL, 0)
		if !beforeAcquire {
			w = watch(t, ctx, ws, key)
		}
		release(t, ctx, owner, key, "owner", 0)
		signalled(t, w, longTTL, fmt.Sprintf("round %d: Watch opened before Release(keepFor 0)", i))
		if err := w.Close(); err != nil {
			t.Errorf("round %d: Close: %v", i, err)
		}
	}
}

// testManyWatchers opens many watches of one key on several clients and
// checks that one release signals every one of them.
func (s *suite) testManyWatchers(t *testing.T) {
	const (
		clients   = 3
		perClient = 10
	)
	ctx := testCtx(t)
	key := s.key("many-watchers")
	var watches []backend.Watch
	var owner backend.Store
	for range clients {
		st := s.store(t)
		owner = st
		for range perClient {
			watches = append(watches, watch(t, ctx, st, key))
		}
		// Watches of another key share the clients; they may signal or
		// not, and must not take this key's signals away.
		watch(t, ctx, st, s.key("many-watchers", "neighbour"))
	}

	s.acquire(t, ctx, owner, key, "owner", longTTL, 0)
	errs := make([]error, len(watches))
	var wg sync.WaitGroup
	for i, w := range watches {
		wg.Go(func() { errs[i] = awaitFreeEvent(w, longTTL) })
	}
	release(t, ctx, owner, key, "owner", 0)
	wg.Wait()
	missed := 0
	for i, err := range errs {
		if err != nil {
			missed++
			t.Logf("watch %d: %v", i, err)
		}
	}
	if missed > 0 {
		t.Errorf("%d of %d watches did not report the release", missed, len(watches))
	}
}

// testWatchClose checks that Close is idempotent, also when called
// concurrently, and that closing some watches of a key leaves the others
// (and watches opened later) working.
func (s *suite) testWatchClose(t *testing.T) {
	ctx := testCtx(t)
	st := s.store(t)
	key := s.key("watch-close")

	closed, open := watch(t, ctx, st, key), watch(t, ctx, st, key)
	for i := range 2 {
		if err := closed.Close(); err != nil {
			t.Errorf("Close %d of a Watch: %v", i+1, err)
		}
	}
	s.acquire(t, ctx, st, key, "owner", longTTL, 0)
	release(t, ctx, st, key, "owner", 0)
	signalled(t, open, longTTL, "a Watch whose sibling on the same client was closed")

	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = open.Close() })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent Close %d: %v", i+1, err)
		}
	}

	// With every watch of the key closed, a new one must subscribe afresh.
	again := watch(t, ctx, st, key)
	s.acquire(t, ctx, st, key, "owner", longTTL, 0)
	release(t, ctx, st, key, "owner", 0)
	signalled(t, again, longTTL, "a Watch opened after all earlier watches of the key were closed")
}

// testNoStaleReleaseEvents releases a key several times, acquires it
// again and only then watches it: EventReleased says the key is free now,
// so a Watch must not deliver one for a release that happened before it
// was opened. (Stores that spread notifications asynchronously, such as
// Redis Cluster's cluster-wide PUBLISH, can deliver an old release after
// the subscription was confirmed.) Each round uses a new client, since
// where a client's subscription lands can decide whether it sees stale
// messages.
func (s *suite) testNoStaleReleaseEvents(t *testing.T) {
	const rounds = 20
	ctx := testCtx(t)
	for i := range rounds {
		st := s.store(t)
		key := s.key("stale-release", fmt.Sprint(i))
		for range 3 {
			s.acquire(t, ctx, st, key, "owner", longTTL, 0)
			release(t, ctx, st, key, "owner", 0)
		}
		s.acquire(t, ctx, st, key, "owner", longTTL, 0)
		w := watch(t, ctx, st, key)
		checkNotReleaseEvent(t, w, fmt.Sprintf("round %d: a Watch opened on a held key after earlier releases", i))
		if t.Failed() {
			return
		}
		release(t, ctx, st, key, "owner", 0)
		w.Close()
	}
}

// testWaitFreeKeepFor checks that backend.WaitFree does not return while
// a released lease is kept, and returns once the keep time is over.
func (s *suite) testWaitFreeKeepFor(t *testing.T) {
	const keep = 300 * time.Millisecond
	ctx := testCtx(t)
	owner, waiter := s.store(t), s.store(t)
	key := s.key("wait-free-keep")

	s.acquire(t, ctx, owner, key, "owner", longTTL, 0)
	released := time.Now()
	release(t, ctx, owner, key, "owner", keep)
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	err := backend.WaitFree(wctx, waiter, key)
	done := time.Now()
	if err != nil {
		t.Fatalf("WaitFree on a key kept for %v: %v", keep, err)
	}
	s.checkNotEarly(t, fmt.Sprintf("WaitFree after Release(keepFor %v)", keep), done, released, keep)
	checkFree(t, ctx, waiter, key, "when WaitFree returned")
}

// testWaitFreeWhileKept starts backend.WaitFree on a key held for
// longTTL and then releases it with a short keep time: the waiter must
// learn of the keep time (an EventRenewed with TTL keepFor, or a look at
// the store) and return soon after it, not sleep out the original lease.
func (s *suite) testWaitFreeWhileKept(t *testing.T) {
	const keep = 300 * time.Millisecond
	ctx := testCtx(t)
	owner, waiter := s.store(t), s.store(t)
	key := s.key("wait-free-while-kept")

	s.acquire(t, ctx, owner, key, "owner", longTTL, 0)
	wctx, cancel := context.WithTimeout(ctx, longTTL/2)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- backend.WaitFree(wctx, waiter, key) }()
	// Let WaitFree subscribe and look; it then sleeps for the lease.
	time.Sleep(100 * time.Millisecond)
	released := time.Now()
	release(t, ctx, owner, key, "owner", keep)
	if err := <-done; err != nil {
		t.Fatalf("WaitFree on a key released with keepFor %v while the lease had %v left: %v (it slept through the keep time)", keep, longTTL, err)
	}
	s.checkNotEarly(t, fmt.Sprintf("WaitFree after Release(keepFor %v)", keep), time.Now(), released, keep)
	checkFree(t, ctx, waiter, key, "when WaitFree returned")
}

// testWaitFreeExpiry checks that backend.WaitFree returns once a lease
// nobody releases has expired, and not before.
func (s *suite) testWaitFreeExpiry(t *testing.T) {
	const ttl = 300 * time.Millisecond
	ctx := testCtx(t)
	owner, waiter := s.store(t), s.store(t)
	key := s.key("wait-free-expiry")

	granted := time.Now()
	s.acquire(t, ctx, owner, key, "owner", ttl, 0)
	wctx, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	err := backend.WaitFree(wctx, waiter, key)
	done := time.Now()
	if err != nil {
		t.Fatalf("WaitFree on a lease of %v left to expire: %v", ttl, err)
	}
	s.checkNotEarly(t, "WaitFree on a lease left to expire", done, granted, ttl)
	checkFree(t, ctx, waiter, key, "when WaitFree returned")
}

// testWaitFreeContext checks that backend.WaitFree on a key held longer
// than its context lasts returns the context's error, and leaves the
// lease alone.
func (s *suite) testWaitFreeContext(t *testing.T) {
	const (
		ttl  = 10 * time.Second
		wait = 100 * time.Millisecond
	)
	ctx := testCtx(t)
	owner, waiter := s.store(t), s.store(t)
	key := s.key("wait-free-context")

	granted := time.Now()
	l := s.acquire(t, ctx, owner, key, "owner", ttl, 0)
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	err := backend.WaitFree(wctx, waiter, key)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitFree with a %v context on a key held for %v: err = %v; want context.DeadlineExceeded", wait, ttl, err)
	}
	s.checkHolder(t, ctx, waiter, "after WaitFree gave up", l, ttl, granted)
	release(t, ctx, owner, key, "owner", 0)
}

// testRenewalEvents renews a watched lease with ever shorter TTLs, then
// releases it. Stores need not report renewals; those that do must report
// each with a TTL no longer than the renewal gave, and in order, since
// the reader is meant to get the newest event: a waiter handed an older,
// longer renewal after a newer one would sleep past the lease's end.
// Whatever was reported before, the release must be reported as such.
func (s *suite) testRenewalEvents(t *testing.T) {
	renewals := []time.Duration{20 * time.Second, 10 * time.Second, 5 * time.Second, 2 * time.Second}
	ctx := testCtx(t)
	owner, watcher := s.store(t), s.store(t)
	key := s.key("renewal-events")

	w := watch(t, ctx, watcher, key)
	s.acquire(t, ctx, owner, key, "owner", longTTL, 0)
	var (
		events  []backend.Event
		readErr error
		wg      sync.WaitGroup
	)
	wg.Go(func() {
		timer := time.NewTimer(waitTimeout)
		defer timer.Stop()
		for {
			select {
			case ev := <-w.C():
				events = append(events, ev)
				if ev.Kind != backend.EventRenewed {
					return
				}
			case <-timer.C:
				readErr = fmt.Errorf("no event saying the key was released within %v of the renewals", waitTimeout)
				return
			}
		}
	})
	for _, d := range renewals {
		sent := time.Now()
		r, err := owner.Renew(ctx, key, "owner", d)
		if err != nil {
			t.Errorf("Renew with ttl %v: %v", d, err)
			break
		}
		s.checkGrant(t, fmt.Sprintf("Renew with ttl %v", d), r, key, "owner", d, sent)
		time.Sleep(20 * time.Millisecond) // pacing: lets the reader see renewals one by one
	}
	if err := owner.Release(ctx, key, "owner", 0); err != nil {
		t.Errorf("Release: %v", err)
	}
	wg.Wait() // the reader stops at the release's event or after waitTimeout
	if t.Failed() {
		return
	}
	if readErr != nil {
		t.Fatalf("after renewals with TTLs %v and a release: %v; events read: %+v", renewals, readErr, events)
	}

	prev := renewals[0]
	for i, ev := range events {
		if err := checkEvent(ev, renewals[0]); err != nil {
			t.Errorf("event %d of %+v: %v", i+1, events, err)
		}
		if ev.Kind != backend.EventRenewed {
			break
		}
		if ev.TTL > prev {
			t.Errorf("renewal events out of order: TTL %v reported after %v, but the renewals had TTLs %v (events read: %+v)",
				ev.TTL, prev, renewals, events)
		}
		prev = ev.TTL
	}
	t.Logf("the store reported %d renewal events for %d renewals", len(events)-1, len(renewals))
}

// testWaitFreeThroughRenewals runs backend.WaitFree while the holder
// renews its lease over and over, then releases it right after a renewal.
// WaitFree sleeps through renewals it is told about, so it returns in
// time only if the release is reported after, and not hidden by, the
// renewal before it.
func (s *suite) testWaitFreeThroughRenewals(t *testing.T) {
	const rounds = 5
	ctx := testCtx(t)
	owner, waiter := s.store(t), s.store(t)
	for i := range rounds {
		key := s.key("wait-free-renewals", fmt.Sprint(i))
		s.acquire(t, ctx, owner, key, "owner", longTTL, 0)
		var (
			err  error
			done time.Time
			wg   sync.WaitGroup
		)
		wg.Go(func() {
			wctx, cancel := context.WithTimeout(ctx, waitTimeout)
			defer cancel()
			err = backend.WaitFree(wctx, waiter, key)
			done = time.Now()
		})
		time.Sleep(50 * time.Millisecond) // pacing: WaitFree usually subscribes first
		for range 5 {
			if _, rerr := owner.Renew(ctx, key, "owner", longTTL); rerr != nil {
				t.Errorf("round %d: Renew: %v", i, rerr)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if _, rerr := owner.Renew(ctx, key, "owner", longTTL); rerr != nil {
			t.Errorf("round %d: Renew: %v", i, rerr)
		}
		released := time.Now()
		rerr := owner.Release(ctx, key, "owner", 0)
		wg.Wait()
		if rerr != nil {
			t.Fatalf("round %d: Release: %v", i, rerr)
		}
		if err != nil {
			t.Fatalf("round %d: WaitFree on a key renewed for %v and then released: %v (%v after the release)",
				i, longTTL, err, done.Sub(released))
		}
	}
}
