package consulbackend_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/backendtest"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

// A waiter is refused on one read of the key and joins its line with a
// second write. A write by another client between the two (a release, or
// the waiter first in line leaving) must make the waiter read again:
// otherwise it would join the line of a free key that nobody hands over,
// and wait a whole poll for a key nobody holds.
func TestJoinSeesWritesAfterItsRead(t *testing.T) {
	a := testenv.NewConsul(t)
	const ttl, patience = 10 * time.Second, 10 * time.Second

	t.Run("Release", func(t *testing.T) {
		ctx := ctxT(t)
		s := newStore(t, a)
		const key = "join-after-release"
		if _, err := s.Acquire(ctx, key, "holder", ttl, 0); err != nil {
			t.Fatal(err)
		}
		retry, err := consulbackend.QueuedAfter(ctx, s, key, "waiter", ttl, patience, func() {
			if err := s.Release(ctx, key, "holder", 0); err != nil {
				t.Fatal(err)
			}
		})
		if err != nil || !retry {
			t.Fatalf("a join decided on a read from before the holder's release: retry %v, err %v; want retry", retry, err)
		}
		l, err := s.AcquireQueued(ctx, key, "waiter", ttl, 0, patience)
		if err != nil || l.Owner != "waiter" {
			t.Fatalf("the waiter's next try of the released key: %+v, %v; want a grant", l, err)
		}
	})

	t.Run("FirstLeaves", func(t *testing.T) {
		ctx := ctxT(t)
		s := newStore(t, a)
		const key = "join-after-first-leaves"
		// A key that is free but kept for "first": its holder's session
		// was destroyed (as by an operator) while "first" was in line.
		if _, err := s.Acquire(ctx, key, "holder", ttl, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AcquireQueued(ctx, key, "first", ttl, 0, patience); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("first's AcquireQueued of the held key: %v; want ErrHeld", err)
		}
		destroyLeaseSession(t, a, s, key)
		_, err := s.AcquireQueued(ctx, key, "second", ttl, 0, 0)
		var he *backend.HeldError
		if !errors.As(err, &he) || he.Holder.Owner != "" || he.Next != "first" {
			t.Fatalf("a try of the key whose holder's session ended, with first in line: %v; want it kept for first", err)
		}
		retry, err := consulbackend.QueuedAfter(ctx, s, key, "waiter", ttl, patience, func() {
			if err := s.Dequeue(ctx, key, "first"); err != nil {
				t.Fatal(err)
			}
		})
		if err != nil || !retry {
			t.Fatalf("a join decided on a read from before the first waiter left: retry %v, err %v; want retry", retry, err)
		}
		l, err := s.AcquireQueued(ctx, key, "waiter", ttl, 0, patience)
		if err != nil || l.Owner != "waiter" {
			t.Fatalf("the waiter's next try once the line is empty: %+v, %v; want a grant", l, err)
		}
	})
}

// A waiter that joins behind others in line holds its join although
// the key was handed over and another waiter joined between its read and
// its write: only the waiter last in line when it read must still be
// there, so the joins of a contended key do not turn each other away
// (each refusal costs a Raft write and a read). It stands behind them all,
// and the key reaches it in its turn.
func TestJoinBehindOthersHoldsAcrossHandovers(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	s := newStore(t, a)
	const key, ttl = "join-behind-others", 10 * time.Second
	if _, err := s.Acquire(ctx, key, "holder", ttl, 0); err != nil {
		t.Fatal(err)
	}
	join(t, s, key, "a", ttl)
	join(t, s, key, "b", ttl)
	retry, err := consulbackend.QueuedAfter(ctx, s, key, "c", ttl, time.Minute, func() {
		if err := s.Release(ctx, key, "holder", 0); err != nil { // hands the key to a
			t.Fatal(err)
		}
		join(t, s, key, "d", ttl)
	})
	if retry || !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("c's join behind b, after a handover and d's join since its read: retry %v, err %v; want it held (ErrHeld, no retry)", retry, err)
	}
	for _, turn := range [][2]string{{"a", "b"}, {"b", "d"}, {"d", "c"}} {
		awaitHanded(t, s, key, turn[0], "the turn of "+turn[0])
		if err := s.Release(ctx, key, turn[0], 0); err != nil {
			t.Fatal(err)
		}
	}
	awaitHanded(t, s, key, "c", "c's turn, after d's")
}

