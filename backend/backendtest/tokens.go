package backendtest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// testTokensIncrease grants one key over and over, ending each grant a
// different way (release, release by another owner, expiry, a keep
// time), and checks that every grant's token is above all earlier ones.
func (s *suite) testTokensIncrease(t *testing.T) {
	const short = 150 * time.Millisecond
	ctx := testCtx(t)
	a, b := s.store(t), s.store(t)
	key := s.key("tokens-increase")

	var tokens []uint64
	granted := func(how string, l backend.Lease) {
		t.Helper()
		if n := len(tokens); n > 0 && l.Token <= tokens[n-1] {
			t.Errorf("%s: token %d is not above the previous grant's; tokens so far: %v", how, l.Token, tokens)
		}
		tokens = append(tokens, l.Token)
	}

	for i, owner := range []string{"a", "b", "a", "a"} {
		st := a
		if i%2 == 1 {
			st = b
		}
		granted("grant after release", s.acquire(t, ctx, st, key, owner, longTTL, 0))
		release(t, ctx, st, key, owner, 0)
	}

	granted("grant before expiry", s.acquire(t, ctx, a, key, "expires", short, 0))
	pollUntilFree(t, ctx, b, key)
	granted("grant after expiry", s.acquire(t, ctx, b, key, "keeps", longTTL, 0))
	release(t, ctx, b, key, "keeps", short)
	l, _ := s.pollAcquire(t, ctx, a, key, "after-keep", longTTL, 0)
	granted("grant after a keep time", l)
	release(t, ctx, a, key, "after-keep", 0)
	granted("grant after all of them", s.acquire(t, ctx, b, key, "last", longTTL, 0))
	release(t, ctx, b, key, "last", 0)
}

// testTokensPerKey checks that each key's tokens increase whatever
// happens to other keys, that they come from a clock (a fresh key's first
// token is at least the suite's clock in microseconds, give or take
// maxClockSkew), and that a floor on one key does not raise another's.
func (s *suite) testTokensPerKey(t *testing.T) {
	ctx := testCtx(t)
	st := s.store(t)
	k1, k2 := s.key("tokens-per-key", "one"), s.key("tokens-per-key", "two")

	last := map[string]uint64{}
	cycle := func(key string, floor uint64) uint64 {
		t.Helper()
		sent := time.Now()
		l := s.acquire(t, ctx, st, key, "owner", longTTL, floor)
		if l.Token <= last[key] {
			t.Errorf("grant of %q has token %d, not above its earlier %d", key, l.Token, last[key])
		}
		if last[key] == 0 {
			if low := sent.Add(-maxClockSkew).UnixMicro(); l.Token < uint64(low) {
				t.Errorf("the first token of the fresh key %q is %d, below the clock in microseconds (%d, less %v): tokens must come from the store's clock", key, l.Token, sent.UnixMicro(), maxClockSkew)
			}
		}
		last[key] = l.Token
		release(t, ctx, st, key, "owner", 0)
		return l.Token
	}
	cycle(k1, 0)
	cycle(k1, 0)
	cycle(k2, 0)
	cycle(k1, 0)
	cycle(k2, 0)
	far := aheadOfClock()
	if tok := cycle(k1, far); tok != far+1 {
		t.Errorf("Acquire(floor %d) of %q granted token %d; want %d", uint64(far), k1, tok, uint64(far+1))
	}
	if tok := cycle(k2, 0); tok >= far {
		t.Errorf("key %q got token %d after a floor of %d on another key: counters must be per key", k2, tok, uint64(far))
	}
}

