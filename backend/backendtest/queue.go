package backendtest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// queueStore is a client of a store that keeps waiting lines.
type queueStore interface {
	backend.Store
	backend.Queue
}

// queue returns a new client of the store under test as a queueStore, and
// skips t if the store does not implement backend.Queue, which is
// optional.
func (s *suite) queue(t *testing.T) queueStore {
	t.Helper()
	q, ok := s.store(t).(queueStore)
	if !ok {
		t.Skip("the store does not implement backend.Queue (optional)")
	}
	return q
}

// waitPatience is the patience of a waiter that must keep its place for
// the whole subtest.
const waitPatience = 30 * time.Second

// acquireQueued calls AcquireQueued and fails t unless the store grants
// owner a well-formed lease.
func (s *suite) acquireQueued(t testing.TB, ctx context.Context, q backend.Queue, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) backend.Lease {
	t.Helper()
	sent := time.Now()
	l, err := q.AcquireQueued(ctx, key, owner, ttl, floor, patience)
	if err != nil {
		t.Fatalf("%s's AcquireQueued(%q, %v, floor %d, patience %v): %v", owner, key, ttl, floor, patience, err)
	}
	s.checkGrant(t, owner+"'s AcquireQueued", l, key, owner, ttl, sent)
	return l
}

// pollAcquireQueued calls AcquireQueued until the store grants the key,
// and returns the lease with the moment its grant arrived. Every refusal
// must be a *backend.HeldError. It fails t if the key is still refused
// after waitTimeout.
func (s *suite) pollAcquireQueued(t testing.TB, ctx context.Context, q backend.Queue, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, time.Time) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		sent := time.Now()
		l, err := q.AcquireQueued(ctx, key, owner, ttl, floor, patience)
		recv := time.Now()
		if err == nil {
			s.checkGrant(t, owner+"'s AcquireQueued", l, key, owner, ttl, sent)
			return l, recv
		}
		he := heldError(t, owner+"'s AcquireQueued while waiting for the key", err)
		if recv.After(deadline) {
			t.Fatalf("%s is still refused %q after %v: held by %q (token %d), kept for %q", owner, key, waitTimeout, he.Holder.Owner, he.Holder.Token, he.Next)
		}
		time.Sleep(pollEvery)
	}
}

// checkQueuedBehind fails t unless err is a *backend.HeldError naming
// holder's lease (see checkHeldBy) and next as the waiter first in line.
func checkQueuedBehind(t testing.TB, what string, err error, holder backend.Lease, max time.Duration, next string) {
	t.Helper()
	checkHeldBy(t, what, err, holder, max)
	if he := heldError(t, what, err); he.Next != next {
		t.Errorf("%s: HeldError names %q as first in line; want %q", what, he.Next, next)
	}
}

// checkKeptFor fails t unless err is a *backend.HeldError saying that the
// key is free but kept for next, the waiter first in line.
func checkKeptFor(t testing.TB, what string, err error, next string) {
	t.Helper()
	he := heldError(t, what, err)
	if he.Holder.Owner != "" {
		t.Errorf("%s: HeldError names holder %q (token %d); the key was released and should only be kept for %q",
			what, he.Holder.Owner, he.Holder.Token, next)
	}
	if he.Next != next {
		t.Errorf("%s: HeldError says the key is kept for %q; want %q, first in line", what, he.Next, next)
	}
}

// awaitRelease reads w until it delivers EventReleased, and fails t unless
// that event names next as the waiter first in line ("" for nobody) or if
// none comes within waitTimeout. Other events on the way are skipped, as
// stores may send renewals and spurious maybe-free events, but none may be
// malformed (see checkEvent).
func awaitRelease(t testing.TB, w backend.Watch, maxTTL time.Duration, next, what string) {
	t.Helper()
	timer := time.NewTimer(waitTimeout)
	defer timer.Stop()
	for {
		select {
		case ev := <-w.C():
			if err := checkEvent(ev, maxTTL); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if ev.Kind != backend.EventReleased {
				continue
			}
			if ev.Next != next {
				t.Errorf("%s: EventReleased names %q as first in line; want %q", what, ev.Next, next)
			}
			return
		case <-timer.C:
			t.Fatalf("%s: no EventReleased within %v", what, waitTimeout)
		}
	}
}