// A store that handed a key over knows who waits behind the new holder:
// its next AcquireQueued of the key (a process that locks it again at
// once) joins the line behind them without reading the key and its line
// first, and takes its turn after them. A hint that no longer holds (the
// waiter it names has left) makes it read as usual.
func TestJoinAfterHandoverReadsNothing(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	s := newStore(t, a)
	h, hc := countingStore(t, a)
	const key, ttl = "join-after-handover", 10 * time.Second
	if _, err := h.Acquire(ctx, key, "holder", ttl, 0); err != nil {
		t.Fatal(err)
	}
	join(t, s, key, "a", ttl)
	join(t, s, key, "b", ttl)
	if err := h.Release(ctx, key, "holder", 0); err != nil { // hands the key to a
		t.Fatal(err)
	}
	reads := hc.reads.Load()
	_, err := h.AcquireQueued(ctx, key, "again", ttl, 0, time.Minute)
	var he *backend.HeldError
	if !errors.As(err, &he) || he.Holder.Owner != "a" || he.Next != "b" {
		t.Fatalf("the releasing store's next AcquireQueued: %v; want held by a, b next", err)
	}
	if n := hc.reads.Load() - reads; n != 0 {
		t.Errorf("the join after the store's own handover read %d times; want 0", n)
	}
	for _, turn := range []string{"a", "b"} {
		awaitHanded(t, s, key, turn, "the turn of "+turn)
		if err := s.Release(ctx, key, turn, 0); err != nil {
			t.Fatal(err)
		}
	}
	awaitHanded(t, h, key, "again", "the turn of the join without a read, after b's")

	// b's place is gone by the next join: it reads and joins as usual.
	join(t, s, key, "c", ttl)
	join(t, s, key, "d", ttl)
	if err := h.Release(ctx, key, "again", 0); err != nil { // hands the key to c
		t.Fatal(err)
	}
	if err := s.Dequeue(ctx, key, "d"); err != nil {
		t.Fatal(err)
	}
	reads = hc.reads.Load()
	if _, err := h.AcquireQueued(ctx, key, "third", ttl, 0, time.Minute); !errors.As(err, &he) || he.Holder.Owner != "c" || he.Next != "third" {
		t.Fatalf("AcquireQueued after the waiter the store knew of left: %v; want held by c, itself next", err)
	}
	if n := hc.reads.Load() - reads; n != 1 {
		t.Errorf("the join after the known waiter left read %d times; want 1", n)
	}
}

// A store that freed a key with nobody in line grants it to its next
// AcquireQueued without reading it first (an uncontended lock cycle is a
// renewal and two transactions); a grant or a join by another client since
// makes it read as usual, and it is refused or joins as a read would
// decide.
func TestGrantAfterReleaseReadsNothing(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	h, hc := countingStore(t, a)
	o := newStore(t, a)
	const key, ttl = "grant-after-release", 10 * time.Second
	cycle := func(owner string) {
		t.Helper()
		if l, err := h.AcquireQueued(ctx, key, owner, ttl, 0, time.Minute); err != nil || l.Owner != owner {
			t.Fatalf("%s's AcquireQueued of the free key: %+v, %v; want a grant", owner, l, err)
		}
		if err := h.Release(ctx, key, owner, 0); err != nil {
			t.Fatal(err)
		}
	}
	cycle("first")
	reads := hc.reads.Load()
	for _, owner := range []string{"c1", "c2", "c3"} {
		cycle(owner)
	}
	if n := hc.reads.Load() - reads; n != 0 {
		t.Errorf("3 lock cycles after the first read %d times; want 0", n)
	}

	// Something written to the lease key since the release, even without
	// a session (which a read finds free and replaces): read first, never
	// overwritten unseen.
	if _, err := client(t, a).KV().Put(&api.KVPair{Key: h.LeaseKey(key), Value: []byte("written since")}, nil); err != nil {
		t.Fatal(err)
	}
	reads = hc.reads.Load()
	cycle("over")
	if n := hc.reads.Load() - reads; n != 1 {
		t.Errorf("a grant over a lease key written since the store's release read %d times; want 1", n)
	}

	// Another client's grant since the release: read, and refused.
	if _, err := o.Acquire(ctx, key, "other", ttl, 0); err != nil {
		t.Fatal(err)
	}
	_, err := h.AcquireQueued(ctx, key, "late", ttl, 0, time.Minute)
	var he *backend.HeldError
	if !errors.As(err, &he) || he.Holder.Owner != "other" {
		t.Fatalf("AcquireQueued after another client took the key: %v; want held by other", err)
	}
	if err := o.Release(ctx, key, "other", 0); err != nil { // hands it to late
		t.Fatal(err)
	}
	awaitHanded(t, h, key, "late", "late's turn")
	if err := h.Release(ctx, key, "late", 0); err != nil {
		t.Fatal(err)
	}

	// A waiter that joined since the release (the key held by another
	// client meanwhile, then kept for the waiter): read, and kept for it.
	if _, err := o.Acquire(ctx, key, "other", ttl, 0); err != nil {
		t.Fatal(err)
	}
	join(t, o, key, "waiter", ttl)
	destroyLeaseSession(t, a, o, key) // free, kept for waiter
	_, err = h.AcquireQueued(ctx, key, "after", ttl, 0, 0)
	if !errors.As(err, &he) || he.Next != "waiter" {
		t.Fatalf("AcquireQueued of the key kept for a waiter: %v; want it kept for waiter", err)
	}
}