// testTokenFloor checks the floor of Acquire: the token is
// max(counter, floor, clock)+1, with floors below the clock, above it,
// equal to the counter, and up to just below the largest token the store
// accepts (backend.TokenLimit of its clock).
func (s *suite) testTokenFloor(t *testing.T) {
	ahead, top := aheadOfClock(), nearTokenLimit()
	ctx := testCtx(t)
	st := s.store(t)
	key := s.key("token-floor")

	first := s.acquire(t, ctx, st, key, "owner", longTTL, 5)
	if first.Token <= 5 {
		t.Errorf("a fresh key with floor 5 was granted token %d", first.Token)
	}
	release(t, ctx, st, key, "owner", 0)
	for _, c := range []struct {
		floor, want uint64
		why         string
	}{
		{ahead, ahead + 1, "a floor above the clock"},
		{5, ahead + 2, "a floor below the counter"},
		{ahead + 2, ahead + 3, "a floor equal to the counter"},
		{top, top + 1, "a floor near the limit"},
		{0, top + 2, "no floor after it"},
		{top + 2, top + 3, "a floor that near the limit equal to the counter"},
	} {
		l := s.acquire(t, ctx, st, key, "owner", longTTL, c.floor)
		if l.Token != c.want {
			t.Errorf("%s: Acquire(floor %d) granted token %d; want %d", c.why, c.floor, l.Token, c.want)
		}
		release(t, ctx, st, key, "owner", 0)
	}
	fresh := s.acquire(t, ctx, st, s.key("token-floor", "other"), "owner", longTTL, 0)
	if fresh.Token >= ahead {
		t.Errorf("the first token of a fresh key is %d after floors on another key; want one from the clock, below %d", fresh.Token, uint64(ahead))
	}
	release(t, ctx, st, fresh.Key, "owner", 0)
}

// testFloorAhead checks the limit on floors: a floor at or beyond the
// largest token the store can have granted (backend.TokenLimit of its
// clock: the clock in µs plus a year) is refused with ErrFloorAhead (an
// ErrInvalidArgument) naming the key, on a fresh key and on one with a
// counter, and changes nothing: the key stays free and its next token
// still comes from the clock and counter, not from the refused floor. So
// a forged token that reached a caller as a floor can never push a key's
// counter to MaxToken, where it would have no token left to grant.
func (s *suite) testFloorAhead(t *testing.T) {
	ctx := testCtx(t)
	st := s.store(t)
	beyond := []uint64{
		uint64(time.Now().Add(backend.MaxTokenLead + 2*maxClockSkew).UnixMicro()),
		1 << 52,
		backend.MaxToken - 1,
	}
	for _, name := range []string{"fresh", "counted"} {
		key := s.key("floor-ahead", name)
		var last uint64
		if name == "counted" {
			last = s.acquire(t, ctx, st, key, "owner", longTTL, 0).Token
			release(t, ctx, st, key, "owner", 0)
		}
		for _, floor := range beyond {
			l, err := st.Acquire(ctx, key, "owner", longTTL, floor)
			if !errors.Is(err, backend.ErrFloorAhead) || !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(err.Error(), key) {
				t.Errorf("Acquire(%s key, floor %d): %+v, %v; want ErrFloorAhead naming the key", name, floor, l, err)
			}
			if _, err := st.Get(ctx, key); !errors.Is(err, backend.ErrNotFound) {
				t.Errorf("the refused grant of the %s key left it held: %v", name, err)
			}
		}
		sent := time.Now()
		l := s.acquire(t, ctx, st, key, "owner", longTTL, 0)
		if l.Token <= last || l.Token > uint64(sent.Add(maxClockSkew).UnixMicro()) {
			t.Errorf("after the refused floors, the %s key was granted token %d; want one above %d from the clock (about %d): a refused floor must not raise the counter",
				name, l.Token, last, sent.UnixMicro())
		}
		release(t, ctx, st, key, "owner", 0)
	}
}

// aheadOfClock returns a floor half of backend.MaxTokenLead ahead of the
// suite's clock: above any store's clock in microseconds, well below the
// largest token a store accepts.
func aheadOfClock() uint64 {
	return uint64(time.Now().Add(backend.MaxTokenLead / 2).UnixMicro())
}

// nearTokenLimit returns a floor just below the largest token a store
// whose clock is no further than maxClockSkew behind the suite's accepts.
func nearTokenLimit() uint64 {
	return backend.TokenLimit(time.Now().Add(-2*maxClockSkew).UnixMicro()) - 100
}