// testQueueFreeKeyGrants checks that AcquireQueued grants a free key
// nobody waits for as Acquire would, whatever the patience, and that the
// grant leaves nobody in line: the holder's own try is refused without
// naming anyone as next, and after the release another owner is granted
// at once.
func (s *suite) testQueueFreeKeyGrants(t *testing.T) {
	ctx := testCtx(t)
	a, b := s.queue(t), s.queue(t)
	key := s.key("queue-free-key")

	sent := time.Now()
	la := s.acquireQueued(t, ctx, a, key, "a", longTTL, 0, waitPatience)
	s.checkHolder(t, ctx, b, "after a's AcquireQueued of a free key", la, longTTL, sent)
	_, err := b.Acquire(ctx, key, "b", longTTL, 0)
	checkHeldBy(t, "b's Acquire of the key a was granted by AcquireQueued", err, la, longTTL)
	_, err = a.AcquireQueued(ctx, key, "a", longTTL, 0, 0)
	checkQueuedBehind(t, "the holder's own AcquireQueued with patience 0", err, la, longTTL, "")

	release(t, ctx, a, key, "a", 0)
	lb := s.acquireQueued(t, ctx, b, key, "b", longTTL, 0, waitPatience)
	if lb.Token <= la.Token {
		t.Errorf("b's token %d is not above a's %d", lb.Token, la.Token)
	}
	release(t, ctx, b, key, "b", 0)
}

// testQueueOrder lines up two waiters behind a holder and checks that the
// key goes to them in the order they joined: a waiter that calls again
// keeps its place, the release names the first waiter, the key is kept
// for it (other waiters are refused, Get shows it free), and its grant
// takes it out of the line, so that the next release names the second.
func (s *suite) testQueueOrder(t *testing.T) {
	ctx := testCtx(t)
	h, a, b, watcher := s.queue(t), s.queue(t), s.queue(t), s.queue(t)
	key := s.key("queue-order")

	w := watch(t, ctx, watcher, key)
	held := s.acquire(t, ctx, h, key, "h", longTTL, 0)
	_, err := a.AcquireQueued(ctx, key, "a", longTTL, 0, waitPatience)
	checkHeldBy(t, "a's AcquireQueued of the held key", err, held, longTTL)
	_, err = b.AcquireQueued(ctx, key, "b", longTTL, 0, waitPatience)
	checkQueuedBehind(t, "b's AcquireQueued after a's", err, held, longTTL, "a")
	_, err = a.AcquireQueued(ctx, key, "a", longTTL, 0, waitPatience)
	checkQueuedBehind(t, "a's second AcquireQueued, after b joined", err, held, longTTL, "a")

	release(t, ctx, h, key, "h", 0)
	awaitRelease(t, w, longTTL, "a", "h's release with a and then b in line")
	checkFree(t, ctx, b, key, "Get of the key kept for a")
	_, err = b.AcquireQueued(ctx, key, "b", longTTL, 0, waitPatience)
	checkKeptFor(t, "b's AcquireQueued of the key kept for a", err, "a")
	la := s.acquireQueued(t, ctx, a, key, "a", longTTL, 0, waitPatience)
	if la.Token <= held.Token {
		t.Errorf("a's token %d is not above h's %d", la.Token, held.Token)
	}
	_, err = b.AcquireQueued(ctx, key, "b", longTTL, 0, waitPatience)
	checkQueuedBehind(t, "b's AcquireQueued once a was granted the key", err, la, longTTL, "b")

	release(t, ctx, a, key, "a", 0)
	awaitRelease(t, w, longTTL, "b", "a's release with b in line")
	lb := s.acquireQueued(t, ctx, b, key, "b", longTTL, 0, waitPatience)
	if lb.Token <= la.Token {
		t.Errorf("b's token %d is not above a's %d", lb.Token, la.Token)
	}
	release(t, ctx, b, key, "b", 0)
	awaitRelease(t, w, longTTL, "", "b's release with nobody left in line")
}

