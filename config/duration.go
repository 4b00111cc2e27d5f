package config

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"time"
	"unicode/utf8"
)

// maxDurationLen bounds the text ParseDuration reads; no sensible
// duration is longer.
const maxDurationLen = 128

// ParseDuration parses a non-negative duration written in either of two
// forms, as ShedLock's lockAtMostFor and lockAtLeastFor accept them:
//
//   - Go's form, as time.ParseDuration reads it: "30s", "1h30m", "1.5h",
//     "250ms", "0". A number without a unit is rejected, except "0".
//   - ISO-8601 durations: "PT30S", "PT1H30M", "P1D", "P2W", "P1DT2H",
//     "PT0.5S" (a ',' may stand for the '.'). Letters may be lower-case
//     ("pt30s"). Weeks and days are fixed at 7 and 1 x 24 h. Each unit
//     appears at most once and in the order W, D, T, H, M, S; only the
//     last may have a fraction, which is truncated to the nanosecond.
//     Years and months are rejected because their length varies.
//
// A leading '+' is allowed. Negative durations, durations beyond
// time.Duration's range (about 292 years) and empty or malformed text are
// rejected with an error that wraps ErrInvalid and quotes the input.
func ParseDuration(s string) (time.Duration, error) {
	if s == "" {
		return 0, &durationError{s, "is empty"}
	}
	if len(s) > maxDurationLen {
		return 0, &durationError{s, fmt.Sprintf("is longer than %d bytes", maxDurationLen)}
	}
	body := s
	switch s[0] {
	case '-':
		return 0, &durationError{s, "is negative; a duration must not be negative"}
	case '+':
		body = s[1:]
	}
	if body != "" && (body[0] == 'P' || body[0] == 'p') {
		d, reason := parseISO(body[1:])
		if reason != "" {
			return 0, &durationError{s, reason}
		}
		return d, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if allDigits(body) {
			return 0, &durationError{s, "has no unit; write for example 30s or PT30S"}
		}
		return 0, &durationError{s, "is not a duration: use Go's form (30s, 1h30m) or ISO-8601 (PT30S, P1D), at most about 292 years (106751 days)"}
	}
	if d < 0 { // time.ParseDuration has no other sign than the one checked above
		return 0, &durationError{s, "is negative; a duration must not be negative"}
	}
	return d, nil
}

// parseISO parses an ISO-8601 duration after its 'P'. It returns a reason
// instead if the text is not one ParseDuration accepts.
func parseISO(rest string) (time.Duration, string) {
	if rest == "" {
		return 0, "has nothing after P; write for example PT30S"
	}
	p := isoParser{rest: rest}
	for p.i < len(rest) {
		var reason string
		if upper(rest[p.i]) == 'T' {
			reason = p.timeDesignator()
		} else {
			reason = p.component()
		}
		if reason != "" {
			return 0, reason
		}
	}
	return time.Duration(p.total.Int64()), ""
}

// isoParser walks the text of an ISO-8601 duration after its 'P'.
type isoParser struct {
	rest     string
	i        int // next byte of rest to read
	total    big.Int
	inTime   bool
	lastRank int  // rank of the previous unit, to enforce W D H M S order
	fraction bool // the previous component had a fraction
}

// timeDesignator reads the 'T' that starts hours, minutes and seconds.
func (p *isoParser) timeDesignator() string {
	if p.inTime {
		return "has T twice"
	}
	p.inTime = true
	p.i++
	if p.i == len(p.rest) {
		return "has T but no hours, minutes or seconds after it"
	}
	return ""
}

// component reads one number and its unit letter and adds it to the total.
func (p *isoParser) component() string {
	if p.fraction {
		return "has a component after one with a fraction; only the last component may have a fraction"
	}
	whole, frac, reason := p.number()
	if reason != "" {
		return reason
	}
	if p.i == len(p.rest) {
		return "ends with a number without a unit letter"
	}
	r, size := utf8.DecodeRuneInString(p.rest[p.i:])
	p.i += size
	unit, rank, reason := isoUnit(r, p.inTime)
	if reason != "" {
		return reason
	}
	if rank <= p.lastRank {
		return "has units repeated or out of order; the order is W, D, T, H, M, S"
	}
	p.lastRank = rank
	return p.add(whole, frac, unit)
}

