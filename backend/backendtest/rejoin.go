package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// rejoinStore is a client of a store whose release can put another
// waiter in line.
type rejoinStore interface {
	backend.Store
	backend.Rejoin
}

// rejoin returns a new client of the store under test as a rejoinStore
// that hands over, and skips t if the store has no ReleaseAndJoin (it is
// optional) or does not hand over.
func (s *suite) rejoin(t *testing.T, ctx context.Context) rejoinStore {
	t.Helper()
	q := s.queue(t)
	r, ok := q.(rejoinStore)
	if !ok {
		t.Skip("the store does not implement backend.Rejoin (optional)")
	}
	if !s.handsOver(t, ctx, q) {
		t.Skip("the store does not hand over")
	}
	return r
}

// testRejoin checks ReleaseAndJoin: a release that hands the key over puts
// next at the back of the line, and next is handed the key in its turn
// with what it asked for; a release that hands nothing over puts nobody
// in line; a caller that does not hold the key changes nothing.
func (s *suite) testRejoin(t *testing.T) {
	ctx := testCtx(t)
	h := s.rejoin(t, ctx)
	a := s.queue(t)
	key := s.key("rejoin")

	// h holds, a waits: h's release hands over to a and puts n behind a.
	held := s.acquire(t, ctx, h, key, "h", longTTL, 0)
	_, err := a.AcquireQueued(ctx, key, "a", longTTL, 0, waitPatience)
	checkHeldBy(t, "a's AcquireQueued of the held key", err, held, longTTL)
	toA := awaitHandover(ctx, a.(backend.Handover), key, "a", waitTimeout)
	const nTTL = 20 * time.Second
	floor := aheadOfClock()
	joined, err := h.ReleaseAndJoin(ctx, key, "h", "n", nTTL, floor, waitPatience)
	if err != nil || !joined {
		t.Fatalf("h's ReleaseAndJoin with a in line: joined %v, err %v; want joined", joined, err)
	}
	r := <-toA
	if r.err != nil || !r.ok || r.l.Owner != "a" {
		t.Fatalf("a's AwaitHandover after h's ReleaseAndJoin: %+v, ok %v, err %v; want the key handed to a", r.l, r.ok, r.err)
	}
	// n is in line behind a: a try names it, and a's release hands to it.
	_, err = h.AcquireQueued(ctx, key, "x", longTTL, 0, 0)
	checkQueuedBehind(t, "a try while a holds and n waits", err, r.l, longTTL, "n")
	toN := awaitHandover(ctx, h, key, "n", waitTimeout)
	sent := time.Now()
	release(t, ctx, a, key, "a", 0)
	r = <-toN
	if r.err != nil || !r.ok || r.l.Owner != "n" || r.l.Token != floor+1 {
		t.Fatalf("n's AwaitHandover after a's release: %+v, ok %v, err %v; want the key handed to n with token %d (its floor + 1)", r.l, r.ok, r.err, floor+1)
	}
	s.checkTTL(t, "the lease handed to n (the ttl it joined with)", r.l.TTL, nTTL, sent)

	// Nobody in line: the key is freed, and n2 has not joined.
	joined, err = h.ReleaseAndJoin(ctx, key, "n", "n2", nTTL, 0, waitPatience)
	if err != nil || joined {
		t.Fatalf("n's ReleaseAndJoin with nobody in line: joined %v, err %v; want not joined", joined, err)
	}
	if _, err := h.Get(ctx, key); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get after a ReleaseAndJoin that handed nothing over: %v; want ErrNotFound", err)
	}
	l, err := a.AcquireQueued(ctx, key, "y", longTTL, 0, waitPatience)
	if err != nil {
		t.Fatalf("y's AcquireQueued of the free key: %v; want a grant (n2 must not be in line)", err)
	}
	s.rejoinNotHolder(t, ctx, h, a, key, l)
	s.rejoinArguments(t, ctx, h, key)
}

// rejoinNotHolder checks that a ReleaseAndJoin by a caller that does not
// hold key fails with ErrNotHeld and puts nobody in line.
func (s *suite) rejoinNotHolder(t *testing.T, ctx context.Context, h rejoinStore, a queueStore, key string, held backend.Lease) {
	t.Helper()
	_, err := a.AcquireQueued(ctx, key, "b", longTTL, 0, waitPatience)
	checkHeldBy(t, "b's AcquireQueued of the held key", err, held, longTTL)
	joined, err := h.ReleaseAndJoin(ctx, key, "x", "n3", longTTL, 0, waitPatience)
	if joined {
		t.Errorf("a ReleaseAndJoin by a caller that does not hold the key joined n3")
	}
	checkNotHeld(t, "ReleaseAndJoin by a caller that does not hold the key", err, key, "x", held)
	_, err = h.AcquireQueued(ctx, key, "x", longTTL, 0, 0)
	checkQueuedBehind(t, "a try after the refused ReleaseAndJoin", err, held, longTTL, "b")
	if err := a.Dequeue(ctx, key, "b"); err != nil {
		t.Fatalf("b's Dequeue: %v", err)
	}
	release(t, ctx, a, key, held.Owner, 0)
}

// rejoinArguments checks that ReleaseAndJoin refuses bad keys, owners,
// ttls and patience.
func (s *suite) rejoinArguments(t *testing.T, ctx context.Context, h rejoinStore, key string) {
	t.Helper()
	for name, k := range invalidKeys(key) {
		_, err := h.ReleaseAndJoin(ctx, k, "h", "n", longTTL, 0, waitPatience)
		isInvalid(t, "ReleaseAndJoin with a "+name+" key", err)
	}
	for name, o := range invalidOwners() {
		_, err := h.ReleaseAndJoin(ctx, key, o, "n", longTTL, 0, waitPatience)
		isInvalid(t, "ReleaseAndJoin with a "+name+" owner", err)
		_, err = h.ReleaseAndJoin(ctx, key, "h", o, longTTL, 0, waitPatience)
		isInvalid(t, "ReleaseAndJoin with a "+name+" next", err)
	}
	for _, d := range []time.Duration{0, -time.Second} {
		_, err := h.ReleaseAndJoin(ctx, key, "h", "n", d, 0, waitPatience)
		isInvalid(t, "ReleaseAndJoin with ttl "+d.String(), err)
		_, err = h.ReleaseAndJoin(ctx, key, "h", "n", longTTL, 0, d)
		isInvalid(t, "ReleaseAndJoin with patience "+d.String(), err)
	}
}