// testQueuePatience lets a waiter join with a short patience, extend it
// with a longer one and then stop calling, as a crashed process would.
// While its place surely lasts, the released key is kept for it; once
// the place lapses, and not before the longer patience from its last
// call, another owner is granted the key.
func (s *suite) testQueuePatience(t *testing.T) {
	const (
		short    = 300 * time.Millisecond // a's patience when it joins
		patience = 800 * time.Millisecond // a's patience when it calls again
	)
	ctx := testCtx(t)
	h, a, b, watcher := s.queue(t), s.queue(t), s.queue(t), s.queue(t)
	s.retrySlow(t, "queue-patience", func(key string) bool {
		w := watch(t, ctx, watcher, key)
		held := s.acquire(t, ctx, h, key, "h", longTTL, 0)
		_, err := a.AcquireQueued(ctx, key, "a", longTTL, 0, short)
		checkHeldBy(t, "a's AcquireQueued of the held key", err, held, longTTL)
		refreshed := time.Now()
		_, err = a.AcquireQueued(ctx, key, "a", longTTL, 0, patience)
		checkQueuedBehind(t, "a's second AcquireQueued", err, held, longTTL, "a")

		release(t, ctx, h, key, "h", 0)
		_, err = b.AcquireQueued(ctx, key, "b", longTTL, 0, 0)
		if !s.surelyLive(refreshed, patience, time.Now()) {
			if err == nil {
				release(t, ctx, b, key, "b", 0)
			}
			return false
		}
		checkKeptFor(t, fmt.Sprintf("b's AcquireQueued while a's place of %v surely lasts", patience), err, "a")
		awaitRelease(t, w, longTTL, "a", "h's release while a's place surely lasts")

		lb, granted := s.pollAcquireQueued(t, ctx, b, key, "b", longTTL, 0, 0)
		if s.surelyLive(refreshed, patience, granted) {
			t.Errorf("b was granted the key %v after a's last call with patience %v; a's place cannot lapse before %v",
				granted.Sub(refreshed), patience, patience-s.slack)
		}
		if lb.Token <= held.Token {
			t.Errorf("b's token %d is not above h's %d", lb.Token, held.Token)
		}
		release(t, ctx, b, key, "b", 0)
		return true
	})
}

// testQueueDequeue checks that Dequeue takes a waiter out of the line,
// from the middle or from the front, that taking out the first waiter of
// a free key wakes watchers with the new first waiter, and that Dequeue
// of an owner not in line is not an error.
func (s *suite) testQueueDequeue(t *testing.T) {
	ctx := testCtx(t)
	h, a, b, c, watcher := s.queue(t), s.queue(t), s.queue(t), s.queue(t), s.queue(t)
	key := s.key("queue-dequeue")

	if err := a.Dequeue(ctx, key, "a"); err != nil {
		t.Errorf("Dequeue on a key nobody ever waited for: %v", err)
	}
	w := watch(t, ctx, watcher, key)
	held := s.acquire(t, ctx, h, key, "h", longTTL, 0)
	_, err := a.AcquireQueued(ctx, key, "a", longTTL, 0, waitPatience)
	checkHeldBy(t, "a's AcquireQueued of the held key", err, held, longTTL)
	_, err = b.AcquireQueued(ctx, key, "b", longTTL, 0, waitPatience)
	checkQueuedBehind(t, "b's AcquireQueued after a's", err, held, longTTL, "a")
	_, err = c.AcquireQueued(ctx, key, "c", longTTL, 0, waitPatience)
	checkQueuedBehind(t, "c's AcquireQueued after b's", err, held, longTTL, "a")
	if err := h.Dequeue(ctx, key, "nobody"); err != nil {
		t.Errorf("Dequeue of an owner not in line: %v", err)
	}
	if err := b.Dequeue(ctx, key, "b"); err != nil {
		t.Fatalf("Dequeue of b, second in line: %v", err)
	}

	release(t, ctx, h, key, "h", 0)
	awaitRelease(t, w, longTTL, "a", "h's release with a, then c in line")
	if err := a.Dequeue(ctx, key, "a"); err != nil {
		t.Fatalf("Dequeue of a, first in line for the free key: %v", err)
	}
	awaitRelease(t, w, longTTL, "c", "a's Dequeue while first in line for the free key")
	if err := a.Dequeue(ctx, key, "a"); err != nil {
		t.Errorf("a's second Dequeue: %v", err)
	}
	checkFree(t, ctx, c, key, "Get of the key kept for c")
	_, err = b.AcquireQueued(ctx, key, "b", longTTL, 0, 0)
	checkKeptFor(t, "b's AcquireQueued with patience 0 after its Dequeue", err, "c")
	s.acquireQueued(t, ctx, c, key, "c", longTTL, 0, waitPatience)
	release(t, ctx, c, key, "c", 0)
	awaitRelease(t, w, longTTL, "", "c's release after the others left the line")
}

