package backendtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// isInvalid fails t unless err wraps backend.ErrInvalidArgument.
func isInvalid(t testing.TB, what string, err error) {
	t.Helper()
	if !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("%s: err = %v; want an error wrapping backend.ErrInvalidArgument", what, err)
	}
}

// invalidKeys returns keys that every method must refuse, by what is wrong
// with them; most are built from valid, a usable key.
func invalidKeys(valid string) map[string]string {
	return map[string]string{
		"empty":              "",
		"space":              valid + " x",
		"tab":                valid + "\tx",
		"newline":            valid + "\n",
		"NUL":                valid + "\x00",
		"DEL":                valid + "\x7f",
		"invalid UTF-8":      valid + "\xff",
		"too long":           valid + strings.Repeat("k", backend.MaxKeyLen),
		"unbalanced {":       "{" + valid,
		"unbalanced }":       valid + "}",
		"two hash tags":      "{a}{b}:" + valid,
		"empty hash tag":     "{}" + valid,
		"closed before open": "}a{" + valid,
	}
}

// invalidOwners returns owners that every method must refuse, by what is
// wrong with them.
func invalidOwners() map[string]string {
	return map[string]string{
		"empty":         "",
		"space":         "an owner",
		"tab":           "owner\t1",
		"newline":       "owner\n",
		"NUL":           "owner\x00",
		"invalid UTF-8": "owner\xff",
		"too long":      strings.Repeat("o", backend.MaxOwnerLen+1),
	}
}

// invalidTTLs returns lease lengths that every method must refuse.
func (s *suite) invalidTTLs() []time.Duration {
	bad := []time.Duration{0, -time.Second, s.maxTTL() + time.Millisecond}
	if s.minTTL() > backend.MinTTL {
		bad = append(bad, s.minTTL()-time.Millisecond)
	}
	return bad
}

// invalidFloors returns fencing floors that every method must refuse.
func invalidFloors() []uint64 {
	return []uint64{backend.MaxToken, backend.MaxToken + 1, ^uint64(0)}
}

// testInvalidArguments calls every method with each kind of bad key,
// owner and duration and checks that each call is refused with
// ErrInvalidArgument and writes nothing: a free key stays free, a held
// lease stays as it was. It also checks that the limits themselves are
// accepted, so a store cannot pass by refusing too much. The bad values
// are checked against the backend package's validators first, so the
// suite and the package agree on what is bad.
func (s *suite) testInvalidArguments(t *testing.T) {
	ctx := testCtx(t)
	st := s.store(t)
	free := s.key("invalid-args", "free")
	bad := s.badArguments(t, free)
	bad.refusedOnFree(t, ctx, st, free)
	s.refusedOnHeld(t, ctx, st, s.key("invalid-args", "held"), bad)
	s.limitsAccepted(t, ctx, st, free)
}

// invalidArgsTTL is the lease length of testInvalidArguments' valid calls.
const invalidArgsTTL = 10 * time.Second

// badArgs are the bad values testInvalidArguments passes, by kind.
type badArgs struct {
	keys, owners map[string]string // by what is wrong with them
	ttls, keeps  []time.Duration
}

// badArguments returns the bad values of each kind, built around free, a
// usable key, after checking that the backend package's validators refuse
// the keys and owners too, so the suite and the package agree on what is
// bad.
func (s *suite) badArguments(t *testing.T, free string) badArgs {
	t.Helper()
	bad := badArgs{keys: invalidKeys(free), owners: invalidOwners(), ttls: s.invalidTTLs()}
	bad.keeps = []time.Duration{s.maxTTL() + time.Millisecond, 2 * s.maxTTL()}
	if s.minTTL() > backend.MinTTL {
		bad.keeps = append(bad.keeps, s.minTTL()-time.Millisecond)
	}
	for name, k := range bad.keys {
		if backend.ValidateKey(k) == nil {
			t.Fatalf("suite bug: backend.ValidateKey accepts the %s key %q", name, k)
		}
	}
	for name, o := range bad.owners {
		if backend.ValidateOwner(o) == nil {
			t.Fatalf("suite bug: backend.ValidateOwner accepts the %s owner %q", name, o)
		}
	}
	return bad
}

