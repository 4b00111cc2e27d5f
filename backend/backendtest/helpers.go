package backendtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

const (
	// keyTenant is the tenant part of every key the suite uses.
	keyTenant = "conf"

	// waitTimeout bounds every wait for something that must happen: a
	// signal, a lease running out, WaitFree returning. It is far longer
	// than any TTL the suite uses, so reaching it means the event was
	// missed, not that the machine was slow.
	waitTimeout = 10 * time.Second

	// testTimeout bounds the store calls of one subtest.
	testTimeout = 2 * time.Minute

	// pollEvery paces loops that watch a lease run out. It is pacing, not
	// proof: every conclusion comes from the answers.
	pollEvery = 10 * time.Millisecond

	// slowAttempts is how often a timing-sensitive check is tried on a
	// fresh key before a machine too slow to judge it fails the test.
	slowAttempts = 3

	// longTTL is a lease that outlives any subtest.
	longTTL = 30 * time.Second

	// maxClockSkew is how far the store's clock may be behind the
	// suite's when the suite checks that tokens come from a clock.
	maxClockSkew = time.Hour
)

// suite is the state of one Run.
type suite struct {
	h     Harness
	app   string
	slack time.Duration
}

// key returns a key of this run; parts name the subtest and, where a
// subtest needs several keys, which one.
func (s *suite) key(parts ...string) string {
	return backend.AppKey(keyTenant, s.app, append([]string{"lock"}, parts...)...)
}

// store opens a new client of the store under test.
func (s *suite) store(t testing.TB) backend.Store {
	t.Helper()
	st := s.h.NewStore(t)
	if st == nil {
		t.Fatal("backendtest: Harness.NewStore returned nil")
	}
	return st
}

// testCtx returns the context of a subtest's store calls: it ends with
// the subtest or after testTimeout.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// surelyLive reports whether an answer received at recv was produced
// while a lease whose length d was set by a request sent at sent must
// still have been running: the store set the length after sent, so the
// lease cannot end before sent+d, and it answered before recv.
func (s *suite) surelyLive(sent time.Time, d time.Duration, recv time.Time) bool {
	return recv.Before(sent.Add(d - s.slack))
}

// checkNotEarly fails t if a lease whose length d was set by a request
// sent at sent was seen over by an answer received at recv, earlier than
// the lease could have ended.
func (s *suite) checkNotEarly(t testing.TB, what string, recv, sent time.Time, d time.Duration) {
	t.Helper()
	if s.surelyLive(sent, d, recv) {
		t.Errorf("%s: the lease was over %v after the request that set its length of %v was sent; it cannot end before %v",
			what, recv.Sub(sent), d, d-s.slack)
	}
}

// checkTTL fails t unless got is a plausible remaining time of a lease
// whose length d was set by a request sent at sent, as reported by an
// answer received just now: at most d, and at least d less the time that
// has passed since sent.
func (s *suite) checkTTL(t testing.TB, what string, got, d time.Duration, sent time.Time) {
	t.Helper()
	elapsed := time.Since(sent)
	if got > d {
		t.Errorf("%s: TTL %v is longer than the %v the lease was given", what, got, d)
	}
	if low := d - elapsed - s.slack; got < low {
		t.Errorf("%s: TTL %v, but the lease was given %v only %v ago (want at least %v)", what, got, d, elapsed, low)
	}
}

// acquire acquires key for owner and fails t unless the store grants it a
// well-formed lease.
func (s *suite) acquire(t testing.TB, ctx context.Context, st backend.Store, key, owner string, ttl time.Duration, floor uint64) backend.Lease {
	t.Helper()
	sent := time.Now()
	l, err := st.Acquire(ctx, key, owner, ttl, floor)
	if err != nil {
		t.Fatalf("Acquire(%q, %q, %v, floor %d): %v", key, owner, ttl, floor, err)
	}
	s.checkGrant(t, "Acquire", l, key, owner, ttl, sent)
	return l
}

// checkGrant checks the lease returned by a successful Acquire or Renew
// sent at sent with ttl.
func (s *suite) checkGrant(t testing.TB, what string, l backend.Lease, key, owner string, ttl time.Duration, sent time.Time) {
	t.Helper()
	if l.Key != key || l.Owner != owner {
		t.Errorf("%s: lease on %q for %q, want %q for %q", what, l.Key, l.Owner, key, owner)
	}
	if l.Token == 0 {
		t.Errorf("%s: lease on %q has token 0; tokens are positive", what, key)
	}
	s.checkTTL(t, what, l.TTL, ttl, sent)
}

// release releases owner's lease on key and fails t on error.
func release(t testing.TB, ctx context.Context, st backend.Store, key, owner string, keepFor time.Duration) {
	t.Helper()
	if err := st.Release(ctx, key, owner, keepFor); err != nil {
		t.Fatalf("Release(%q, %q, keepFor %v): %v", key, owner, keepFor, err)
	}
}

// get returns the lease on key and fails t if there is none.
func get(t testing.TB, ctx context.Context, st backend.Store, key string) backend.Lease {
	t.Helper()
	l, err := st.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if l.Key != key {
		t.Errorf("Get(%q) returned a lease on %q", key, l.Key)
	}
	return l
}

// checkFree fails t unless key is free.
func checkFree(t testing.TB, ctx context.Context, st backend.Store, key, what string) {
	t.Helper()
	l, err := st.Get(ctx, key)
	switch {
	case err == nil:
		t.Fatalf("%s: key %q is held by %q (token %d) for %v; want it free", what, key, l.Owner, l.Token, l.TTL)
	case !errors.Is(err, backend.ErrNotFound):
		t.Fatalf("%s: Get(%q): %v; want an error wrapping backend.ErrNotFound", what, key, err)
	}
}