// number reads a component's whole digits and, after a '.' or ',', its
// fraction digits.
func (p *isoParser) number() (whole, frac, reason string) {
	whole = p.digits()
	if whole == "" {
		r, _ := utf8.DecodeRuneInString(p.rest[p.i:])
		return "", "", fmt.Sprintf("has %q where a number belongs", r)
	}
	if p.i < len(p.rest) && (p.rest[p.i] == '.' || p.rest[p.i] == ',') {
		p.i++
		frac = p.digits()
		if frac == "" {
			return "", "", "has a decimal separator without digits after it"
		}
		p.fraction = true
	}
	return whole, frac, ""
}

// digits reads the run of decimal digits at the current position.
func (p *isoParser) digits() string {
	start := p.i
	for p.i < len(p.rest) && isDigit(p.rest[p.i]) {
		p.i++
	}
	return p.rest[start:p.i]
}

// add adds (whole + frac/10^len(frac)) * unit, truncated to the
// nanosecond, to the total, and says so if the total no longer fits a
// time.Duration.
func (p *isoParser) add(whole, frac string, unit time.Duration) string {
	var n, scale big.Int
	n.SetString(whole+frac, 10)
	scale.Exp(big.NewInt(10), big.NewInt(int64(len(frac))), nil)
	n.Mul(&n, big.NewInt(int64(unit)))
	n.Quo(&n, &scale)
	p.total.Add(&p.total, &n)
	if p.total.Cmp(big.NewInt(math.MaxInt64)) > 0 {
		return "is too long: a duration holds at most about 292 years (106751 days)"
	}
	return ""
}

// isoUnit returns the length and order rank of an ISO-8601 unit letter, or
// a reason it is not allowed where it appears.
func isoUnit(r rune, inTime bool) (time.Duration, int, string) {
	if r < utf8.RuneSelf {
		r = rune(upper(byte(r)))
	}
	if !inTime {
		switch r {
		case 'Y':
			return 0, 0, "has years, whose length varies; use days (P365D)"
		case 'M':
			return 0, 0, "has months, whose length varies; use days (P30D), or put minutes after T (PT5M)"
		case 'W':
			return 7 * 24 * time.Hour, 1, ""
		case 'D':
			return 24 * time.Hour, 2, ""
		case 'H', 'S':
			return 0, 0, fmt.Sprintf("has %c before T; hours, minutes and seconds go after T (PT...)", r)
		}
	} else {
		switch r {
		case 'H':
			return time.Hour, 3, ""
		case 'M':
			return time.Minute, 4, ""
		case 'S':
			return time.Second, 5, ""
		case 'Y', 'W', 'D':
			return 0, 0, fmt.Sprintf("has %c after T; weeks and days go before T (P1DT2H)", r)
		}
	}
	return 0, 0, fmt.Sprintf("has an unknown unit %q", r)
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

func upper(b byte) byte {
	if 'a' <= b && b <= 'z' {
		return b - 'a' + 'A'
	}
	return b
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

// durationError reports text ParseDuration rejects. It wraps ErrInvalid.
type durationError struct {
	input, reason string
}

func (e *durationError) Error() string {
	return "config: duration " + shorten(strconv.Quote(e.input)) + " " + e.reason
}

func (e *durationError) Unwrap() error { return ErrInvalid }

// Duration is a time.Duration that reads itself from text with
// ParseDuration, so a struct field of this type accepts "30s" and "PT30S"
// alike when decoded by encoding/json, YAML or TOML decoders and flag.TextVar.
type Duration time.Duration

// UnmarshalText parses text with ParseDuration.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := ParseDuration(string(text))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalText writes d in Go's form, which ParseDuration reads back.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(time.Duration(d).String()), nil
}

// String returns d in Go's form, such as "1m30s".
func (d Duration) String() string {
	return time.Duration(d).String()
}
