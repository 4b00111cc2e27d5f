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
	const ttl = 10 * time.Second
	ctx := testCtx(t)
	st := s.store(t)
	free := s.key("invalid-args", "free")
	heldKey := s.key("invalid-args", "held")

	badKeys, badOwners, badTTLs := invalidKeys(free), invalidOwners(), s.invalidTTLs()
	badKeeps := []time.Duration{s.maxTTL() + time.Millisecond, 2 * s.maxTTL()}
	if s.minTTL() > backend.MinTTL {
		badKeeps = append(badKeeps, s.minTTL()-time.Millisecond)
	}

	for name, k := range badKeys {
		if backend.ValidateKey(k) == nil {
			t.Fatalf("suite bug: backend.ValidateKey accepts the %s key %q", name, k)
		}
	}
	for name, o := range badOwners {
		if backend.ValidateOwner(o) == nil {
			t.Fatalf("suite bug: backend.ValidateOwner accepts the %s owner %q", name, o)
		}
	}

	for name, k := range badKeys {
		_, err := st.Acquire(ctx, k, "owner", ttl, 0)
		isInvalid(t, "Acquire with a "+name+" key", err)
		_, err = st.Renew(ctx, k, "owner", ttl)
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
	for name, o := range badOwners {
		_, err := st.Acquire(ctx, free, o, ttl, 0)
		isInvalid(t, "Acquire with a "+name+" owner", err)
		_, err = st.Renew(ctx, free, o, ttl)
		isInvalid(t, "Renew with a "+name+" owner", err)
		isInvalid(t, "Release with a "+name+" owner", st.Release(ctx, free, o, 0))
	}
	for _, d := range badTTLs {
		_, err := st.Acquire(ctx, free, "owner", d, 0)
		isInvalid(t, fmt.Sprintf("Acquire with ttl %v", d), err)
	}
	for _, floor := range invalidFloors() {
		_, err := st.Acquire(ctx, free, "owner", ttl, floor)
		isInvalid(t, fmt.Sprintf("Acquire with floor %d", floor), err)
	}
	checkFree(t, ctx, st, free, "after the refused calls")

	// Refused calls on a held key leave its lease alone. A Renew with
	// ttl 0 that reached the store would end the lease (Redis PEXPIRE 0
	// deletes the key).
	sent := time.Now()
	l := s.acquire(t, ctx, st, heldKey, "owner", ttl, 0)
	for _, d := range badTTLs {
		what := fmt.Sprintf("the owner's Renew with ttl %v", d)
		_, err := st.Renew(ctx, heldKey, "owner", d)
		isInvalid(t, what, err)
		s.checkHolder(t, ctx, st, "after "+what, l, ttl, sent)
	}
	for _, keep := range badKeeps {
		what := fmt.Sprintf("the owner's Release with keepFor %v", keep)
		isInvalid(t, what, st.Release(ctx, heldKey, "owner", keep))
		s.checkHolder(t, ctx, st, "after "+what, l, ttl, sent)
	}
	for name, o := range badOwners {
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

	// The limits themselves are valid.
	long := s.key("invalid-args", "")
	long += strings.Repeat("k", backend.MaxKeyLen-len(long))
	owner := strings.Repeat("o", backend.MaxOwnerLen)
	for _, c := range []struct {
		key, owner string
		ttl        time.Duration
		what       string
	}{
		{long, "owner", ttl, fmt.Sprintf("a key of MaxKeyLen (%d) bytes", backend.MaxKeyLen)},
		{free, owner, ttl, fmt.Sprintf("an owner of MaxOwnerLen (%d) bytes", backend.MaxOwnerLen)},
		{free, "owner", s.maxTTL(), fmt.Sprintf("a ttl of the longest the store takes (%v)", s.maxTTL())},
	} {
		if _, err := st.Acquire(ctx, c.key, c.owner, c.ttl, 0); err != nil {
			t.Errorf("Acquire with %s: %v", c.what, err)
			continue
		}
		if _, err := st.Renew(ctx, c.key, c.owner, c.ttl); err != nil {
			t.Errorf("Renew with %s: %v", c.what, err)
		}
		if err := st.Release(ctx, c.key, c.owner, 0); err != nil {
			t.Errorf("Release with %s: %v", c.what, err)
		}
	}
	if _, err := st.Acquire(ctx, free, "owner", s.minTTL(), 0); err != nil {
		t.Errorf("Acquire with a ttl of the shortest the store takes (%v): %v", s.minTTL(), err)
	}
	pollUntilFree(t, ctx, st, free)
	l = s.acquire(t, ctx, st, free, "owner", ttl, 0)
	if err := st.Release(ctx, free, "owner", s.maxTTL()); err != nil {
		t.Errorf("Release with keepFor of the longest the store takes (%v): %v", s.maxTTL(), err)
	}
	if err := st.Release(ctx, free, "owner", 0); err != nil {
		t.Errorf("Release(keepFor 0) of a kept lease: %v", err)
	}
	checkFree(t, ctx, st, free, "at the end")
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
