package backend

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits on what a Store accepts. They keep keys readable in every store
// (Consul KV paths included) and durations inside what every store can
// represent.
const (
	MaxKeyLen   = 512
	MaxOwnerLen = 256
	MinTTL      = time.Millisecond
	MaxTTL      = 365 * 24 * time.Hour
)

// ValidateKey reports whether key is usable as a lease key: non-empty, at
// most MaxKeyLen bytes of UTF-8 without spaces or control characters, with
// balanced hash-tag braces.
func ValidateKey(key string) error {
	if err := validateName("key", key, MaxKeyLen); err != nil {
		return err
	}
	if open, close := strings.Count(key, "{"), strings.Count(key, "}"); open > 1 || close > 1 || open != close {
		return fmt.Errorf("%w: key %q: at most one {hash tag} with balanced braces is allowed", ErrInvalidArgument, key)
	}
	if i := strings.IndexByte(key, '{'); i >= 0 {
		j := strings.IndexByte(key, '}')
		if j < i+2 {
			return fmt.Errorf("%w: key %q: the {hash tag} must be non-empty and opened before it is closed", ErrInvalidArgument, key)
		}
	}
	return nil
}

// ValidateOwner reports whether owner is usable as a lease owner:
// non-empty, at most MaxOwnerLen bytes of UTF-8 without spaces or control
// characters.
func ValidateOwner(owner string) error {
	return validateName("owner", owner, MaxOwnerLen)
}

// ValidateTTL reports whether d is usable as a lease duration named what
// (for instance "ttl"). Stores round durations up to whole milliseconds.
func ValidateTTL(what string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: %s %v must be positive", ErrInvalidArgument, what, d)
	}
	return ValidateLease(what, RoundUpMillis(d))
}

// ValidateLease reports whether d is usable as the configured length of a
// lease named what: a role's TTL, a lock's hold, a job lock's
// lockAtMostFor. It is ValidateTTL without the rounding: d must be at
// least MinTTL and at most MaxTTL as given, so that a duration no store
// grants, or one a store would silently round up, is refused where it is
// configured (role.NewElector, synclock.NewLocker, schedlock.Locked,
// config.Load) instead of failing on every call at run time. The error
// wraps ErrInvalidArgument and names what and the limit it breaks.
func ValidateLease(what string, d time.Duration) error {
	switch {
	case d <= 0:
		return fmt.Errorf("%w: %s %s must be positive", ErrInvalidArgument, what, FormatDuration(d))
	case d < MinTTL:
		return fmt.Errorf("%w: %s %s is shorter than %s, the shortest lease a store holds (stores count whole milliseconds)",
			ErrInvalidArgument, what, FormatDuration(d), FormatDuration(MinTTL))
	case d > MaxTTL:
		return fmt.Errorf("%w: %s %s is longer than %s, the longest lease a store holds",
			ErrInvalidArgument, what, FormatDuration(d), FormatDuration(MaxTTL))
	}
	return nil
}

// FormatDuration writes d for a message: whole days as days ("365
// days"), the rest as time.Duration writes it ("400 days 1h30m0s",
// "45s").
func FormatDuration(d time.Duration) string {
	const day = 24 * time.Hour
	if d < day && d > -day {
		return d.String()
	}
	days, rest := d/day, d%day
	if rest < 0 {
		rest = -rest
	}
	s := fmt.Sprintf("%d days", days)
	if days == 1 || days == -1 {
		s = fmt.Sprintf("%d day", days)
	}
	if rest != 0 {
		s += " " + rest.String()
	}
	return s
}

// ValidateKeepFor reports whether keepFor is usable in Release: <= 0 means
// release at once, positive values are bounded like a TTL.
func ValidateKeepFor(keepFor time.Duration) error {
	if keepFor <= 0 {
		return nil
	}
	return ValidateTTL("keepFor", keepFor)
}

func validateName(what, s string, maxLen int) error {
	if s == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalidArgument, what)
	}
	if len(s) > maxLen {
		return fmt.Errorf("%w: %s %.40q... is %d bytes, more than %d", ErrInvalidArgument, what, s, len(s), maxLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: %s %q is not valid UTF-8", ErrInvalidArgument, what, s)
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f {
			return fmt.Errorf("%w: %s %q holds a space or control character", ErrInvalidArgument, what, s)
		}
	}
	return nil
}

// MaxToken is the largest fencing token (and floor) a store handles,
// 2^53 - 1: the largest integer that a float64 holds exactly, so that a
// token survives Lua (Redis scripts), JSON readers that decode numbers as
// doubles (JavaScript among them) and Java's long alike. Tokens start
// from a clock in microseconds (about 1.8e15 in 2026), which reaches it
// in the year 2255.
const MaxToken = 1<<53 - 1

// ValidateFloor checks an Acquire floor.
func ValidateFloor(floor uint64) error {
	if floor >= MaxToken {
		return fmt.Errorf("%w: floor %d leaves no token below the maximum %d", ErrInvalidArgument, floor, uint64(MaxToken))
	}
	return nil
}

// ValidateArgs checks the arguments common to Acquire and Renew.
func ValidateArgs(key, owner string, ttl time.Duration) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := ValidateOwner(owner); err != nil {
		return err
	}
	return ValidateTTL("ttl", ttl)
}

// RoundUpMillis returns d rounded up to a whole millisecond, the resolution
// of every store.
func RoundUpMillis(d time.Duration) time.Duration {
	if r := d % time.Millisecond; r != 0 {
		return d - r + time.Millisecond
	}
	return d
}