// A waiter whose place's session ended (it crashed and its patience ran
// out, or an operator destroyed the session) is out of the line: the
// release frees the key instead of handing it to that waiter.
func TestLapsedPlaceIsNotHandedTheKey(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	s := newStore(t, a)
	const key, ttl = "lapsed-place", 10 * time.Second
	w, err := s.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := s.Acquire(ctx, key, "holder", ttl, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireQueued(ctx, key, "gone", ttl, 0, time.Hour); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("AcquireQueued of the held key: %v; want ErrHeld", err)
	}
	p, _, err := client(t, a).KV().Get(s.LineKey(key)+"gone", nil)
	if err != nil || p == nil || p.Session == "" {
		t.Fatalf("the waiter's place: %+v, %v; want an entry locked by its session", p, err)
	}
	if err := a.DestroySession(ctx, p.Session); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx, key, "holder", 0); err != nil {
		t.Fatal(err)
	}
	awaitKind(t, w, backend.EventReleased)
	if _, err := s.Get(ctx, key); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("Get after the release with only a lapsed waiter in line: %v; want ErrNotFound", err)
	}
	if l, err := s.AcquireQueued(ctx, key, "other", ttl, 0, 0); err != nil || l.Owner != "other" {
		t.Fatalf("another owner's try: %+v, %v; want a grant", l, err)
	}
}

// Places that are not a waiter's, as the store reads them: entries of a
// longer key's line are skipped, and foreign values are ErrCorrupt.
func TestDecodePlace(t *testing.T) {
	s, err := consulbackend.New(nil) // talks to no agent
	if err != nil {
		t.Fatal(err)
	}
	// A lease of 10 s: what the store's sessions hold (DefaultSessionTTLMin).
	good := []byte(`{"ttl_ms":10000,"floor":0,"place_ms":500}`)
	if owner, ok, err := consulbackend.DecodePlace(s, "k", "a%2Fb", good); err != nil || !ok || owner != "a/b" {
		t.Errorf("a place of owner a/b: %q, %v, %v", owner, ok, err)
	}
	if _, ok, err := consulbackend.DecodePlace(s, "k", "x/owner", good); err != nil || ok {
		t.Errorf("a place in the line of key k/x, read as k's: ok %v, err %v; want it skipped", ok, err)
	}
	for name, v := range map[string][]byte{
		"not JSON":         []byte("nope"),
		"no ttl":           []byte(`{"floor":0,"place_ms":500}`),
		"no place":         []byte(`{"ttl_ms":1000}`),
		"huge floor":       []byte(`{"ttl_ms":1000,"floor":18446744073709551615,"place_ms":500}`),
		"ttl too big":      []byte(`{"ttl_ms":99999999999999,"place_ms":500}`),
		"ttl too small":    []byte(`{"ttl_ms":1000,"place_ms":500}`),
		"handed no token":  []byte(`{"ttl_ms":10000,"place_ms":500,"handed":{"session":"s"}}`),
		"next not baton's": []byte(`{"ttl_ms":10000,"place_ms":500,"handed":{"token":1,"session":"s","next":[{"owner":"a b","index":1,"ttl_ms":10000,"place_ms":500}]}}`),
	} {
		if _, _, err := consulbackend.DecodePlace(s, "k", "owner", v); !errors.Is(err, backend.ErrCorrupt) {
			t.Errorf("a place holding %s: %v; want ErrCorrupt", name, err)
		}
	}
	if _, _, err := consulbackend.DecodePlace(s, "k", "bad%zz", good); !errors.Is(err, backend.ErrCorrupt) {
		t.Errorf("a place whose name is not path-escaped: %v; want ErrCorrupt", err)
	}
}

