package backend

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
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
// most MaxKeyLen bytes of UTF-8 without spaces or control characters
// (C0, DEL, C1, and the bidirectional controls that reorder text on a
// terminal), with balanced hash-tag braces.
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
// characters (as ValidateKey). Stores check the owners, waiters and member
// names they read back by the same rules (CheckStoredName).
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
	if problem := nameProblem(what, s, maxLen); problem != "" {
		return fmt.Errorf("%w: %s", ErrInvalidArgument, problem)
	}
	return nil
}

// nameProblem says what is wrong with s as a name (a key, an owner, a
// member's name or identity) of at most maxLen bytes, or "" if nothing
// is. It quotes s, so the answer is safe to print.
func nameProblem(what, s string, maxLen int) string {
	if s == "" {
		return what + " is empty"
	}
	if len(s) > maxLen {
		return fmt.Sprintf("%s %.40q... is %d bytes, more than %d", what, s, len(s), maxLen)
	}
	if !utf8.ValidString(s) {
		return fmt.Sprintf("%s %q is not valid UTF-8", what, s)
	}
	for _, r := range s {
		if badRune(r) {
			return fmt.Sprintf("%s %q holds a space or control character", what, s)
		}
	}
	return ""
}

// badRune reports whether r is a space or a control character, which no
// name may hold. An ASCII rune, as nearly every name's are, is decided
// without the Unicode tables (no bidirectional control is ASCII): names
// are checked on every lease call.
func badRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r <= ' ' || r == 0x7f
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// CheckStoredName checks a name read back from a store — an owner, a
// waiter, a member's name or identity — by the rules ValidateOwner applies
// to what baton writes. A name that breaks them (a control character such
// as a terminal escape, a newline, a space, more than MaxOwnerLen bytes)
// was not written by baton: the error wraps ErrCorrupt, says what the
// name is (what) and where it was read (where: the key, as the caller
// names it), and quotes the name, so that printing the error never
// prints the stored bytes raw.
func CheckStoredName(what, where, s string) error {
	if problem := nameProblem(what, s, MaxOwnerLen); problem != "" {
		return fmt.Errorf("%w: %s read at %s: %s; baton never writes such a name, so delete it or use another prefix", ErrCorrupt, what, where, problem)
	}
	return nil
}

// Printable returns s as it is when every character of it is printable
// (spaces and quotes included), or else quoted as a Go string (strconv.Quote),
// which escapes control characters such as terminal escapes and newlines.
// Text read from a store goes through it before it is printed in a
// table or an error.
func Printable(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// MaxToken is the largest fencing token (and floor) a store handles,
// 2^53 - 1: the largest integer that a float64 holds exactly, so that a
// token survives Lua (Redis scripts), JSON readers that decode numbers as
// doubles (JavaScript among them) and Java's long alike. Tokens start
// from a clock in microseconds (about 1.8e15 in 2026), which reaches it
// in the year 2255.
const MaxToken = 1<<53 - 1

// MaxTokenLead is how far ahead of a store's clock a fencing token can
// be when every grant kept the fencing rule: 366 days. A grant's token is
// max(counter, floor, clock in µs) + 1, and a store refuses a floor that
// is not below its clock in µs plus MaxTokenLead (ErrFloorAhead), so no
// grant puts a counter further ahead than that, and the clock moves on
// with every grant. A token or counter found further ahead (TokenAhead)
// was forged or written by a store whose clock was more than a year
// ahead: the store reports it as ErrCorrupt naming the key, and callers
// never see it as a token, so it never becomes anyone's floor. The lead
// is generous because honest clocks differ (a server whose clock was
// stepped back, Consul clients whose clocks disagree); a forged token
// within it raises a key's tokens by at most a year of microseconds, of
// the two centuries left below MaxToken.
const MaxTokenLead = 366 * 24 * time.Hour

// TokenLimit returns the largest token a store whose clock reads clockUS
// (µs since the Unix epoch) can honestly have granted: clockUS plus
// MaxTokenLead in µs, at most MaxToken.
func TokenLimit(clockUS int64) uint64 {
	return min(uint64(max(clockUS, 0))+uint64(MaxTokenLead/time.Microsecond), MaxToken)
}

// TokenAhead reports whether token is above TokenLimit(clockUS): no store
// whose clock reads clockUS can have granted it.
func TokenAhead(token uint64, clockUS int64) bool {
	return token > TokenLimit(clockUS)
}

// ParseToken reads a fencing token as the stores write it, a decimal in
// [1, MaxToken]; ok is false for anything else (0 is no token).
func ParseToken(s string) (token uint64, ok bool) {
	t, err := strconv.ParseUint(s, 10, 64)
	return t, err == nil && t > 0 && t <= MaxToken
}

// ValidateFloor checks an Acquire floor against MaxToken, before the
// store reads its clock; ValidateFloorAt checks it against the clock.
func ValidateFloor(floor uint64) error {
	if floor >= MaxToken {
		return fmt.Errorf("%w: floor %d leaves no token below the maximum %d", ErrInvalidArgument, floor, uint64(MaxToken))
	}
	return nil
}

// ValidateFloorAt checks an Acquire floor of key against a store's clock
// reading clockUS: a floor at or above TokenLimit(clockUS) is refused with
// an error wrapping ErrFloorAhead (and so ErrInvalidArgument) that names
// the key. The store then grants nothing and leaves the key's counter as
// it was; the caller should forget the floor (see ErrFloorAhead).
func ValidateFloorAt(key string, floor uint64, clockUS int64) error {
	if limit := TokenLimit(clockUS); floor >= limit {
		return fmt.Errorf("%w: key %q: floor %d is not below %d, the store's clock in µs (%d) plus %v: no grant of the key can have had that token; forget the floor",
			ErrFloorAhead, key, floor, limit, clockUS, MaxTokenLead)
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