// refusedOnFree checks that every method refuses each bad key and owner,
// and Acquire each bad ttl and floor, and that free stays free.
func (bad badArgs) refusedOnFree(t *testing.T, ctx context.Context, st backend.Store, free string) {
	t.Helper()
	for name, k := range bad.keys {
		refusedKey(t, ctx, st, name, k)
	}
	for name, o := range bad.owners {
		_, err := st.Acquire(ctx, free, o, invalidArgsTTL, 0)
		isInvalid(t, "Acquire with a "+name+" owner", err)
		_, err = st.Renew(ctx, free, o, invalidArgsTTL)
		isInvalid(t, "Renew with a "+name+" owner", err)
		isInvalid(t, "Release with a "+name+" owner", st.Release(ctx, free, o, 0))
	}
	for _, d := range bad.ttls {
		_, err := st.Acquire(ctx, free, "owner", d, 0)
		isInvalid(t, fmt.Sprintf("Acquire with ttl %v", d), err)
	}
	for _, floor := range invalidFloors() {
		_, err := st.Acquire(ctx, free, "owner", invalidArgsTTL, floor)
		isInvalid(t, fmt.Sprintf("Acquire with floor %d", floor), err)
	}
	checkFree(t, ctx, st, free, "after the refused calls")
}

// refusedKey checks that every method refuses k, a key that is bad for
// the reason name.
func refusedKey(t *testing.T, ctx context.Context, st backend.Store, name, k string) {
	t.Helper()
	_, err := st.Acquire(ctx, k, "owner", invalidArgsTTL, 0)
	isInvalid(t, "Acquire with a "+name+" key", err)
	_, err = st.Renew(ctx, k, "owner", invalidArgsTTL)
	isInvalid(t, "Renew with a "+name+" key", err)
	isInvalid(t, "Release with a "+name+" key", st.Release(ctx, k, "owner", 0))
	_, err = st.Get(ctx, k)
	isInvalid(t, "Get with a "+name+" key", err)
	w, err := st.Watch(ctx, k)
	isInvalid(t, "Watch with a "+name+" key", err)
	if w != nil {
		w.Close()
	}
}

// refusedOnHeld checks that refused calls on heldKey, once held, leave its
// lease alone. A Renew with ttl 0 that reached the store would end the
// lease (Redis PEXPIRE 0 deletes the key).
func (s *suite) refusedOnHeld(t *testing.T, ctx context.Context, st backend.Store, heldKey string, bad badArgs) {
	t.Helper()
	const ttl = invalidArgsTTL
	sent := time.Now()
	l := s.acquire(t, ctx, st, heldKey, "owner", ttl, 0)
	for _, d := range bad.ttls {
		what := fmt.Sprintf("the owner's Renew with ttl %v", d)
		_, err := st.Renew(ctx, heldKey, "owner", d)
		isInvalid(t, what, err)
		s.checkHolder(t, ctx, st, "after "+what, l, ttl, sent)
	}
	for _, keep := range bad.keeps {
		what := fmt.Sprintf("the owner's Release with keepFor %v", keep)
		isInvalid(t, what, st.Release(ctx, heldKey, "owner", keep))
		s.checkHolder(t, ctx, st, "after "+what, l, ttl, sent)
	}
	for name, o := range bad.owners {
		what := "Release by a " + name + " owner"
		isInvalid(t, what, st.Release(ctx, heldKey, o, 0))
		s.checkHolder(t, ctx, st, "after "+what, l, ttl, sent)
	}
	r, err := st.Renew(ctx, heldKey, "owner", ttl)
	if err != nil {
		t.Fatalf("the owner's Renew after the refused calls: %v", err)
	}
	if r.Token != l.Token {
		t.Errorf("Renew changed the token from %d to %d", l.Token, r.Token)
	}
	release(t, ctx, st, heldKey, "owner", 0)
}