func client(t testing.TB, a *testenv.Consul) *api.Client {
	t.Helper()
	c, err := api.NewClient(config(a))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// destroyLeaseSession ends the session that holds key's lease.
func destroyLeaseSession(t testing.TB, a *testenv.Consul, s *consulbackend.Store, key string) {
	t.Helper()
	p, _, err := client(t, a).KV().Get(s.LeaseKey(key), nil)
	if err != nil || p == nil || p.Session == "" {
		t.Fatalf("the lease of %q: %+v, %v; want an entry locked by a session", key, p, err)
	}
	if err := a.DestroySession(ctxT(t), p.Session); err != nil {
		t.Fatal(err)
	}
}

// awaitKind reads w until it delivers an event of kind.
func awaitKind(t testing.TB, w backend.Watch, kind backend.EventKind) {
	t.Helper()
	deadline := time.After(patience)
	for {
		select {
		case ev := <-w.C():
			if ev.Kind == kind {
				return
			}
		case <-deadline:
			t.Fatalf("no %v event within %v", kind, patience)
		}
	}
}

// A waiter that joins the line between a release's read of the key and
// its write (the release saw nobody in line) is not left in the line of a
// key that was freed: the release reads again and hands the key over.
func TestReleaseSeesAJoinAfterItsRead(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	h, w := newStore(t, a), newStore(t, a)
	const key, ttl = "release-after-join", 10 * time.Second
	if _, err := h.Acquire(ctx, key, "holder", ttl, 0); err != nil {
		t.Fatal(err)
	}
	once := true
	consulbackend.SetAfterLook(h, func() {
		if once {
			once = false
			if _, err := w.AcquireQueued(ctx, key, "waiter", ttl, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
				t.Errorf("the waiter's AcquireQueued while the holder holds the key: %v; want ErrHeld", err)
			}
		}
	})
	if err := h.Release(ctx, key, "holder", 0); err != nil {
		t.Fatal(err)
	}
	l, ok, err := w.AwaitHandover(ctx, key, "waiter", time.Second)
	if err != nil || !ok || l.Owner != "waiter" {
		t.Fatalf("AwaitHandover of the waiter that joined during the release: %+v, ok %v, err %v; want the key handed over", l, ok, err)
	}
}

// A key that falls free without being handed to the waiter (it was not
// in line when the release read it) ends the waiter's AwaitHandover at
// once, ok false, so that it asks again instead of waiting for max.
func TestAwaitHandoverEndsWhenTheKeyFallsFree(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	s := newStore(t, a)
	const key, max = "falls-free", time.Minute
	if _, err := s.Acquire(ctx, key, "holder", 10*time.Second, 0); err != nil {
		t.Fatal(err)
	}
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		_, ok, err := s.AwaitHandover(ctx, key, "waiter", max) // not in line
		done <- result{ok, err}
	}()
	if err := s.Release(ctx, key, "holder", 0); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		if r.ok || r.err != nil {
			t.Fatalf("AwaitHandover of a key that fell free: ok %v, err %v; want ok false", r.ok, r.err)
		}
	case <-time.After(max / 2):
		t.Fatalf("AwaitHandover still waits %v after the key fell free (max %v)", max/2, max)
	}
}

// A handover whose transaction fails because the key or the line changed
// after its read (a renewal of the lease, a waiter that moved its place)
// reads again and hands the key over: it neither reports success without
// handing over nor ends the sessions that still hold the lease and the
// waiter's place.
func TestHandoverThatLosesARaceTriesAgain(t *testing.T) {
	a := testenv.NewConsul(t)
	const ttl = 10 * time.Second

	t.Run("Release", func(t *testing.T) {
		ctx := ctxT(t)
		s := newStore(t, a)
		const key = "handover-race-release"
		if _, err := s.Acquire(ctx, key, "holder", ttl, 0); err != nil {
			t.Fatal(err)
		}
		join(t, s, key, "waiter", ttl)
		once := true
		consulbackend.SetAfterLook(s, func() {
			if once {
				once = false
				if _, err := s.Renew(ctx, key, "holder", ttl); err != nil {
					t.Errorf("the holder's renewal between its release's read and write: %v", err)
				}
			}
		})
		if err := s.Release(ctx, key, "holder", 0); err != nil {
			t.Fatal(err)
		}
		awaitHanded(t, s, key, "waiter", "AwaitHandover after a release whose first handover lost a race")
	})

	t.Run("Dequeue", func(t *testing.T) {
		ctx := ctxT(t)
		s := newStore(t, a)
		const key = "handover-race-dequeue"
		if _, err := s.Acquire(ctx, key, "holder", ttl, 0); err != nil {
			t.Fatal(err)
		}
		for _, w := range []string{"first", "second"} {
			join(t, s, key, w, ttl)
		}
		// Free, and kept for "first".
		destroyLeaseSession(t, a, s, key)
		once := true
		consulbackend.SetAfterLook(s, func() {
			if once {
				once = false
				// Another patience moves second's place to a new entry.
				if _, err := s.AcquireQueued(ctx, key, "second", ttl, 0, 2*time.Minute); !errors.Is(err, backend.ErrHeld) {
					t.Errorf("second's AcquireQueued between first's dequeue's read and write: %v; want ErrHeld", err)
				}
			}
		})
		if err := s.Dequeue(ctx, key, "first"); err != nil {
			t.Fatal(err)
		}
		awaitHanded(t, s, key, "second", "AwaitHandover after a dequeue whose first handover lost a race")
	})

	t.Run("Break", func(t *testing.T) {
		ctx := ctxT(t)
		s := newStore(t, a)
		const key = "handover-race-break"
		held, err := s.Acquire(ctx, key, "holder", ttl, 0)
		if err != nil {
			t.Fatal(err)
		}
		join(t, s, key, "waiter", ttl)
		once := true
		consulbackend.SetAfterLook(s, func() {
			if once {
				once = false
				if _, err := s.Renew(ctx, key, "holder", ttl); err != nil {
					t.Errorf("the holder's renewal between the break's read and write: %v", err)
				}
			}
		})
		broken, err := s.Break(ctx, key, "holder", held.Token)
		if err != nil || broken.Token != held.Token {
			t.Fatalf("Break: %+v, %v; want the holder's lease", broken, err)
		}
		awaitHanded(t, s, key, "waiter", "AwaitHandover after a break whose first handover lost a race")
	})
}