// checkHolder fails t unless the lease on key is still want's, with a TTL
// that fits a length d set by a request sent at sent: neither shortened
// nor extended by what happened since.
func (s *suite) checkHolder(t testing.TB, ctx context.Context, st backend.Store, what string, want backend.Lease, d time.Duration, sent time.Time) {
	t.Helper()
	l, err := st.Get(ctx, want.Key)
	if err != nil {
		t.Fatalf("%s: Get(%q): %v; want the lease of %q (token %d)", what, want.Key, err, want.Owner, want.Token)
	}
	if l.Owner != want.Owner || l.Token != want.Token || l.Key != want.Key {
		t.Fatalf("%s: key %q is held by %q (token %d); want %q (token %d)", what, want.Key, l.Owner, l.Token, want.Owner, want.Token)
	}
	s.checkTTL(t, what, l.TTL, d, sent)
}

// heldError returns err as a *backend.HeldError and fails t if it is not
// one.
func heldError(t testing.TB, what string, err error) *backend.HeldError {
	t.Helper()
	var he *backend.HeldError
	if !errors.As(err, &he) || !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("%s: err = %v; want a *backend.HeldError", what, err)
	}
	return he
}

// checkHeldBy fails t unless err is a *backend.HeldError naming holder's
// lease, with a TTL in (0, max].
func checkHeldBy(t testing.TB, what string, err error, holder backend.Lease, max time.Duration) {
	t.Helper()
	h := heldError(t, what, err).Holder
	if h.Key != holder.Key || h.Owner != holder.Owner || h.Token != holder.Token {
		t.Errorf("%s: HeldError names %q's lease on %q (token %d); want %q's on %q (token %d)",
			what, h.Owner, h.Key, h.Token, holder.Owner, holder.Key, holder.Token)
	}
	if h.TTL <= 0 || h.TTL > max {
		t.Errorf("%s: HeldError gives the holder %v left; want a TTL in (0, %v]", what, h.TTL, max)
	}
}

// checkNotHeld fails t unless err is a *backend.NotHeldError for caller on
// key naming holder as the lease on the key now (a zero holder: free).
func checkNotHeld(t testing.TB, what string, err error, key, caller string, holder backend.Lease) {
	t.Helper()
	var ne *backend.NotHeldError
	if !errors.As(err, &ne) || !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("%s: err = %v; want a *backend.NotHeldError", what, err)
	}
	if ne.Key != key || ne.Owner != caller {
		t.Errorf("%s: NotHeldError is about %q on %q; want %q on %q", what, ne.Owner, ne.Key, caller, key)
	}
	h := ne.Holder
	switch {
	case holder.Owner == "" && h.Owner != "":
		t.Errorf("%s: NotHeldError names holder %q (token %d) of a free key", what, h.Owner, h.Token)
	case holder.Owner != "" && (h.Owner != holder.Owner || h.Token != holder.Token || h.Key != key):
		t.Errorf("%s: NotHeldError names %q's lease on %q (token %d); want %q's on %q (token %d)",
			what, h.Owner, h.Key, h.Token, holder.Owner, key, holder.Token)
	}
}

// pollUntilFree reads key until it is free and returns when the answer
// that showed it free arrived. It fails t if the key is still held after
// waitTimeout.
func pollUntilFree(t testing.TB, ctx context.Context, st backend.Store, key string) time.Time {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		l, err := st.Get(ctx, key)
		recv := time.Now()
		if errors.Is(err, backend.ErrNotFound) {
			return recv
		}
		if err != nil {
			t.Fatalf("Get(%q) while waiting for it to be free: %v", key, err)
		}
		if recv.After(deadline) {
			t.Fatalf("key %q is still held by %q (token %d, %v left) after %v", key, l.Owner, l.Token, l.TTL, waitTimeout)
		}
		time.Sleep(pollEvery)
	}
}

// pollAcquire tries to acquire key until the store grants it, and returns
// the lease with the moment its grant arrived. Every refusal must be a
// *backend.HeldError. It fails t if the key is still held after
// waitTimeout.
func (s *suite) pollAcquire(t testing.TB, ctx context.Context, st backend.Store, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, time.Time) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		sent := time.Now()
		l, err := st.Acquire(ctx, key, owner, ttl, floor)
		recv := time.Now()
		if err == nil {
			s.checkGrant(t, "Acquire", l, key, owner, ttl, sent)
			return l, recv
		}
		he := heldError(t, "Acquire while waiting for the key", err)
		if recv.After(deadline) {
			t.Fatalf("key %q is still held by %q (token %d, %v left) after %v", key, he.Holder.Owner, he.Holder.Token, he.Holder.TTL, waitTimeout)
		}
		time.Sleep(pollEvery)
	}
}

// retrySlow runs try, which checks timing-sensitive behaviour on the key
// it is given, until one attempt could be judged. try returns false when
// the machine was too slow for its observations to prove anything (a
// lease ran out before try could look at it); it fails t itself when the
// store misbehaved.
func (s *suite) retrySlow(t *testing.T, name string, try func(key string) (judged bool)) {
	t.Helper()
	for attempt := range slowAttempts {
		if try(s.key(name, "attempt", string(rune('a'+attempt)))) {
			return
		}
		if t.Failed() {
			return
		}
		t.Logf("attempt %d was too slow to judge; trying again on a new key", attempt+1)
	}
	t.Fatalf("%d attempts were too slow to judge: store calls take longer than the short leases this check needs", slowAttempts)
}