// testQueueZeroPatience checks that a try with patience 0 is refused
// like any other but neither joins the line nor keeps a place, whether
// the line is empty or not.
func (s *suite) testQueueZeroPatience(t *testing.T) {
	ctx := testCtx(t)
	h, a, b, c, watcher := s.queue(t), s.queue(t), s.queue(t), s.queue(t), s.queue(t)
	key := s.key("queue-zero-patience")

	w := watch(t, ctx, watcher, key)
	held := s.acquire(t, ctx, h, key, "h", longTTL, 0)
	for i := range 2 {
		_, err := a.AcquireQueued(ctx, key, "a", longTTL, 0, 0)
		checkQueuedBehind(t, fmt.Sprintf("a's try %d with patience 0 and nobody in line", i+1), err, held, longTTL, "")
	}
	_, err := b.AcquireQueued(ctx, key, "b", longTTL, 0, waitPatience)
	checkQueuedBehind(t, "b's AcquireQueued after a's tries", err, held, longTTL, "b")
	_, err = a.AcquireQueued(ctx, key, "a", longTTL, 0, 0)
	checkQueuedBehind(t, "a's try with patience 0 and b in line", err, held, longTTL, "b")

	release(t, ctx, h, key, "h", 0)
	awaitRelease(t, w, longTTL, "b", "h's release with only b in line")
	_, err = a.AcquireQueued(ctx, key, "a", longTTL, 0, 0)
	checkKeptFor(t, "a's try with patience 0 of the key kept for b", err, "b")
	s.acquireQueued(t, ctx, b, key, "b", longTTL, 0, waitPatience)
	release(t, ctx, b, key, "b", 0)
	awaitRelease(t, w, longTTL, "", "b's release after tries with patience 0 only")
	s.acquireQueued(t, ctx, c, key, "c", longTTL, 0, 0)
	release(t, ctx, c, key, "c", 0)
}