// A waiter first in line whose grant of the free key loses a race
// (another client took the key after the read) keeps its place: the
// attempt reads again instead of leaving the line.
func TestQueuedGrantThatLosesARaceKeepsThePlace(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	s, ws := newStore(t, a), newStore(t, a)
	const key, ttl = "grant-race", 10 * time.Second
	if _, err := s.Acquire(ctx, key, "holder", ttl, 0); err != nil {
		t.Fatal(err)
	}
	join(t, ws, key, "waiter", ttl)
	// Free, and kept for the waiter.
	destroyLeaseSession(t, a, s, key)
	retry, err := consulbackend.QueuedAfter(ctx, ws, key, "waiter", ttl, time.Minute, func() {
		// Another client takes the key past the line (Acquire does not
		// look at it): the counter moves.
		if _, err := s.Acquire(ctx, key, "other", ttl, 0); err != nil {
			t.Fatal(err)
		}
	})
	if err != nil || !retry {
		t.Fatalf("a grant decided on a read from before the counter moved: retry %v, err %v; want retry", retry, err)
	}
	ws.Close() // waits for the sessions it ends
	p, _, err := client(t, a).KV().Get(s.LineKey(key)+"waiter", nil)
	if err != nil || p == nil || p.Session == "" {
		t.Fatalf("the waiter's place after its grant lost a race: %+v, %v; want it still in line", p, err)
	}
}

// A waiter behind another in line waits on its own place, not on the
// lease key: the handover to the waiter ahead of it does not wake it, and
// the handover to it does. Its store remembers where its join left the
// place, so the wait reads nothing first, and the handover writes the
// lease into the place, so it reads nothing after.
func TestHandoverWakesOnlyItsWaiter(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	s := newStore(t, a)
	b, bc := countingStore(t, a)
	const key, ttl = "handover-wakes-one", 10 * time.Second
	if _, err := s.Acquire(ctx, key, "holder", ttl, 0); err != nil {
		t.Fatal(err)
	}
	join(t, s, key, "a", ttl)
	join(t, b, key, "b", ttl)
	type result struct {
		l   backend.Lease
		ok  bool
		err error
	}
	done := make(chan result, 1)
	before, reads := bc.requests.Load(), bc.reads.Load()
	go func() {
		l, ok, err := b.AwaitHandover(ctx, key, "b", patience)
		done <- result{l, ok, err}
	}()
	<-bc.blocks // b waits
	// b's store knows where b's join left its place: no read of the line
	// before the wait.
	if n := bc.requests.Load() - before; n != 1 {
		t.Errorf("b's wait sent %d requests before its blocking query; want only the query, on its place", n-1)
	}
	if err := s.Release(ctx, key, "holder", 0); err != nil {
		t.Fatal(err)
	}
	if l, ok, err := s.AwaitHandover(ctx, key, "a", 5*time.Second); err != nil || !ok || l.Owner != "a" {
		t.Fatalf("a's AwaitHandover: %+v, ok %v, err %v; want the key handed to a", l, ok, err)
	}
	if err := s.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || !r.ok || r.l.Owner != "b" {
		t.Fatalf("b's AwaitHandover: %+v, ok %v, err %v; want the key handed to b", r.l, r.ok, r.err)
	}
	if n := bc.wakeup.Load(); n != 1 {
		t.Errorf("b's wait returned from %d blocking queries for two handovers; want 1, the one to b", n)
	}
	// Handed the key with nobody behind it, b's store reads the line
	// ahead of b's release (known.go): that read aside, the wait was the
	// one query, as the handover marks b's place handed with the lease.
	consulbackend.AwaitLookAhead(b, key)
	if n := bc.requests.Load() - before - (bc.reads.Load() - reads); n != 1 {
		t.Errorf("b's wait sent %d requests besides reads; want 1, the blocking query on its place, which the handover marks handed with the lease", n)
	}
}

