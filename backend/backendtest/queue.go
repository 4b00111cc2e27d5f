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

// holdWithWaiter lets h take key, watched by watcher, and a join its line
// with patience, refused as behind h. It returns the watch and h's lease.
func (s *suite) holdWithWaiter(t *testing.T, ctx context.Context, h, a, watcher queueStore, key string, patience time.Duration) (backend.Watch, backend.Lease) {
	t.Helper()
	w := watch(t, ctx, watcher, key)
	held := s.acquire(t, ctx, h, key, "h", longTTL, 0)
	_, err := a.AcquireQueued(ctx, key, "a", longTTL, 0, patience)
	checkHeldBy(t, "a's AcquireQueued of the held key", err, held, longTTL)
	return w, held
}

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
// holder's lease (see checkHeldBy) and next as the waiter first in line,
// as the refusal of a try (AcquireQueued with patience 0) must.
func checkQueuedBehind(t testing.TB, what string, err error, holder backend.Lease, max time.Duration, next string) {
	t.Helper()
	checkHeldBy(t, what, err, holder, max)
	if he := heldError(t, what, err); he.Next != next {
		t.Errorf("%s: HeldError names %q as first in line; want %q", what, he.Next, next)
	}
}

// checkJoinedBehind is checkQueuedBehind for the refusal of an
// AcquireQueued that joined the line of a key another owner holds
// (patience > 0): a store need not read the line then, and may name
// nobody first in it (backend.Queue). A name it gives must be next; if it
// gives none, a try of q (patience 0, which joins nothing) must name next.
func checkJoinedBehind(t testing.TB, ctx context.Context, q backend.Queue, what string, err error, holder backend.Lease, max time.Duration, next string) {
	t.Helper()
	if he := heldError(t, what, err); he.Next == "" {
		checkHeldBy(t, what, err, holder, max)
		what += ", which named nobody first in line: a try with patience 0 after it"
		_, err = q.AcquireQueued(ctx, holder.Key, "line-probe", max, 0, 0)
	}
	checkQueuedBehind(t, what, err, holder, max, next)
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

// handsOver reports whether q hands a released key to the waiter first in
// line (backend.Handover, not refused with errors.ErrUnsupported, as a
// store may refuse it in some configurations).
func (s *suite) handsOver(t testing.TB, ctx context.Context, q backend.Store) bool {
	t.Helper()
	h, ok := q.(backend.Handover)
	if !ok {
		return false
	}
	_, got, err := h.AwaitHandover(ctx, s.key("handover-probe"), "probe", time.Millisecond)
	if errors.Is(err, errors.ErrUnsupported) {
		return false
	}
	if err != nil || got {
		t.Fatalf("AwaitHandover of a key nobody released, for 1ms: ok %v, err %v; want ok false or errors.ErrUnsupported", got, err)
	}
	return true
}

// passedTo checks where the key went when its holder released it (or a
// handed-over waiter dequeued) with next first in line, and returns next's
// lease. after is the token of the lease that ended; other is a client
// that is not in line.
//
// A store that hands over must have granted the key to next in the same
// step: watchers see EventRenewed (never EventReleased), Get shows next
// holding it with a token above after, next's AwaitHandover returns that
// lease with the ttl next asked for, next's AcquireQueued returns it too,
// and other's try is refused. A plain Queue store must have freed the key
// and kept it for next: EventReleased names next, Get shows it free,
// other's try is refused as kept for next, and next's AcquireQueued is
// granted.
func (s *suite) passedTo(t testing.TB, ctx context.Context, w backend.Watch, nq, other queueStore, key, next string, ttl time.Duration, after uint64, what string) backend.Lease {
	t.Helper()
	if !s.handsOver(t, ctx, nq) {
		awaitRelease(t, w, ttl, next, what)
		checkFree(t, ctx, other, key, what+": Get of the key kept for "+next)
		_, err := other.AcquireQueued(ctx, key, "other", ttl, 0, 0)
		checkKeptFor(t, what+": another owner's try", err, next)
		l := s.acquireQueued(t, ctx, nq, key, next, ttl, 0, waitPatience)
		if l.Token <= after {
			t.Errorf("%s: %s's token %d is not above %d, the last holder's", what, next, l.Token, after)
		}
		return l
	}
	awaitRenewal(t, w, ttl, what)
	l, ok, err := nq.(backend.Handover).AwaitHandover(ctx, key, next, waitTimeout)
	if err != nil || !ok {
		t.Fatalf("%s: %s's AwaitHandover: ok %v, err %v; the key should have been handed to it", what, next, ok, err)
	}
	if l.Key != key || l.Owner != next || l.Token <= after || l.TTL <= 0 || l.TTL > ttl {
		t.Errorf("%s: %s's AwaitHandover returned %+v; want key %q, owner %q, a token above %d and what is left of the ttl %v it asked for",
			what, next, l, key, next, after, ttl)
	}
	g := get(t, ctx, other, key)
	if g.Owner != next || g.Token != l.Token {
		t.Errorf("%s: Get shows %q (token %d); want %q with the handed token %d", what, g.Owner, g.Token, next, l.Token)
	}
	_, err = other.AcquireQueued(ctx, key, "other", ttl, 0, 0)
	checkHeldBy(t, what+": another owner's try", err, g, ttl)
	again, err := nq.AcquireQueued(ctx, key, next, ttl, 0, waitPatience)
	if err != nil || again.Owner != next || again.Token != l.Token {
		t.Errorf("%s: %s's AcquireQueued of the key handed to it: %+v, %v; want its lease (token %d)", what, next, again, err, l.Token)
	}
	return l
}

// awaitRenewal reads w until it delivers EventRenewed, which a handover
// sends, and fails t on an EventReleased (the key was freed, not handed
// over) or if none comes within waitTimeout.
func awaitRenewal(t testing.TB, w backend.Watch, maxTTL time.Duration, what string) {
	t.Helper()
	err := awaitEvent(w, maxTTL, "EventRenewed", func(ev backend.Event) (bool, error) {
		if ev.Kind == backend.EventReleased {
			return true, errors.New("watchers got EventReleased; a store that hands over keeps the key held (EventRenewed)")
		}
		return ev.Kind == backend.EventRenewed, nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// awaitRelease reads w until it delivers EventReleased, and fails t unless
// that event names next as the waiter first in line ("" for nobody) or if
// none comes within waitTimeout. Other events on the way are skipped, as
// stores may send renewals and spurious maybe-free events, but none may be
// malformed (see checkEvent).
func awaitRelease(t testing.TB, w backend.Watch, maxTTL time.Duration, next, what string) {
	t.Helper()
	var got *backend.Event
	err := awaitEvent(w, maxTTL, "EventReleased", func(ev backend.Event) (bool, error) {
		if ev.Kind != backend.EventReleased {
			return false, nil
		}
		got = &ev
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got.Next != next {
		t.Errorf("%s: EventReleased names %q as first in line; want %q", what, got.Next, next)
	}
}

// testQueueFreeKeyGrants checks that AcquireQueued grants a free key
// nobody waits for as Acquire would, whatever the patience, and that the
// grant leaves nobody in line: the holder's own try returns its lease, and
// after the release another owner is granted at once.
func (s *suite) testQueueFreeKeyGrants(t *testing.T) {
	ctx := testCtx(t)
	a, b := s.queue(t), s.queue(t)
	key := s.key("queue-free-key")

	sent := time.Now()
	la := s.acquireQueued(t, ctx, a, key, "a", longTTL, 0, waitPatience)
	s.checkHolder(t, ctx, b, "after a's AcquireQueued of a free key", la, longTTL, sent)
	_, err := b.Acquire(ctx, key, "b", longTTL, 0)
	checkHeldBy(t, "b's Acquire of the key a was granted by AcquireQueued", err, la, longTTL)
	own, err := a.AcquireQueued(ctx, key, "a", longTTL, 0, 0)
	if err != nil || own.Owner != "a" || own.Token != la.Token {
		t.Errorf("the holder's own AcquireQueued with patience 0: %+v, %v; want its lease (token %d)", own, err, la.Token)
	}

	release(t, ctx, a, key, "a", 0)
	lb := s.acquireQueued(t, ctx, b, key, "b", longTTL, 0, waitPatience)
	if lb.Token <= la.Token {
		t.Errorf("b's token %d is not above a's %d", lb.Token, la.Token)
	}
	release(t, ctx, b, key, "b", 0)
}

// testQueueOrder lines up two waiters behind a holder and checks that the
// key goes to them in the order they joined: a waiter that calls again
// keeps its place, the release passes the key to the first waiter (see
// passedTo), and that takes it out of the line, so that the next release
// passes it to the second.
func (s *suite) testQueueOrder(t *testing.T) {
	ctx := testCtx(t)
	h, a, b, watcher := s.queue(t), s.queue(t), s.queue(t), s.queue(t)
	key := s.key("queue-order")

	w, held := s.holdWithWaiter(t, ctx, h, a, watcher, key, waitPatience)
	_, err := b.AcquireQueued(ctx, key, "b", longTTL, 0, waitPatience)
	checkJoinedBehind(t, ctx, b, "b's AcquireQueued after a's", err, held, longTTL, "a")
	_, err = a.AcquireQueued(ctx, key, "a", longTTL, 0, waitPatience)
	checkJoinedBehind(t, ctx, a, "a's second AcquireQueued, after b joined", err, held, longTTL, "a")

	release(t, ctx, h, key, "h", 0)
	la := s.passedTo(t, ctx, w, a, h, key, "a", longTTL, held.Token, "h's release with a and then b in line")
	_, err = b.AcquireQueued(ctx, key, "b", longTTL, 0, waitPatience)
	checkJoinedBehind(t, ctx, b, "b's AcquireQueued once a has the key", err, la, longTTL, "b")

	release(t, ctx, a, key, "a", 0)
	s.passedTo(t, ctx, w, b, h, key, "b", longTTL, la.Token, "a's release with b in line")
	release(t, ctx, b, key, "b", 0)
	awaitRelease(t, w, longTTL, "", "b's release with nobody left in line")
	if s.handsOver(t, ctx, a) {
		if _, ok, err := a.(backend.Handover).AwaitHandover(ctx, key, "a", 50*time.Millisecond); ok || err != nil {
			t.Errorf("a's AwaitHandover after it released the key handed to it: ok %v, err %v; want ok false (the mailbox was emptied)", ok, err)
		}
	}
}

// testQueueLapsedRejoins lets a waiter's place lapse while another waiter
// is ahead of it. When it asks again it joins at the back, behind a waiter
// that came after its place lapsed, as a newcomer would: a place, once
// lost, is not kept for an owner that comes back.
func (s *suite) testQueueLapsedRejoins(t *testing.T) {
	const short = 200 * time.Millisecond
	ctx := testCtx(t)
	h, a, b, c, watcher := s.queue(t), s.queue(t), s.queue(t), s.queue(t), s.queue(t)
	key := s.key("queue-lapsed-rejoins")

	w, held := s.holdWithWaiter(t, ctx, h, a, watcher, key, waitPatience)
	joined := time.Now()
	_, err := b.AcquireQueued(ctx, key, "b", longTTL, 0, short)
	checkJoinedBehind(t, ctx, b, "b's AcquireQueued with a short patience", err, held, longTTL, "a")
	// b stays silent until its place has surely lapsed.
	time.Sleep(time.Until(joined.Add(2 * short)))
	_, err = c.AcquireQueued(ctx, key, "c", longTTL, 0, waitPatience)
	checkJoinedBehind(t, ctx, c, "c's AcquireQueued after b's place lapsed", err, held, longTTL, "a")
	_, err = b.AcquireQueued(ctx, key, "b", longTTL, 0, waitPatience)
	checkJoinedBehind(t, ctx, b, "b's AcquireQueued after its place lapsed", err, held, longTTL, "a")

	release(t, ctx, h, key, "h", 0)
	la := s.passedTo(t, ctx, w, a, h, key, "a", longTTL, held.Token, "h's release with a, c and b in line")
	release(t, ctx, a, key, "a", 0)
	lc := s.passedTo(t, ctx, w, c, h, key, "c", longTTL, la.Token, "a's release: c came before b joined again")
	release(t, ctx, c, key, "c", 0)
	s.passedTo(t, ctx, w, b, h, key, "b", longTTL, lc.Token, "c's release with b in line")
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
	if s.handsOver(t, ctx, h) {
		s.handoverPatience(t, ctx, h, a, b, watcher, short, patience)
		return
	}
	s.retrySlow(t, "queue-patience", func(key string) bool {
		w, held, refreshed := s.joinThenRefresh(t, ctx, h, a, watcher, key, short, patience)

		release(t, ctx, h, key, "h", 0)
		_, err := b.AcquireQueued(ctx, key, "b", longTTL, 0, 0)
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

// joinThenRefresh starts both variants of testQueuePatience: h takes key
// (watched by watcher), a joins its line with patience short, then calls
// again with patience. It returns the watch, h's lease and when a's second
// call was sent.
func (s *suite) joinThenRefresh(t *testing.T, ctx context.Context, h, a, watcher queueStore, key string, short, patience time.Duration) (backend.Watch, backend.Lease, time.Time) {
	t.Helper()
	w, held := s.holdWithWaiter(t, ctx, h, a, watcher, key, short)
	refreshed := time.Now()
	_, err := a.AcquireQueued(ctx, key, "a", longTTL, 0, patience)
	checkJoinedBehind(t, ctx, a, "a's second AcquireQueued", err, held, longTTL, "a")
	return w, held, refreshed
}

// handoverPatience is testQueuePatience for a store that hands over: the
// release would hand the key to a while its place lasts (testQueueOrder),
// so the place is watched in the names of the refusals instead. a stays
// first in line at least until patience from its last call, then drops
// out; the release after that frees the key, and b is granted it.
func (s *suite) handoverPatience(t *testing.T, ctx context.Context, h, a, b, watcher queueStore, short, patience time.Duration) {
	s.retrySlow(t, "queue-patience", func(key string) bool {
		w, held, refreshed := s.joinThenRefresh(t, ctx, h, a, watcher, key, short, patience)

		deadline := time.Now().Add(waitTimeout)
		for {
			_, err := b.AcquireQueued(ctx, key, "b", longTTL, 0, 0)
			now := time.Now()
			he := heldError(t, "b's try while h holds the key", err)
			if he.Next == "" {
				if s.surelyLive(refreshed, patience, now) {
					t.Errorf("a's place lapsed %v after its last call with patience %v; it cannot lapse before %v",
						now.Sub(refreshed), patience, patience-s.slack)
				}
				break
			}
			if he.Next != "a" {
				t.Fatalf("b's try names %q as first in line; only a is in it", he.Next)
			}
			if now.After(deadline) {
				t.Fatalf("a's place of %v has not lapsed %v after its last call", patience, now.Sub(refreshed))
			}
			time.Sleep(pollEvery)
		}
		release(t, ctx, h, key, "h", 0)
		awaitRelease(t, w, longTTL, "", "h's release after a's place lapsed")
		if _, ok, err := a.(backend.Handover).AwaitHandover(ctx, key, "a", 50*time.Millisecond); ok || err != nil {
			t.Errorf("AwaitHandover of a, whose place lapsed: ok %v, err %v; want ok false", ok, err)
		}
		lb := s.acquireQueued(t, ctx, b, key, "b", longTTL, 0, 0)
		if lb.Token <= held.Token {
			t.Errorf("b's token %d is not above h's %d", lb.Token, held.Token)
		}
		release(t, ctx, b, key, "b", 0)
		return true
	})
}

// testQueueDequeue checks that Dequeue takes a waiter out of the line,
// from the middle, that a waiter that dequeues after the key was passed to
// it passes it on to the next waiter, and that Dequeue of an owner not in
// line is not an error.
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
	checkJoinedBehind(t, ctx, b, "b's AcquireQueued after a's", err, held, longTTL, "a")
	_, err = c.AcquireQueued(ctx, key, "c", longTTL, 0, waitPatience)
	checkJoinedBehind(t, ctx, c, "c's AcquireQueued after b's", err, held, longTTL, "a")
	if err := h.Dequeue(ctx, key, "nobody"); err != nil {
		t.Errorf("Dequeue of an owner not in line: %v", err)
	}
	if err := b.Dequeue(ctx, key, "b"); err != nil {
		t.Fatalf("Dequeue of b, second in line: %v", err)
	}

	release(t, ctx, h, key, "h", 0)
	la := s.passedTo(t, ctx, w, a, b, key, "a", longTTL, held.Token, "h's release with a, then c in line")
	if err := a.Dequeue(ctx, key, "a"); err != nil {
		t.Fatalf("Dequeue of a, which the key was passed to: %v", err)
	}
	lc := s.passedTo(t, ctx, w, c, b, key, "c", longTTL, la.Token, "a's Dequeue of the key passed to it, with c in line")
	if err := a.Dequeue(ctx, key, "a"); err != nil {
		t.Errorf("a's second Dequeue: %v", err)
	}
	_, err = b.AcquireQueued(ctx, key, "b", longTTL, 0, 0)
	checkQueuedBehind(t, "b's try after its Dequeue", err, lc, longTTL, "")
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
	checkJoinedBehind(t, ctx, b, "b's AcquireQueued after a's tries", err, held, longTTL, "b")
	_, err = a.AcquireQueued(ctx, key, "a", longTTL, 0, 0)
	checkQueuedBehind(t, "a's try with patience 0 and b in line", err, held, longTTL, "b")

	release(t, ctx, h, key, "h", 0)
	s.passedTo(t, ctx, w, b, a, key, "b", longTTL, held.Token, "h's release with only b in line")
	release(t, ctx, b, key, "b", 0)
	awaitRelease(t, w, longTTL, "", "b's release after tries with patience 0 only")
	s.acquireQueued(t, ctx, c, key, "c", longTTL, 0, 0)
	release(t, ctx, c, key, "c", 0)
}

// testQueueFencing checks that AcquireQueued hands out fencing tokens
// from the same counter as Acquire, under the same rules: every grant is
// above the one before whichever method made it, refusals (even with a
// floor) leave the counter alone, and the floor gives
// max(counter, floor, clock)+1, also for a key handed to a waiter, whose
// floor is the one it asked with. Floors above the clock make the
// expected tokens exact.
func (s *suite) testQueueFencing(t *testing.T) {
	ahead, top := aheadOfClock(), nearTokenLimit()
	ctx := testCtx(t)
	a, b := s.queue(t), s.queue(t)
	key := s.key("queue-fencing")

	want := func(what string, l backend.Lease, token uint64) {
		t.Helper()
		if l.Token != token {
			t.Errorf("%s: token %d; want %d", what, l.Token, token)
		}
	}
	above := func(what string, l backend.Lease, prev uint64) {
		t.Helper()
		if l.Token <= prev {
			t.Errorf("%s: token %d; want one above %d", what, l.Token, prev)
		}
	}
	l := s.acquireQueued(t, ctx, a, key, "a", longTTL, 0, waitPatience)
	above("AcquireQueued of a fresh key", l, 0)
	release(t, ctx, a, key, "a", 0)
	prev := l.Token
	l = s.acquire(t, ctx, b, key, "b", longTTL, 0)
	above("Acquire after a grant by AcquireQueued", l, prev)

	w := watch(t, ctx, b, key)
	_, err := a.AcquireQueued(ctx, key, "a", longTTL, ahead, waitPatience)
	checkHeldBy(t, fmt.Sprintf("a's AcquireQueued with floor %d of the held key", uint64(ahead)), err, l, longTTL)
	release(t, ctx, b, key, "b", 0)
	prev = l.Token
	l = s.passedTo(t, ctx, w, a, b, key, "a", longTTL, l.Token, "b's release with a in line, which asked with a floor above the clock")
	if s.handsOver(t, ctx, a) {
		want("the key handed to a waiter that asked with a floor above the clock", l, ahead+1)
	} else {
		above("the grant of a waiter that asks with no floor", l, prev)
	}
	prev = l.Token
	_, err = b.AcquireQueued(ctx, key, "b", longTTL, ahead+5000, 0)
	checkHeldBy(t, "b's try with a higher floor while a holds the key", err, l, longTTL)
	release(t, ctx, a, key, "a", 0)
	l = s.acquireQueued(t, ctx, b, key, "b", longTTL, 0, 0)
	above("AcquireQueued after a refusal with a higher floor", l, prev)
	if l.Token >= ahead+5000 {
		t.Errorf("AcquireQueued after a refusal with floor %d: token %d; a refused request must not raise the counter", uint64(ahead+5000), l.Token)
	}
	release(t, ctx, b, key, "b", 0)

	for _, c := range []struct {
		floor, want uint64
		why         string
	}{
		{ahead + 10, ahead + 11, "a floor above the counter"},
		{5, ahead + 12, "a floor below the counter"},
		{ahead + 12, ahead + 13, "a floor equal to the counter"},
		{top, top + 1, "a floor near the limit"},
		{0, top + 2, "no floor after it"},
	} {
		l := s.acquireQueued(t, ctx, b, key, "b", longTTL, c.floor, 0)
		want(fmt.Sprintf("%s: AcquireQueued(floor %d)", c.why, c.floor), l, c.want)
		release(t, ctx, b, key, "b", 0)
	}
	l = s.acquire(t, ctx, a, key, "a", longTTL, 0)
	want("Acquire after the floors given to AcquireQueued", l, top+3)
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
	for _, d := range s.invalidTTLs() {
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
	for _, d := range s.invalidTTLs() {
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
	checkJoinedBehind(t, ctx, q, fmt.Sprintf("AcquireQueued with a patience of MaxTTL (%v)", backend.MaxTTL), err, l, ttl, "patient")
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
	checkJoinedBehind(t, ctx, waiter, "the waiter's AcquireQueued after the calls with ended contexts", err, held, longTTL, "waiter")
	for _, c := range ended {
		check("Dequeue", c.name, waiter.Dequeue(c.ctx, heldKey, "waiter"), c.want)
	}
	if s.handsOver(t, ctx, waiter) {
		for _, c := range ended {
			_, ok, err := waiter.(backend.Handover).AwaitHandover(c.ctx, heldKey, "waiter", time.Second)
			check("AwaitHandover", c.name, err, c.want)
			if ok {
				t.Errorf("AwaitHandover with a %s context reported a handover", c.name)
			}
		}
	}
	release(t, ctx, q, heldKey, "holder", 0)
	s.passedTo(t, ctx, w, waiter, q, heldKey, "waiter", longTTL, held.Token, "the release after calls with ended contexts")
	release(t, ctx, waiter, heldKey, "waiter", 0)
}

// testHandover checks AwaitHandover itself on a store that hands over: it
// waits for a handover and returns it with the ttl and floor the waiter
// asked for (not the holder's), reports ok false once max has passed with
// none, returns soon after its context ends, and refuses bad arguments.
func (s *suite) testHandover(t *testing.T) {
	ctx := testCtx(t)
	h, a, watcher := s.queue(t), s.queue(t), s.queue(t)
	if !s.handsOver(t, ctx, h) {
		t.Skip("the store does not hand over (backend.Handover is optional)")
	}
	ha := a.(backend.Handover)
	key := s.key("handover")

	s.handoverTimesOut(t, ctx, h, ha, key)
	s.handoverOnRelease(t, ctx, h, a, watcher, key)

	// Held by another owner, so that only the context ends the wait.
	s.acquire(t, ctx, h, key, "other", longTTL, 0)
	defer release(t, ctx, h, key, "other", 0)
	handoverCancelled(t, ctx, ha, key)
	handoverArguments(t, ctx, ha, key)
}

// handoverResult is what an AwaitHandover returned.
type handoverResult struct {
	l   backend.Lease
	ok  bool
	err error
}

// awaitHandover calls AwaitHandover in a goroutine of its own and sends
// what it returned on the channel it returns.
func awaitHandover(ctx context.Context, ha backend.Handover, key, owner string, max time.Duration) <-chan handoverResult {
	done := make(chan handoverResult, 1)
	go func() {
		l, ok, err := ha.AwaitHandover(ctx, key, owner, max)
		done <- handoverResult{l, ok, err}
	}()
	return done
}

// handoverTimesOut checks that while another owner holds the key, nothing
// is handed over: the wait lasts max. (A store may return sooner when it
// sees the key free.)
func (s *suite) handoverTimesOut(t *testing.T, ctx context.Context, h backend.Store, ha backend.Handover, key string) {
	t.Helper()
	s.acquire(t, ctx, h, key, "other", longTTL, 0)
	start := time.Now()
	_, ok, err := ha.AwaitHandover(ctx, key, "a", 200*time.Millisecond)
	if ok || err != nil {
		t.Fatalf("AwaitHandover with nothing to hand over: ok %v, err %v; want ok false", ok, err)
	}
	s.checkNotEarly(t, "AwaitHandover that timed out", time.Now(), start, 200*time.Millisecond)
	release(t, ctx, h, key, "other", 0)
}

// handoverOnRelease checks that a waiter in AwaitHandover is handed the
// key when its holder releases it, with the ttl and floor the waiter
// asked for (not the holder's).
func (s *suite) handoverOnRelease(t *testing.T, ctx context.Context, h, a, watcher queueStore, key string) {
	t.Helper()
	const waiterTTL = 20 * time.Second
	w := watch(t, ctx, watcher, key)
	held := s.acquire(t, ctx, h, key, "h", longTTL, 0)
	floor := aheadOfClock() // far above where the clock gets to meanwhile
	_, err := a.AcquireQueued(ctx, key, "a", waiterTTL, floor, waitPatience)
	checkHeldBy(t, "a's AcquireQueued of the held key", err, held, longTTL)
	done := awaitHandover(ctx, a.(backend.Handover), key, "a", waitTimeout)
	sent := time.Now()
	release(t, ctx, h, key, "h", 0)
	r := <-done
	if r.err != nil || !r.ok {
		t.Fatalf("AwaitHandover while the holder released: ok %v, err %v", r.ok, r.err)
	}
	if r.l.Owner != "a" || r.l.Token != floor+1 {
		t.Errorf("AwaitHandover returned %+v; want owner a and token %d (a's floor + 1)", r.l, floor+1)
	}
	s.checkTTL(t, "the lease AwaitHandover returned (a's ttl, not the holder's)", r.l.TTL, waiterTTL, sent)
	awaitRenewal(t, w, longTTL, "the handover to a")
	g := get(t, ctx, watcher, key)
	if g.Owner != "a" || g.TTL > waiterTTL {
		t.Errorf("Get after the handover: %+v; want a holding the key for at most %v", g, waiterTTL)
	}
	release(t, ctx, a, key, "a", 0)
}

// handoverCancelled checks that AwaitHandover for a key another owner
// holds returns soon after its context is cancelled.
func handoverCancelled(t *testing.T, ctx context.Context, ha backend.Handover, key string) {
	t.Helper()
	cctx, cancel := context.WithCancel(ctx)
	done := awaitHandover(cctx, ha, key, "a", longTTL)
	time.Sleep(50 * time.Millisecond) // let it start waiting; the check below does not depend on it
	cancel()
	select {
	case r := <-done:
		if !errors.Is(r.err, context.Canceled) || r.ok {
			t.Errorf("AwaitHandover whose context was cancelled: ok %v, err %v; want context.Canceled", r.ok, r.err)
		}
	case <-time.After(longTTL / 2):
		t.Fatalf("AwaitHandover did not return within %v of its context's cancellation (max was %v)", longTTL/2, longTTL)
	}
}

// handoverArguments checks that AwaitHandover refuses bad keys, owners and
// waits.
func handoverArguments(t *testing.T, ctx context.Context, ha backend.Handover, key string) {
	t.Helper()
	for name, k := range invalidKeys(key) {
		_, _, err := ha.AwaitHandover(ctx, k, "a", time.Second)
		isInvalid(t, "AwaitHandover with a "+name+" key", err)
	}
	for name, o := range invalidOwners() {
		_, _, err := ha.AwaitHandover(ctx, key, o, time.Second)
		isInvalid(t, "AwaitHandover with a "+name+" owner", err)
	}
	for _, d := range []time.Duration{0, -time.Second, backend.MaxTTL + time.Hour} {
		_, _, err := ha.AwaitHandover(ctx, key, "a", d)
		isInvalid(t, fmt.Sprintf("AwaitHandover with max %v", d), err)
	}
}
