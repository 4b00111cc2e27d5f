package consulbackend_test

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

// A holder handed the key with fewer than two waiters named behind it
// reads the line while it holds the key, not when it releases it: its
// release is one transaction, with no read between the holder's section
// and the next holder's grant. The read is used only while nothing it
// relies on changed: a waiter that joins after it is not passed by.
func TestHandedHolderReadsAhead(t *testing.T) {
	a := testenv.NewConsul(t)
	const ttl = 10 * time.Second

	// handed has h hold key and w be handed it with nobody named behind
	// it, and returns once w's store knows the line behind w. With
	// behind, w waits on its place behind x, who is handed the key first;
	// otherwise w is first in line and reads the key as it starts to wait.
	// before runs between the handover to w and w's wait.
	handed := func(t *testing.T, s, ws *consulbackend.Store, key string, behind bool, before func()) backend.Lease {
		t.Helper()
		if _, err := s.Acquire(ctxT(t), key, "h", ttl, 0); err != nil {
			t.Fatal(err)
		}
		from := "h"
		if behind {
			join(t, s, key, "x", ttl)
		}
		join(t, ws, key, "w", ttl)
		if behind {
			if err := s.Release(ctxT(t), key, "h", 0); err != nil {
				t.Fatal(err)
			}
			awaitHanded(t, s, key, "x", "x's AwaitHandover")
			from = "x"
		}
		if err := s.Release(ctxT(t), key, from, 0); err != nil { // nobody behind w
			t.Fatal(err)
		}
		before()
		l := awaitHanded(t, ws, key, "w", "w's AwaitHandover")
		if behind && !consulbackend.AwaitLookAhead(ws, key) {
			t.Fatalf("w was handed the key with nobody named behind it, and its store did not read the line ahead")
		}
		return l
	}

	// release releases w's lease from ws, counted by c, and returns the
	// requests it sent besides session creates (its store's first grant
	// also makes its keeper of fencing counters), and the reads among
	// them.
	release := func(t *testing.T, ws *consulbackend.Store, c *sessionWrites, key string) (sent, reads int64) {
		t.Helper()
		before, read, made := c.requests.Load(), c.reads.Load(), c.created.Load()
		if err := ws.Release(ctxT(t), key, "w", 0); err != nil {
			t.Fatal(err)
		}
		return c.requests.Load() - before - (c.created.Load() - made), c.reads.Load() - read
	}

	// bAfter checks that b is handed key after w, whose lease was lw.
	bAfter := func(t *testing.T, s *consulbackend.Store, key string, lw backend.Lease, what string) {
		t.Helper()
		if lb := awaitHanded(t, s, key, "b", what); lb.Token <= lw.Token {
			t.Errorf("b's token %d after w's %d; want it larger", lb.Token, lw.Token)
		}
	}

	t.Run("WaiterJoinedSince", func(t *testing.T) {
		s := newStore(t, a)
		ws, c := countingStore(t, a)
		const key = "ahead-joined-since"
		lw := handed(t, s, ws, key, true, func() { join(t, s, key, "b", ttl) })
		if n, r := release(t, ws, c, key); n != 1 || r != 0 {
			t.Errorf("w's release sent %d requests besides session creates, %d of them reads; want 1, the handover to b, without a read", n, r)
		}
		bAfter(t, s, key, lw, "b's AwaitHandover after w's release")
	})

	t.Run("NobodyInLine", func(t *testing.T) {
		s := newStore(t, a)
		ws, c := countingStore(t, a)
		const key = "ahead-nobody"
		handed(t, s, ws, key, true, func() {})
		if n, r := release(t, ws, c, key); n != 1 || r != 0 {
			t.Errorf("w's release with nobody in line sent %d requests, %d of them reads; want 1, without a read", n, r)
		}
		if _, err := s.Get(ctxT(t), key); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("Get after w's release: %v; want ErrNotFound", err)
		}
		// The release deleted w's place, marked handed, with the lease.
		left, _, err := client(t, a).KV().List(s.LineKey(key), nil)
		if err != nil || len(left) != 0 {
			t.Fatalf("the line after w's release: %d entries (%v); want none", len(left), err)
		}
		if l, err := s.AcquireQueued(ctxT(t), key, "next", ttl, 0, time.Minute); err != nil || l.Owner != "next" {
			t.Fatalf("AcquireQueued of the freed key: %+v, %v; want a grant", l, err)
		}
	})

	t.Run("JoinAfterTheRead", func(t *testing.T) {
		s, ws := newStore(t, a), newStore(t, a)
		const key = "ahead-join-after"
		lw := handed(t, s, ws, key, true, func() {})
		// The read ahead found nobody in line; b joins after it.
		join(t, s, key, "b", ttl)
		if err := ws.Release(ctxT(t), key, "w", 0); err != nil {
			t.Fatal(err)
		}
		bAfter(t, s, key, lw, "b's AwaitHandover: b joined after w's read ahead")
	})

	t.Run("FirstInLine", func(t *testing.T) {
		s := newStore(t, a)
		ws, c := countingStore(t, a)
		const key = "ahead-first"
		handed(t, s, ws, key, false, func() { join(t, s, key, "b", ttl) })
		if _, r := release(t, ws, c, key); r != 0 {
			t.Errorf("w's release read %d times; want 0: w's wait read the line as it started", r)
		}
		awaitHanded(t, s, key, "b", "b's AwaitHandover after w's release")
	})
}
