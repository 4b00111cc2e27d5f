package backend_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// TestFenceToken checks the fencing rule, max(counter, floor, clock µs) + 1,
// and its refusals at the edges: a floor at TokenLimit, a counter beyond
// it, either at MaxToken, and a clock before the epoch or near MaxToken.
func TestFenceToken(t *testing.T) {
	const now = int64(1_800_000_000_000_000) // µs, in 2027
	limit := backend.TokenLimit(now)
	lead := uint64(backend.MaxTokenLead / time.Microsecond)
	for _, tc := range []struct {
		name           string
		counter, floor uint64
		clock          int64
		want           uint64
		err            error
	}{
		{name: "clock wins", counter: 5, floor: 7, clock: now, want: uint64(now) + 1},
		{name: "counter wins", counter: uint64(now) + 10, floor: 7, clock: now, want: uint64(now) + 11},
		{name: "floor wins", counter: uint64(now) + 10, floor: uint64(now) + 20, clock: now, want: uint64(now) + 21},
		{name: "all equal", counter: uint64(now), floor: uint64(now), clock: now, want: uint64(now) + 1},
		{name: "clock before the epoch", counter: 0, floor: 0, clock: -5, want: 1},
		{name: "clock zero, counter", counter: 41, clock: 0, want: 42},
		{name: "floor just below the limit", floor: limit - 1, clock: now, want: limit},
		{name: "floor at the limit", floor: limit, clock: now, err: backend.ErrFloorAhead},
		{name: "floor far beyond", floor: backend.MaxToken - 1, clock: now, err: backend.ErrFloorAhead},
		{name: "counter at the limit", counter: limit, clock: now, want: limit + 1},
		{name: "counter beyond the limit", counter: limit + 1, clock: now, err: backend.ErrCorrupt},
		{name: "counter at MaxToken", counter: backend.MaxToken, clock: now, err: backend.ErrCorrupt},
		{name: "counter above MaxToken", counter: ^uint64(0), clock: now, err: backend.ErrCorrupt},
		{name: "counter at MaxToken near its clock", counter: backend.MaxToken, clock: int64(backend.MaxToken - lead), err: backend.ErrCorrupt},
		{name: "counter just below MaxToken", counter: backend.MaxToken - 1, clock: int64(backend.MaxToken - lead), want: backend.MaxToken},
		{name: "floor at MaxToken near its clock", floor: backend.MaxToken, clock: int64(backend.MaxToken - lead), err: backend.ErrFloorAhead},
		{name: "floor just below MaxToken", floor: backend.MaxToken - 1, clock: int64(backend.MaxToken - 1), want: backend.MaxToken},
		{name: "clock just below MaxToken", clock: int64(backend.MaxToken - 1), want: backend.MaxToken},
		{name: "clock at MaxToken", clock: int64(backend.MaxToken), err: backend.ErrCorrupt},
		{name: "clock past MaxToken", counter: 3, floor: 2, clock: 1 << 62, err: backend.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := backend.FenceToken("k", "f/k", tc.counter, tc.floor, tc.clock)
			if tc.err != nil {
				if !errors.Is(err, tc.err) || got != 0 {
					t.Fatalf("FenceToken(%d, %d, %d) = %d, %v; want an error wrapping %v", tc.counter, tc.floor, tc.clock, got, err, tc.err)
				}
				if !strings.Contains(err.Error(), `"k"`) {
					t.Errorf("the error %q does not name the key", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("FenceToken(%d, %d, %d) = %d, %v; want %d", tc.counter, tc.floor, tc.clock, got, err, tc.want)
			}
			if got > backend.MaxToken {
				t.Fatalf("token %d above MaxToken", got)
			}
			if n := backend.NextToken(tc.counter, tc.floor, tc.clock); n != got {
				t.Errorf("NextToken = %d, FenceToken %d", n, got)
			}
		})
	}
}

// TestCheckFenceNamesTheCounter checks that a corrupt counter's error says
// where it is, or "its fencing counter" when the store has no name for it.
func TestCheckFenceNamesTheCounter(t *testing.T) {
	err := backend.CheckFence("k", "baton/fence/k", backend.MaxToken, 0, 1)
	if err == nil || !strings.Contains(err.Error(), "baton/fence/k") {
		t.Errorf("CheckFence = %v; want it to name baton/fence/k", err)
	}
	err = backend.CheckFence("k", "", backend.MaxToken, 0, 1)
	if err == nil || !strings.Contains(err.Error(), "its fencing counter") {
		t.Errorf("CheckFence = %v; want it to say its fencing counter", err)
	}
}

// TestCounterLife checks the counter's life: max(keep, ttl) after the
// grant, or for ever when the token is further ahead of the clock than
// that.
func TestCounterLife(t *testing.T) {
	const now = int64(1_800_000_000_000_000)
	hour := uint64(time.Hour / time.Microsecond)
	for _, tc := range []struct {
		name  string
		token uint64
		clock int64
		ttl   time.Duration
		want  time.Duration
	}{
		{name: "from the clock", token: uint64(now) + 1, clock: now, ttl: time.Second, want: time.Hour},
		{name: "long lease", token: uint64(now) + 1, clock: now, ttl: 3 * time.Hour, want: 3 * time.Hour},
		{name: "ahead by the life", token: uint64(now) + hour, clock: now, ttl: time.Second, want: time.Hour},
		{name: "ahead beyond the life", token: uint64(now) + hour + 1, clock: now, ttl: time.Second, want: 0},
		{name: "ahead within a long lease", token: uint64(now) + 2*hour, clock: now, ttl: 3 * time.Hour, want: 3 * time.Hour},
		{name: "behind the clock", token: 5, clock: now, ttl: time.Second, want: time.Hour},
		{name: "clock before the epoch", token: 1, clock: -1, ttl: time.Second, want: time.Hour},
		{name: "MaxToken", token: backend.MaxToken, clock: now, ttl: time.Second, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := backend.CounterLife(tc.token, tc.clock, tc.ttl, backend.CounterKeep); got != tc.want {
				t.Errorf("CounterLife(%d, %d, %v) = %v; want %v", tc.token, tc.clock, tc.ttl, got, tc.want)
			}
		})
	}
}

// TestCheckStoredToken checks that a token read from a store is corrupt
// exactly when it is beyond TokenLimit of the clock, and that the error
// names where it was read, control characters escaped.
func TestCheckStoredToken(t *testing.T) {
	const now = int64(1_800_000_000_000_000)
	limit := backend.TokenLimit(now)
	for _, tok := range []uint64{1, uint64(now), limit} {
		if err := backend.CheckStoredToken("k", tok, now); err != nil {
			t.Errorf("CheckStoredToken(%d) = %v; want nil", tok, err)
		}
	}
	for _, tok := range []uint64{limit + 1, backend.MaxToken, ^uint64(0)} {
		err := backend.CheckStoredToken("lease/\x1b[2Jk", tok, now)
		if !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), `"lease/\x1b[2Jk"`) {
			t.Errorf("CheckStoredToken(%d) = %v; want ErrCorrupt naming the key, escaped", tok, err)
		}
	}
}