// testQueueFencing checks that AcquireQueued hands out fencing tokens
// from the same counter as Acquire, under the same rules: a fresh key
// starts at 1, every grant is above the one before whichever method made
// it, refusals (even with a floor) leave the counter alone, and the floor
// gives max(counter, floor)+1.
func (s *suite) testQueueFencing(t *testing.T) {
	const big = 1<<60 + 1
	ctx := testCtx(t)
	a, b := s.queue(t), s.queue(t)
	key := s.key("queue-fencing")

	want := func(what string, l backend.Lease, token uint64) {
		t.Helper()
		if l.Token != token {
			t.Errorf("%s: token %d; want %d", what, l.Token, token)
		}
	}
	l := s.acquireQueued(t, ctx, a, key, "a", longTTL, 0, waitPatience)
	want("AcquireQueued of a fresh key", l, 1)
	release(t, ctx, a, key, "a", 0)
	l = s.acquire(t, ctx, b, key, "b", longTTL, 0)
	want("Acquire after a grant by AcquireQueued", l, 2)

	_, err := a.AcquireQueued(ctx, key, "a", longTTL, 1000, waitPatience)
	checkHeldBy(t, "a's AcquireQueued with floor 1000 of the held key", err, l, longTTL)
	release(t, ctx, b, key, "b", 0)
	_, err = b.AcquireQueued(ctx, key, "b", longTTL, 2000, 0)
	checkKeptFor(t, "b's AcquireQueued with floor 2000 of the key kept for a", err, "a")
	l = s.acquireQueued(t, ctx, a, key, "a", longTTL, 0, waitPatience)
	want("the waiter's grant after refusals with floors", l, 3)
	release(t, ctx, a, key, "a", 0)

	for _, c := range []struct {
		floor, want uint64
		why         string
	}{
		{1000, 1001, "a floor above the counter"},
		{5, 1002, "a floor below the counter"},
		{1002, 1003, "a floor equal to the counter"},
		{big, big + 1, "a floor above 2^53"},
		{0, big + 2, "no floor after a big one"},
	} {
		l := s.acquireQueued(t, ctx, b, key, "b", longTTL, c.floor, 0)
		want(fmt.Sprintf("%s: AcquireQueued(floor %d)", c.why, c.floor), l, c.want)
		release(t, ctx, b, key, "b", 0)
	}
	l = s.acquire(t, ctx, a, key, "a", longTTL, 0)
	want("Acquire after the floors given to AcquireQueued", l, big+3)
	release(t, ctx, a, key, "a", 0)
}

// testQueueInvalidArguments checks that AcquireQueued and Dequeue refuse
// bad keys, owners, ttls, floors and negative patience with
// ErrInvalidArgument and write nothing: a free key stays free, a held
// lease stays as it was and nobody joins its line. It also checks that
// patience 0 and a long patience are accepted.
func (s *suite) testQueueInvalidArguments(t *testing.T) {
	const ttl = 10 * time.Second
	ctx := testCtx(t)
	q, watcher := s.queue(t), s.queue(t)
	free := s.key("queue-invalid-args", "free")
	heldKey := s.key("queue-invalid-args", "held")

	badPatience := []time.Duration{-time.Nanosecond, -time.Second, math.MinInt64}
	for _, p := range badPatience {
		if backend.ValidatePatience(p) == nil {
			t.Fatalf("suite bug: backend.ValidatePatience accepts patience %v", p)
		}
	}

	for name, k := range invalidKeys(free) {
		_, err := q.AcquireQueued(ctx, k, "owner", ttl, 0, time.Second)
		isInvalid(t, "AcquireQueued with a "+name+" key", err)
		isInvalid(t, "Dequeue with a "+name+" key", q.Dequeue(ctx, k, "owner"))
	}
	for name, o := range invalidOwners() {
		_, err := q.AcquireQueued(ctx, free, o, ttl, 0, time.Second)
		isInvalid(t, "AcquireQueued with a "+name+" owner", err)
		isInvalid(t, "Dequeue with a "+name+" owner", q.Dequeue(ctx, free, o))
	}
	for _, d := range invalidTTLs() {
		_, err := q.AcquireQueued(ctx, free, "owner", d, 0, time.Second)
		isInvalid(t, fmt.Sprintf("AcquireQueued with ttl %v", d), err)
	}
	for _, floor := range invalidFloors() {
		_, err := q.AcquireQueued(ctx, free, "owner", ttl, floor, time.Second)
		isInvalid(t, fmt.Sprintf("AcquireQueued with floor %d", floor), err)
	}
	for _, p := range badPatience {
		_, err := q.AcquireQueued(ctx, free, "owner", ttl, 0, p)
		isInvalid(t, fmt.Sprintf("AcquireQueued with patience %v", p), err)
	}
	checkFree(t, ctx, q, free, "after the refused calls")

	// Refused calls on a held key leave its lease alone and put nobody in
	// line: the release names nobody, and the key goes at once to whoever
	// asks.
	w := watch(t, ctx, watcher, heldKey)
	sent := time.Now()
	l := s.acquire(t, ctx, q, heldKey, "holder", ttl, 0)
	for _, p := range badPatience {
		what := fmt.Sprintf("a waiter's AcquireQueued with patience %v", p)
		_, err := q.AcquireQueued(ctx, heldKey, "waiter", ttl, 0, p)
		isInvalid(t, what, err)
	}
	for _, d := range invalidTTLs() {
		_, err := q.AcquireQueued(ctx, heldKey, "waiter", d, 0, time.Minute)
		isInvalid(t, fmt.Sprintf("a waiter's AcquireQueued with ttl %v", d), err)
	}
	for _, floor := range invalidFloors() {
		_, err := q.AcquireQueued(ctx, heldKey, "waiter", ttl, floor, time.Minute)
		isInvalid(t, fmt.Sprintf("a waiter's AcquireQueued with floor %d", floor), err)
	}
	for name, o := range invalidOwners() {
		_, err := q.AcquireQueued(ctx, heldKey, o, ttl, 0, time.Minute)
		isInvalid(t, "AcquireQueued by a "+name+" owner", err)
	}
	s.checkHolder(t, ctx, q, "after the refused calls on the held key", l, ttl, sent)

	// The limits themselves are valid.
	_, err := q.AcquireQueued(ctx, heldKey, "patient", ttl, 0, backend.MaxTTL)
	checkQueuedBehind(t, fmt.Sprintf("AcquireQueued with a patience of MaxTTL (%v)", backend.MaxTTL), err, l, ttl, "patient")
	if err := q.Dequeue(ctx, heldKey, "patient"); err != nil {
		t.Errorf("Dequeue of the waiter with a patience of MaxTTL: %v", err)
	}
	release(t, ctx, q, heldKey, "holder", 0)
	awaitRelease(t, w, ttl, "", "the release after only refused or dequeued waiters")
	s.acquireQueued(t, ctx, q, heldKey, "other", ttl, 0, 0)
	release(t, ctx, q, heldKey, "other", 0)
}

