package backendtest

import (
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

// testTokensPerKey checks that a fresh key's first token is 1 (its
// counter starts at 0 and the new token is max(counter, floor)+1) and
// that the counters of two keys do not share increments.
func (s *suite) testTokensPerKey(t *testing.T) {
	ctx := testCtx(t)
	st := s.store(t)
	k1, k2 := s.key("tokens-per-key", "one"), s.key("tokens-per-key", "two")

	cycle := func(key string, want uint64) {
		t.Helper()
		l := s.acquire(t, ctx, st, key, "owner", longTTL, 0)
		if l.Token != want {
			t.Errorf("grant %d of %q has token %d; want %d", want, key, l.Token, want)
		}
		release(t, ctx, st, key, "owner", 0)
	}
	cycle(k1, 1)
	cycle(k1, 2)
	cycle(k1, 3)
	cycle(k2, 1)
	cycle(k1, 4)
	cycle(k2, 2)
}

// testTokenFloor checks the floor of Acquire: the token is
// max(counter, floor)+1, on a fresh key and on one whose counter is above
// or equal to the floor, with values beyond the 2^53 that a float64 (a
// Lua number) holds exactly.
func (s *suite) testTokenFloor(t *testing.T) {
	const big = 1<<60 + 1
	ctx := testCtx(t)
	st := s.store(t)
	key := s.key("token-floor")

	for _, c := range []struct {
		floor, want uint64
		why         string
	}{
		{1000, 1001, "a fresh key with a floor"},
		{5, 1002, "a floor below the counter"},
		{1002, 1003, "a floor equal to the counter"},
		{big, big + 1, "a floor above 2^53"},
		{0, big + 2, "no floor after a big one"},
	} {
		l := s.acquire(t, ctx, st, key, "owner", longTTL, c.floor)
		if l.Token != c.want {
			t.Errorf("%s: Acquire(floor %d) granted token %d; want %d", c.why, c.floor, l.Token, c.want)
		}
		release(t, ctx, st, key, "owner", 0)
	}
	fresh := s.acquire(t, ctx, st, s.key("token-floor", "other"), "owner", longTTL, 0)
	if fresh.Token != 1 {
		t.Errorf("the first token of a fresh key is %d after floors on another key; want 1", fresh.Token)
	}
	release(t, ctx, st, fresh.Key, "owner", 0)
}
