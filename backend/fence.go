package backend

import (
	"fmt"
	"time"
)

// The fencing rule and the counter's life, written once for the Go stores
// (membackend, consulbackend); the Redis stores run the same rule in Lua
// (backend/internal/redislua/fence.lua, written once for both), where a
// Go function cannot run.

// CounterKeep is how long, at least, a store keeps a key's fencing counter
// after the key's last grant (CounterLife), unless it is told otherwise
// (consulbackend.WithCounterKeep).
const CounterKeep = time.Hour

// NextToken is the fencing rule: the token of a new grant is
// max(counter, floor, clockUS) + 1, where counter is the key's fencing
// counter (0 if it has none), floor the highest token the caller has seen
// and clockUS the store's clock in µs since the Unix epoch (a clock before
// the epoch counts as 0). It checks nothing: CheckFence says whether a
// store may grant from these, and FenceToken does both.
func NextToken(counter, floor uint64, clockUS int64) uint64 {
	return max(counter, floor, uint64(max(clockUS, 0))) + 1
}

// CheckFence returns why a store whose clock reads clockUS must not grant
// key from its fencing counter with floor, or nil, in this order: a floor
// at or beyond TokenLimit(clockUS) wraps ErrFloorAhead (the caller should
// forget it); a counter beyond TokenLimit(clockUS) wraps ErrCorrupt (no
// grant made it: forged, or written by a store whose clock was ahead); a
// counter or floor at MaxToken, or a clock there, wraps ErrCorrupt (no
// larger token exists).
// counterAt names where the counter is kept, for the operator who must
// delete it ("" when the store has no name for it). A refusal leaves the
// counter as it was.
func CheckFence(key, counterAt string, counter, floor uint64, clockUS int64) error {
	if err := ValidateFloorAt(key, floor, clockUS); err != nil {
		return err
	}
	at := "its fencing counter"
	if counterAt != "" {
		at = "the fencing counter at " + counterAt
	}
	if TokenAhead(counter, clockUS) {
		return fmt.Errorf("%w: key %q: %s holds %d, more than %v ahead of the clock (%d µs): no grant made it (forged, or written by a process whose clock was ahead); delete it",
			ErrCorrupt, key, at, counter, MaxTokenLead, clockUS)
	}
	if top := max(counter, floor); top >= MaxToken {
		return fmt.Errorf("%w: key %q: %s is at the largest token %d, and no larger one exists; delete the key's counter or use another store",
			ErrCorrupt, key, at, top)
	}
	if clockUS >= MaxToken {
		return fmt.Errorf("%w: key %q: the store's clock (%d µs) is past the largest token %d: no token is left; set the clock right or use another store",
			ErrCorrupt, key, clockUS, uint64(MaxToken))
	}
	return nil
}

// CheckStoredToken returns an error wrapping ErrCorrupt, naming where the
// token was read, when token is beyond TokenLimit(clockUS): no grant made
// it (forged, or written by a process whose clock was ahead), and it must
// never reach a caller, whose floor it would become. nil otherwise.
func CheckStoredToken(where string, token uint64, clockUS int64) error {
	if !TokenAhead(token, clockUS) {
		return nil
	}
	return fmt.Errorf("%w: %s holds token %d, more than %v ahead of the clock (%d µs): no grant made it (forged, or written by a process whose clock was ahead); delete it",
		ErrCorrupt, Printable(where), token, MaxTokenLead, clockUS)
}

// FenceToken checks a grant of key (CheckFence) and returns its token
// (NextToken).
func FenceToken(key, counterAt string, counter, floor uint64, clockUS int64) (uint64, error) {
	if err := CheckFence(key, counterAt, counter, floor, clockUS); err != nil {
		return 0, err
	}
	return NextToken(counter, floor, clockUS), nil
}

// CounterLife returns how long a store keeps the fencing counter that a
// grant (or a forced release) with a lease of ttl moved to token, when its
// clock read clockUS: keep (CounterKeep unless the store was told
// otherwise), or ttl if that is longer, after that grant; a key idle for
// longer loses its counter, so that per-entity keys do not pile up, and
// its next token comes from the clock, which by then gives larger tokens
// than the counter did. A counter that a floor put further ahead of the
// clock than that is kept for ever (CounterLife returns 0): the clock
// alone would not overtake it when it lapsed.
func CounterLife(token uint64, clockUS int64, ttl, keep time.Duration) time.Duration {
	life := max(ttl, keep)
	if token-min(token, uint64(max(clockUS, 0))) > uint64(life/time.Microsecond) {
		return 0
	}
	return life
}