// testQueueEndedContext calls AcquireQueued and Dequeue with a cancelled
// context and with one whose deadline has passed, and checks that each
// call fails with the context's error and changes nothing: a free key
// stays free, the caller does not join the line of a held key, and a
// waiter is not taken out of it.
func (s *suite) testQueueEndedContext(t *testing.T) {
	ctx := testCtx(t)
	q, waiter, watcher := s.queue(t), s.queue(t), s.queue(t)
	free := s.key("queue-ended-context", "free")
	heldKey := s.key("queue-ended-context", "held")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel2()
	ended := []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"cancelled", cancelled, context.Canceled},
		{"expired", expired, context.DeadlineExceeded},
	}
	check := func(op, name string, err, want error) {
		t.Helper()
		if !errors.Is(err, want) {
			t.Errorf("%s with a %s context: err = %v; want an error wrapping %v", op, name, err, want)
		}
	}

	w := watch(t, ctx, watcher, heldKey)
	held := s.acquire(t, ctx, q, heldKey, "holder", longTTL, 0)
	for _, c := range ended {
		_, err := q.AcquireQueued(c.ctx, free, "early", longTTL, 0, waitPatience)
		check("AcquireQueued of a free key", c.name, err, c.want)
		checkFree(t, ctx, q, free, fmt.Sprintf("after AcquireQueued with a %s context", c.name))
		_, err = q.AcquireQueued(c.ctx, heldKey, "early", longTTL, 0, waitPatience)
		check("AcquireQueued of a held key", c.name, err, c.want)
	}
	_, err := waiter.AcquireQueued(ctx, heldKey, "waiter", longTTL, 0, waitPatience)
	checkQueuedBehind(t, "the waiter's AcquireQueued after the calls with ended contexts", err, held, longTTL, "waiter")
	for _, c := range ended {
		check("Dequeue", c.name, waiter.Dequeue(c.ctx, heldKey, "waiter"), c.want)
	}
	release(t, ctx, q, heldKey, "holder", 0)
	awaitRelease(t, w, longTTL, "waiter", "the release after Dequeue with ended contexts")
	s.acquireQueued(t, ctx, waiter, heldKey, "waiter", longTTL, 0, waitPatience)
	release(t, ctx, waiter, heldKey, "waiter", 0)
}
