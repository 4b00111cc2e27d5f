package backendtest

import (
	"errors"
	"strings"
	"testing"

	"github.com/baton-go/baton/backend"
)

// Forgery is a kind of data that Harness.Forge writes into the store
// past the store's own checks, as another client of its server could.
type Forgery int

const (
	// ForgedOwner is a lease on the key, held for a minute (token 1 or
	// any the store's shape allows), whose owner is ControlName.
	ForgedOwner Forgery = iota
	// ForgedWaiterName is a live place first in the key's line, asking
	// for a lease of a minute with floor 0, whose waiter is ControlName.
	ForgedWaiterName
	// ForgedWaiterTTL is a live place first in the key's line, of a
	// waiter named "forged", asking for a lease of ttl 0.
	ForgedWaiterTTL
	// ForgedWaiterGarbage is a live place first in the key's line, of a
	// waiter named "forged", whose request is not in the store's shape
	// at all (the text "garbage" where the store keeps its request).
	ForgedWaiterGarbage
	// ForgedMember is a live member of the group named by the key, for a
	// minute, whose name is ControlName and identity "forged".
	ForgedMember
)

// ControlName is the name the forgeries give an owner, a waiter or a
// member: a terminal escape sequence (clear the screen, red), a newline
// and a bell, which a store must never hand back as read.
const ControlName = "\x1b[2J\x1b[31mforged\nname\a"

// forgedCases are the subtests of Harness.Forge, skipped without it.
func (s *suite) forgedCases() []testCase {
	return []testCase{
		{"ForgedOwner", s.testForgedOwner},
		{"ForgedLine", s.testForgedLine},
		{"ForgedMember", s.testForgedMember},
	}
}

// forge writes what for key through Harness.Forge, or skips t.
func (s *suite) forge(t *testing.T, key string, what Forgery) {
	t.Helper()
	if s.h.Forge == nil {
		t.Skip("Harness.Forge is nil: the store's data cannot be forged")
	}
	s.h.Forge(t, key, what)
}

// checkCorrupt fails t unless err wraps ErrCorrupt, names key and quotes
// the stored text (no control character of ControlName in it raw).
func checkCorrupt(t testing.TB, what string, err error, key string) {
	t.Helper()
	if !errors.Is(err, backend.ErrCorrupt) {
		t.Errorf("%s: %v; want an error wrapping ErrCorrupt", what, err)
		return
	}
	if msg := err.Error(); !strings.Contains(msg, key) || strings.ContainsAny(msg, "\x1b\n\a") {
		t.Errorf("%s: %q; want the error to name %q and quote what the store holds", what, msg, key)
	}
}

// A lease whose owner holds control characters is never returned as
// read: Get, Acquire, Release and Leases fail with ErrCorrupt naming the
// key, the owner quoted.
func (s *suite) testForgedOwner(t *testing.T) {
	ctx := testCtx(t)
	key := s.key("forged-owner")
	s.forge(t, key, ForgedOwner)
	st := s.store(t)
	_, err := st.Get(ctx, key)
	checkCorrupt(t, "Get of a forged lease", err, key)
	_, err = st.Acquire(ctx, key, "me", longTTL, 0)
	checkCorrupt(t, "Acquire of a forged lease", err, key)
	checkCorrupt(t, "Release of a forged lease", st.Release(ctx, key, "me", 0), key)
	if in, ok := st.(backend.Inspector); ok {
		_, err = in.Leases(ctx, key)
		checkCorrupt(t, "Leases with a forged lease", err, key)
	}
}

// A place forged first in a lock's line (a waiter named with control
// characters, a ttl of 0, garbage) makes the holder's Release, another
// owner's try (AcquireQueued with patience 0), a waiter's Dequeue, and
// Break where the store has it, fail with ErrCorrupt naming the key,
// and changes nothing: the lock stays held by its owner under its token,
// and the other waiter is still in line behind it (Leases, where the
// store lists leases, fails the same way). An owner that joins the line
// of the held key fails the same way or, as a store need not read the
// line then (backend.Queue), is refused as held.
func (s *suite) testForgedLine(t *testing.T) {
	for _, c := range []struct {
		name string
		what Forgery
	}{{"Name", ForgedWaiterName}, {"TTL", ForgedWaiterTTL}, {"Garbage", ForgedWaiterGarbage}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := testCtx(t)
			q := s.queue(t)
			key := s.key("forged-line", c.name)
			held := s.acquireQueued(t, ctx, q, key, "h", longTTL, 0, waitPatience)
			_, err := q.AcquireQueued(ctx, key, "a", longTTL, 0, waitPatience)
			checkHeldBy(t, "a's AcquireQueued of the held key", err, held, longTTL)
			s.forge(t, key, c.what)

			checkCorrupt(t, "h's Release with a forged place in line", q.Release(ctx, key, "h", 0), key)
			_, err = q.AcquireQueued(ctx, key, "b", longTTL, 0, 0)
			checkCorrupt(t, "b's try with a forged place in line", err, key)
			_, err = q.AcquireQueued(ctx, key, "b", longTTL, 0, waitPatience)
			if !errors.Is(err, backend.ErrHeld) {
				checkCorrupt(t, "b's AcquireQueued with a forged place in line", err, key)
			} else {
				checkHeldBy(t, "b's AcquireQueued with a forged place in line", err, held, longTTL)
			}
			checkCorrupt(t, "a's Dequeue with a forged place in line", q.Dequeue(ctx, key, "a"), key)
			if in, ok := q.(backend.Inspector); ok {
				_, err = in.Leases(ctx, key)
				checkCorrupt(t, "Leases with a forged place in line", err, key)
			}
			if b, ok := q.(backend.Breaker); ok {
				_, err = b.Break(ctx, key, "h", held.Token)
				checkCorrupt(t, "Break with a forged place in line", err, key)
			}
			if l, err := q.Get(ctx, key); err != nil || l.Owner != "h" || l.Token != held.Token {
				t.Errorf("Get after the refused calls: %+v, %v; want h's lease, token %d, unchanged", l, err, held.Token)
			}
			if _, err := q.Renew(ctx, key, "h", longTTL); err != nil {
				t.Errorf("h's Renew after the refused release: %v; want h to hold the key still", err)
			}
		})
	}
}

// A member whose name holds control characters is never returned as
// read: Members fails with ErrCorrupt naming the group.
func (s *suite) testForgedMember(t *testing.T) {
	ctx := testCtx(t)
	reg := s.registry(t)
	group := backend.AppKey(keyTenant, s.app+"-forged", "members")
	s.forge(t, group, ForgedMember)
	_, err := reg.Members(ctx, group)
	checkCorrupt(t, "Members with a forged member", err, group)
}