// A release of a lease granted with nobody in line is one transaction,
// without a read first, while nothing changed since the grant; a waiter
// that joined since, or a renewal, makes it read and go the usual way
// (the join is handed the key).
func TestReleaseAlone(t *testing.T) {
	a := testenv.NewConsul(t)
	const ttl = 10 * time.Second

	t.Run("OneRequest", func(t *testing.T) {
		ctx := ctxT(t)
		s, c := countingStore(t, a)
		const key = "alone-one-request"
		w, err := newStore(t, a).Watch(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		for i := range 3 {
			if _, err := s.AcquireQueued(ctx, key, "a", ttl, 0, time.Minute); err != nil {
				t.Fatal(err)
			}
			before := c.requests.Load()
			if err := s.Release(ctx, key, "a", 0); err != nil {
				t.Fatal(err)
			}
			if n := c.requests.Load() - before; n != 1 {
				t.Errorf("cycle %d: the release of a lease granted with nobody in line sent %d requests; want 1", i, n)
			}
			awaitKind(t, w, backend.EventReleased) // told from an expiry
		}
		if _, err := s.Get(ctx, key); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Get after the release: %v; want ErrNotFound", err)
		}
	})

	t.Run("JoinSince", func(t *testing.T) {
		ctx := ctxT(t)
		s, w := newStore(t, a), newStore(t, a)
		const key = "alone-join-since"
		if _, err := s.AcquireQueued(ctx, key, "holder", ttl, 0, time.Minute); err != nil {
			t.Fatal(err)
		}
		join(t, w, key, "waiter", ttl)
		if err := s.Release(ctx, key, "holder", 0); err != nil {
			t.Fatal(err)
		}
		awaitHanded(t, w, key, "waiter", "AwaitHandover of the waiter that joined after the grant")
	})

	t.Run("RenewedSince", func(t *testing.T) {
		ctx := ctxT(t)
		s := newStore(t, a)
		const key = "alone-renewed-since"
		w, err := s.Watch(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if _, err := s.AcquireQueued(ctx, key, "a", ttl, 0, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Renew(ctx, key, "a", ttl); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, key, "a", 0); err != nil {
			t.Fatal(err)
		}
		awaitKind(t, w, backend.EventReleased)
	})
}

// A handover names in the lease the waiters behind the one it grants, and
// that holder's release hands the key on to the next of them in one
// transaction, without reading the line first. A waiter that left since
// is skipped by a release that reads (its place is not as named), and one
// that joined since comes after those named.
func TestHandOnWithoutRead(t *testing.T) {
	a := testenv.NewConsul(t)
	const ttl = 10 * time.Second

	// line has h hold key and the waiters join in order.
	line := func(t *testing.T, s *consulbackend.Store, key string, waiters ...string) {
		t.Helper()
		if _, err := s.Acquire(ctxT(t), key, "h", ttl, 0); err != nil {
			t.Fatal(err)
		}
		for _, w := range waiters {
			join(t, s, key, w, ttl)
		}
	}
	// pass releases from's lease and returns to's, handed over.
	pass := func(t *testing.T, s *consulbackend.Store, key, from, to string) backend.Lease {
		t.Helper()
		if err := s.Release(ctxT(t), key, from, 0); err != nil {
			t.Fatal(err)
		}
		return awaitHanded(t, s, key, to, fmt.Sprintf("%s's AwaitHandover after %s's release", to, from))
	}

	t.Run("Chain", func(t *testing.T) {
		s, c := countingStore(t, a)
		const key = "hand-on-chain"
		line(t, s, key, "a", "b", "c")
		la := pass(t, s, key, "h", "a")
		before, reads := c.requests.Load(), c.reads.Load()
		if err := s.Release(ctxT(t), key, "a", 0); err != nil {
			t.Fatal(err)
		}
		if n, r := c.requests.Load()-before, c.reads.Load()-reads; n != 1 || r != 0 {
			t.Errorf("a's release sent %d requests, %d of them reads; want 1, the handover, without a read first", n, r)
		}
		// b, named with only c behind it, reads the line ahead of its
		// release (known.go): a read, not on the way from a to b.
		before, reads = c.requests.Load(), c.reads.Load()
		lb := awaitHanded(t, s, key, "b", "b's AwaitHandover after a's release")
		consulbackend.AwaitLookAhead(s, key)
		if n := c.requests.Load() - before - (c.reads.Load() - reads); n != 1 {
			t.Errorf("b's wait sent %d requests besides reads; want 1, its query on its place", n)
		}
		lc := pass(t, s, key, "b", "c")
		if !(la.Token < lb.Token && lb.Token < lc.Token) {
			t.Errorf("tokens a %d, b %d, c %d; want them increasing", la.Token, lb.Token, lc.Token)
		}
		if err := s.Release(ctxT(t), key, "c", 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctxT(t), key); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Get after the last waiter's release: %v; want ErrNotFound", err)
		}
		// A handover marks the waiter's place handed; its release deletes it.
		left, _, err := client(t, a).KV().List(s.LineKey(key), nil)
		if err != nil || len(left) != 0 {
			t.Fatalf("the line after every waiter released the key: %d entries (%v); want none", len(left), err)
		}
	})

	t.Run("NamedWaiterLeft", func(t *testing.T) {
		s := newStore(t, a)
		const key = "hand-on-left"
		line(t, s, key, "a", "b", "c")
		pass(t, s, key, "h", "a")
		if err := s.Dequeue(ctxT(t), key, "b"); err != nil {
			t.Fatal(err)
		}
		pass(t, s, key, "a", "c")
	})

	t.Run("JoinedSince", func(t *testing.T) {
		s := newStore(t, a)
		const key = "hand-on-joined"
		line(t, s, key, "a", "b")
		pass(t, s, key, "h", "a")
		if _, err := s.AcquireQueued(ctxT(t), key, "d", ttl, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("d's AcquireQueued of the held key: %v; want ErrHeld", err)
		}
		pass(t, s, key, "a", "b")
		pass(t, s, key, "b", "d")
	})
}

