package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// restartTTL is the lease of the restart subtest: whole seconds, since
// Redis reports its uptime in whole seconds.
const restartTTL = time.Second

// testRestart restarts the store without its data (Harness.Restart) and
// checks what a brand-new client sees afterwards:
//
//   - a key whose lease the restart lost is granted to nobody before that
//     lease has ended, counted from the request that last renewed it, as
//     its holder counts; a key never granted before is treated the same,
//     since the store cannot tell the two apart;
//   - until then Acquire is refused with a *backend.HeldError that has
//     Recovering set, no owner and a positive TTL;
//   - the token then granted without a floor is above every earlier one,
//     and the key, granted since the restart, is not refused again;
//   - a service the store has never seen, of a tenant that has waited out
//     the guard since the restart, is new, not lost: its first grant is
//     at once (unless Harness.GuardPerService).
func (s *suite) testRestart(t *testing.T) {
	if s.h.Restart == nil {
		t.Skip("Harness.Restart is nil")
	}
	ctx := testCtx(t)
	st := s.store(t)
	key, fresh := s.key("restart", "held"), s.key("restart", "fresh")

	var last uint64
	for range 3 {
		last = s.acquire(t, ctx, st, key, "before", longTTL, 0).Token
		release(t, ctx, st, key, "before", 0)
	}
	last = s.acquire(t, ctx, st, key, "old", restartTTL, 0).Token
	sent := time.Now()
	if _, err := st.Renew(ctx, key, "old", restartTTL); err != nil {
		t.Fatalf("Renew(%q, old): %v", key, err)
	}

	s.h.Restart(t)
	st = s.store(t)
	for _, k := range []string{key, fresh} {
		l, recv := s.acquireRecovering(t, st, k, "new")
		if believed := sent.Add(restartTTL - s.slack); recv.Before(believed) {
			t.Errorf("after the restart, %q was granted %v after the old holder last renewed its lease of %v: the old holder may still believe in its lease (want no grant before %v)",
				k, recv.Sub(sent), restartTTL, restartTTL-s.slack)
		}
		if l.Token <= last {
			t.Errorf("after the restart, %q was granted token %d without a floor; want one above the %d granted before", k, l.Token, last)
		}
		release(t, ctx, st, k, "new", 0)
		l2 := s.acquire(t, ctx, st, k, "again", restartTTL, 0) // granted since: no guard
		if l2.Token <= l.Token {
			t.Errorf("after the restart, %q was granted token %d after %d", k, l2.Token, l.Token)
		}
		release(t, ctx, st, k, "again", 0)
	}
	if !s.h.GuardPerService {
		other := backend.AppKey(keyTenant, s.app+"-new", "lock", "restart")
		s.acquire(t, ctx, st, other, "new", restartTTL, 0)
		release(t, ctx, st, other, "new", 0)
	}
}

// acquireRecovering acquires key for owner with restartTTL, asking again
// while the store refuses it as recovering, and returns the lease and when
// its grant arrived. Every refusal must be a recovering HeldError.
func (s *suite) acquireRecovering(t *testing.T, st backend.Store, key, owner string) (backend.Lease, time.Time) {
	t.Helper()
	ctx := testCtx(t)
	deadline := time.Now().Add(waitTimeout)
	for {
		sent := time.Now()
		l, err := st.Acquire(ctx, key, owner, restartTTL, 0)
		recv := time.Now()
		if err == nil {
			s.checkGrant(t, "Acquire after the restart", l, key, owner, restartTTL, sent)
			return l, recv
		}
		var he *backend.HeldError
		if !errors.As(err, &he) || !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("Acquire(%q) after the restart: %v; want a grant or a *backend.HeldError with Recovering set", key, err)
		}
		if !he.Recovering || he.Holder.Owner != "" || he.Holder.TTL <= 0 {
			t.Fatalf("Acquire(%q) after the restart was refused with %+v (%v); want Recovering set, no owner and a positive TTL", key, *he, err)
		}
		if recv.After(deadline) {
			t.Fatalf("Acquire(%q) is still refused as recovering %v after the restart: %v", key, waitTimeout, err)
		}
		time.Sleep(min(he.Holder.TTL, pollEvery))
	}
}