// limitsAccepted checks that the limits themselves are valid: a key of
// MaxKeyLen, an owner of MaxOwnerLen, the longest and shortest ttl and the
// longest keep time the store takes.
func (s *suite) limitsAccepted(t *testing.T, ctx context.Context, st backend.Store, free string) {
	t.Helper()
	long := s.key("invalid-args", "")
	long += strings.Repeat("k", backend.MaxKeyLen-len(long))
	owner := strings.Repeat("o", backend.MaxOwnerLen)
	for _, c := range []struct {
		key, owner string
		ttl        time.Duration
		what       string
	}{
		{long, "owner", invalidArgsTTL, fmt.Sprintf("a key of MaxKeyLen (%d) bytes", backend.MaxKeyLen)},
		{free, owner, invalidArgsTTL, fmt.Sprintf("an owner of MaxOwnerLen (%d) bytes", backend.MaxOwnerLen)},
		{free, "owner", s.maxTTL(), fmt.Sprintf("a ttl of the longest the store takes (%v)", s.maxTTL())},
	} {
		acquireRenewRelease(t, ctx, st, c.key, c.owner, c.ttl, c.what)
	}
	if _, err := st.Acquire(ctx, free, "owner", s.minTTL(), 0); err != nil {
		t.Errorf("Acquire with a ttl of the shortest the store takes (%v): %v", s.minTTL(), err)
	}
	pollUntilFree(t, ctx, st, free)
	s.acquire(t, ctx, st, free, "owner", invalidArgsTTL, 0)
	if err := st.Release(ctx, free, "owner", s.maxTTL()); err != nil {
		t.Errorf("Release with keepFor of the longest the store takes (%v): %v", s.maxTTL(), err)
	}
	if err := st.Release(ctx, free, "owner", 0); err != nil {
		t.Errorf("Release(keepFor 0) of a kept lease: %v", err)
	}
	checkFree(t, ctx, st, free, "at the end")
}

// acquireRenewRelease checks that Acquire, Renew and Release accept key,
// owner and ttl, the limit what names.
func acquireRenewRelease(t *testing.T, ctx context.Context, st backend.Store, key, owner string, ttl time.Duration, what string) {
	t.Helper()
	if _, err := st.Acquire(ctx, key, owner, ttl, 0); err != nil {
		t.Errorf("Acquire with %s: %v", what, err)
		return
	}
	if _, err := st.Renew(ctx, key, owner, ttl); err != nil {
		t.Errorf("Renew with %s: %v", what, err)
	}
	if err := st.Release(ctx, key, owner, 0); err != nil {
		t.Errorf("Release with %s: %v", what, err)
	}
}

// testEndedContext calls every method with a cancelled context and with
// one whose deadline has passed, and checks that each call fails with the
// context's error and writes nothing.
func (s *suite) testEndedContext(t *testing.T) {
	const ttl = 10 * time.Second
	ctx := testCtx(t)
	st := s.store(t)
	free := s.key("ended-context", "free")
	heldKey := s.key("ended-context", "held")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancel2 := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancel2()

	sent := time.Now()
	l := s.acquire(t, ctx, st, heldKey, "owner", ttl, 0)
	for _, c := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"cancelled", cancelled, context.Canceled},
		{"expired", expired, context.DeadlineExceeded},
	} {
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, c.want) {
				t.Errorf("%s with a %s context: err = %v; want an error wrapping %v", op, c.name, err, c.want)
			}
		}
		_, err := st.Acquire(c.ctx, free, "owner", ttl, 0)
		check("Acquire", err)
		checkFree(t, ctx, st, free, fmt.Sprintf("after Acquire with a %s context", c.name))
		_, err = st.Get(c.ctx, heldKey)
		check("Get", err)
		w, err := st.Watch(c.ctx, heldKey)
		check("Watch", err)
		if w != nil {
			w.Close()
		}
		_, err = st.Renew(c.ctx, heldKey, "owner", time.Millisecond)
		check("Renew", err)
		s.checkHolder(t, ctx, st, fmt.Sprintf("after Renew with a %s context", c.name), l, ttl, sent)
		check("Release", st.Release(c.ctx, heldKey, "owner", 0))
		s.checkHolder(t, ctx, st, fmt.Sprintf("after Release with a %s context", c.name), l, ttl, sent)
		check("Release with keepFor", st.Release(c.ctx, heldKey, "owner", time.Millisecond))
		s.checkHolder(t, ctx, st, fmt.Sprintf("after Release(keepFor) with a %s context", c.name), l, ttl, sent)
		check("WaitFree", backend.WaitFree(c.ctx, st, heldKey))
	}
	release(t, ctx, st, heldKey, "owner", 0)
}