// A watch whose query answers with a lease that the counter already
// records as released (the release landed between the query's answer and
// the counter's read) reports the release once, and does not report the
// key's deletion seen next as an expiry: that would replace the pending
// EventReleased for a reader that has not taken it yet, and a slave would
// wait out the old master's TTL instead of claiming at once.
func TestWatchKeepsAReleaseSeenEarly(t *testing.T) {
	ev, ok := consulbackend.WatchPending(
		consulbackend.WatchAnswer{Token: 7, Index: 2, Released: 7}, // held in the answer, released by the counter
		consulbackend.WatchAnswer{Token: 0, Index: 3, Released: 7}, // the deletion
	)
	if !ok || ev.Kind != backend.EventReleased {
		t.Fatalf("pending event %v (ok %v); want EventReleased", ev.Kind, ok)
	}
	// A lease that ends without a release is still reported as such.
	ev, ok = consulbackend.WatchPending(
		consulbackend.WatchAnswer{Token: 7, Index: 2, Released: 0},
		consulbackend.WatchAnswer{Token: 0, Index: 3, Released: 0},
	)
	if !ok || ev.Kind != backend.EventMaybeFree {
		t.Fatalf("pending event %v (ok %v) after a lease ended unreleased; want EventMaybeFree", ev.Kind, ok)
	}
}

// join has owner join key's line on s: the key is held, so AcquireQueued
// (for a lease of ttl, a minute's patience) refuses it and keeps a place.
func join(t *testing.T, s *consulbackend.Store, key, owner string, ttl time.Duration) {
	t.Helper()
	if _, err := s.AcquireQueued(ctxT(t), key, owner, ttl, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("%s's AcquireQueued of the held key %q: %v; want ErrHeld", owner, key, err)
	}
}

// awaitHanded waits up to 5 s on s's AwaitHandover until key is handed to
// owner, and returns the lease handed over; what names the wait in the
// failure.
func awaitHanded(t *testing.T, s *consulbackend.Store, key, owner, what string) backend.Lease {
	t.Helper()
	l, ok, err := s.AwaitHandover(ctxT(t), key, owner, 5*time.Second)
	if err != nil || !ok || l.Owner != owner {
		t.Fatalf("%s: %+v, ok %v, err %v; want %q handed to %s", what, l, ok, err, key, owner)
	}
	return l
}

// forgePlace writes value as the place of the waiter name, first in key's
// line (order 1), locked by a session of its own, as another client of
// the agent could.
func forgePlace(t *testing.T, a *testenv.Consul, s *consulbackend.Store, key, name, value string) {
	t.Helper()
	c := client(t, a)
	id, _, err := c.Session().Create(&api.SessionEntry{TTL: "60s", Behavior: api.SessionBehaviorDelete}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Session().Destroy(id, nil) })
	ok, _, err := c.KV().Acquire(&api.KVPair{Key: s.LineKey(key) + url.PathEscape(name), Value: []byte(value), Session: id}, nil)
	if err != nil || !ok {
		t.Fatalf("forging a place: %v, %v", ok, err)
	}
}

// A waiter's place forged into a lock's line (a ttl Consul's sessions
// cannot hold, a floor at the largest token, a handed lease with no
// token, waiters behind it that are not baton's, garbage, a name with a
// terminal escape) makes the holder's Release fail with ErrCorrupt naming
// the place, and changes nothing: the lock is still held by its owner
// under its token, and the line is as it was. AcquireQueued and Dequeue
// of another waiter fail the same way.
func TestForgedPlaces(t *testing.T) {
	a := testenv.NewConsul(t)
	s := newStore(t, a)
	const ttl = 10 * time.Second
	for name, forged := range map[string][2]string{
		"ttl 1 ms":     {"forged", `{"ttl_ms":1,"place_ms":5000,"order":1}`},
		"ttl beyond":   {"forged", `{"ttl_ms":86400001,"place_ms":5000,"order":1}`},
		"place beyond": {"forged", `{"ttl_ms":10000,"place_ms":86400001,"order":1}`},
		"max floor":    {"forged", `{"ttl_ms":10000,"floor":9007199254740991,"place_ms":5000,"order":1}`},
		"handed 0":     {"forged", `{"ttl_ms":10000,"place_ms":5000,"order":1,"handed":{"token":0,"session":"x"}}`},
		"next forged":  {"forged", `{"ttl_ms":10000,"place_ms":5000,"order":1,"handed":{"token":5,"session":"x","next":[{"owner":"\u001b[31m","ttl_ms":0}]}}`},
		"garbage":      {"forged", `garbage`},
		"escape":       {"\x1b[31mred\nline", `{"ttl_ms":10000,"place_ms":5000,"order":1}`},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := ctxT(t)
			key := "forged-" + strings.ReplaceAll(name, " ", "-")
			h, err := s.Acquire(ctx, key, "h", ttl, 0)
			if err != nil {
				t.Fatal(err)
			}
			join(t, s, key, "b", ttl)
			forgePlace(t, a, s, key, forged[0], forged[1])
			kv := client(t, a).KV()
			read := func() string {
				pairs, _, err := kv.List(s.LineKey(key), nil)
				if err != nil {
					t.Fatal(err)
				}
				lease, _, err := kv.Get(s.LeaseKey(key), nil)
				if err != nil {
					t.Fatal(err)
				}
				out := fmt.Sprintf("lease %s %s %d\n", lease.Value, lease.Session, lease.ModifyIndex)
				for _, p := range pairs {
					out += fmt.Sprintf("%s %s %s %d\n", p.Key, p.Value, p.Session, p.ModifyIndex)
				}
				return out
			}
			before := read()
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, backend.ErrCorrupt) {
					t.Fatalf("%s with a forged place %q: %v; want ErrCorrupt", op, forged, err)
				}
				if msg := err.Error(); !strings.Contains(msg, s.LineKey(key)) || strings.ContainsAny(msg, "\x1b\n") {
					t.Errorf("%s: %q; want the error to name the place under %s, quoted", op, msg, s.LineKey(key))
				}
				if after := read(); after != before {
					t.Errorf("%s changed the lock's keys:\n%s\nwant\n%s", op, after, before)
				}
			}
			check("Release", s.Release(ctx, key, "h", 0))
			_, err = s.AcquireQueued(ctx, key, "c", ttl, 0, time.Minute)
			check("AcquireQueued", err)
			check("Dequeue", s.Dequeue(ctx, key, "b"))
			if g, err := s.Get(ctx, key); err != nil || g.Owner != "h" || g.Token != h.Token {
				t.Errorf("Get after the refused calls: %+v, %v; want h's lease, token %d", g, err, h.Token)
			}
		})
	}
}

// forger returns the conformance suite's Harness.Forge for stores on
// agent a: it writes each forgery with a client of the agent, locked by a
// session of its own (a minute), under the keys a store with the default
// prefix reads.
func forger(a *testenv.Consul) func(t testing.TB, key string, what backendtest.Forgery) {
	return func(t testing.TB, key string, what backendtest.Forgery) {
		t.Helper()
		s, err := consulbackend.New(config(a))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		c := client(t, a)
		id, _, err := c.Session().Create(&api.SessionEntry{TTL: "60s", Behavior: api.SessionBehaviorDelete}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Session().Destroy(id, nil) })
		var k, v string
		switch what {
		case backendtest.ForgedOwner:
			k, v = s.LeaseKey(key), fmt.Sprintf(`{"owner":%q,"token":1,"ttl_ms":60000}`, backendtest.ControlName)
		case backendtest.ForgedWaiterName:
			k, v = s.LineKey(key)+url.PathEscape(backendtest.ControlName), `{"ttl_ms":60000,"place_ms":30000,"order":1}`
		case backendtest.ForgedWaiterTTL:
			k, v = s.LineKey(key)+"forged", `{"ttl_ms":0,"place_ms":30000,"order":1}`
		case backendtest.ForgedWaiterGarbage:
			k, v = s.LineKey(key)+"forged", `garbage`
		case backendtest.ForgedMember:
			k, v = s.MemberKey(key, backendtest.ControlName), `{"identity":"forged","ttl_ms":60000}`
		default:
			t.Fatalf("forger: unknown forgery %d", what)
		}
		if ok, _, err := c.KV().Acquire(&api.KVPair{Key: k, Value: []byte(v), Session: id}, nil); err != nil || !ok {
			t.Fatalf("forger: writing %s: %v, %v", k, ok, err)
		}
	}
}

// A waiter's own place rewritten by another client as handed with a
// lease baton never grants (no token) ends the waiter's AwaitHandover
// with ErrCorrupt naming the place; it used to return that lease, token
// 0, as the waiter's.
func TestForgedHandedPlace(t *testing.T) {
	a := testenv.NewConsul(t)
	s := newStore(t, a)
	ctx := ctxT(t)
	const key, ttl = "forged-handed", 10 * time.Second
	if _, err := s.Acquire(ctx, key, "h", ttl, 0); err != nil {
		t.Fatal(err)
	}
	join(t, s, key, "a", ttl)
	join(t, s, key, "w", ttl)
	kv := client(t, a).KV()
	p, _, err := kv.Get(s.LineKey(key)+"w", nil)
	if err != nil || p == nil || p.Session == "" {
		t.Fatalf("w's place: %+v, %v", p, err)
	}
	p.Value = []byte(`{"ttl_ms":10000,"place_ms":5000,"handed":{"token":0,"session":"x"}}`)
	if _, err := kv.Put(p, nil); err != nil {
		t.Fatal(err)
	}
	l, ok, err := s.AwaitHandover(ctx, key, "w", 5*time.Second)
	if !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), s.LineKey(key)) {
		t.Fatalf("w's AwaitHandover with its place forged handed: %+v, %v, %v; want ErrCorrupt naming the place", l, ok, err)
	}
}
