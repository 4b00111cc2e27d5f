package backend_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/baton-go/baton/backend"
)

func TestValidateKey(t *testing.T) {
	valid := []string{
		"a",
		"{acme:billing}:role",
		"{acme:billing}:lock:github.com/acme/billing/invoice.(*Service).Close",
		"plain:key:without:tag",
		"ü-ñ",
		strings.Repeat("k", backend.MaxKeyLen),
	}
	for _, k := range valid {
		if err := backend.ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%.40q): %v; want nil", k, err)
		}
	}
	invalid := []string{
		"",
		"a b",
		"a\tb",
		"a\nb",
		"a\x00b",
		"a\x7fb",
		"\xff",
		strings.Repeat("k", backend.MaxKeyLen+1),
		"{a",
		"a}",
		"}a{",
		"{}",
		"{a}{b}",
		"{{a}}",
	}
	for _, k := range invalid {
		err := backend.ValidateKey(k)
		if !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("ValidateKey(%.40q) = %v; want an error wrapping ErrInvalidArgument", k, err)
		}
	}
}

func TestValidateOwner(t *testing.T) {
	for _, o := range []string{"a", "10.0.0.7:acme:billing:8080#4f2a", strings.Repeat("o", backend.MaxOwnerLen)} {
		if err := backend.ValidateOwner(o); err != nil {
			t.Errorf("ValidateOwner(%.40q): %v; want nil", o, err)
		}
	}
	for _, o := range []string{"", "a b", "a\r", "\x01", "\xc3", strings.Repeat("o", backend.MaxOwnerLen+1)} {
		if err := backend.ValidateOwner(o); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("ValidateOwner(%.40q) = %v; want an error wrapping ErrInvalidArgument", o, err)
		}
	}
}

func TestValidateTTL(t *testing.T) {
	// Positive durations are rounded up to a whole millisecond first, as
	// keepFor is, so a sub-millisecond TTL is a 1 ms TTL.
	for _, d := range []time.Duration{time.Nanosecond, backend.MinTTL - 1, backend.MinTTL, time.Second, backend.MaxTTL} {
		if err := backend.ValidateTTL("ttl", d); err != nil {
			t.Errorf("ValidateTTL(%v): %v; want nil", d, err)
		}
	}
	for _, d := range []time.Duration{0, -time.Second, -time.Nanosecond, backend.MaxTTL + 1} {
		err := backend.ValidateTTL("ttl", d)
		if !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("ValidateTTL(%v) = %v; want an error wrapping ErrInvalidArgument", d, err)
		} else if !strings.Contains(err.Error(), "ttl") {
			t.Errorf("ValidateTTL(%v) = %q; want the error to name the ttl", d, err)
		}
	}
}

func TestValidateKeepFor(t *testing.T) {
	// keepFor <= 0 means "release at once"; positive values are rounded up
	// to a whole millisecond and then bounded like a TTL.
	for _, d := range []time.Duration{-time.Hour, 0, time.Nanosecond, time.Millisecond, backend.MaxTTL} {
		if err := backend.ValidateKeepFor(d); err != nil {
			t.Errorf("ValidateKeepFor(%v): %v; want nil", d, err)
		}
	}
	for _, d := range []time.Duration{backend.MaxTTL + time.Nanosecond, backend.MaxTTL + time.Millisecond} {
		if err := backend.ValidateKeepFor(d); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("ValidateKeepFor(%v) = %v; want an error wrapping ErrInvalidArgument", d, err)
		}
	}
}

func TestValidateArgs(t *testing.T) {
	if err := backend.ValidateArgs("{a:b}:k", "owner", time.Second); err != nil {
		t.Errorf("ValidateArgs of good arguments: %v", err)
	}
	for _, c := range []struct {
		key, owner string
		ttl        time.Duration
	}{
		{"", "owner", time.Second},
		{"k", "", time.Second},
		{"k", "owner", 0},
	} {
		if err := backend.ValidateArgs(c.key, c.owner, c.ttl); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("ValidateArgs(%q, %q, %v) = %v; want an error wrapping ErrInvalidArgument", c.key, c.owner, c.ttl, err)
		}
	}
}

func TestRoundUpMillis(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{0, 0},
		{time.Nanosecond, time.Millisecond},
		{time.Millisecond, time.Millisecond},
		{time.Millisecond + 1, 2 * time.Millisecond},
		{1500 * time.Microsecond, 2 * time.Millisecond},
		{time.Second, time.Second},
	} {
		if got := backend.RoundUpMillis(c.in); got != c.want {
			t.Errorf("RoundUpMillis(%v) = %v; want %v", c.in, got, c.want)
		}
	}
}

func TestAppKey(t *testing.T) {
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{nil, "{acme:billing}"},
		{[]string{"role"}, "{acme:billing}:role"},
		{[]string{"lock", "nightly"}, "{acme:billing}:lock:nightly"},
	} {
		got := backend.AppKey("acme", "billing", c.parts...)
		if got != c.want {
			t.Errorf("AppKey(acme, billing, %q) = %q; want %q", c.parts, got, c.want)
		}
		if err := backend.ValidateKey(got); err != nil {
			t.Errorf("AppKey(acme, billing, %q) = %q is not a valid key: %v", c.parts, got, err)
		}
	}
}

func FuzzValidateKey(f *testing.F) {
	for _, k := range []string{"a", "{a}:b", "{a", "a b", "\xff", ""} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := backend.ValidateKey(key)
		if err != nil {
			if !errors.Is(err, backend.ErrInvalidArgument) {
				t.Fatalf("ValidateKey(%q) = %v; not an ErrInvalidArgument", key, err)
			}
			return
		}
		// An accepted key is printable, bounded and has at most one
		// well-formed hash tag.
		if key == "" || len(key) > backend.MaxKeyLen {
			t.Fatalf("ValidateKey accepted %q of length %d", key, len(key))
		}
		if !utf8.ValidString(key) {
			t.Fatalf("ValidateKey accepted %q, which is not UTF-8", key)
		}
		if i := strings.IndexFunc(key, func(r rune) bool { return r <= ' ' || r == 0x7f }); i >= 0 {
			t.Fatalf("ValidateKey accepted %q, which holds a space or control character at %d", key, i)
		}
		open, close := strings.Index(key, "{"), strings.Index(key, "}")
		if strings.Count(key, "{") > 1 || strings.Count(key, "}") > 1 || (open < 0) != (close < 0) || (open >= 0 && close < open+2) {
			t.Fatalf("ValidateKey accepted %q with a malformed hash tag", key)
		}
	})
}

// A name read back from a store with a control character (terminal
// escapes, a newline, a C1 control, a bidirectional override) is
// ErrCorrupt, and the error names where it was read and quotes it.
func TestCheckStoredName(t *testing.T) {
	for _, bad := range []string{"", "\x1b[2J", "a\nb", "a b", "\u009bcsi", "\u202eevil", "\xff", strings.Repeat("x", backend.MaxOwnerLen+1)} {
		err := backend.CheckStoredName("owner", "lease k", bad)
		if !errors.Is(err, backend.ErrCorrupt) || errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("CheckStoredName(%q) = %v; want backend.ErrCorrupt alone", bad, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "lease k") || strings.ContainsAny(msg, "\x1b\n\u009b\u202e") {
			t.Errorf("CheckStoredName(%q) = %q; want it to name the lease and quote the name", bad, msg)
		}
	}
	for _, good := range []string{"10.0.0.7:acme:billing:8080#1f2e", "发票", "emoji-🔒"} {
		if err := backend.CheckStoredName("owner", "lease k", good); err != nil {
			t.Errorf("CheckStoredName(%q) = %v; want nil", good, err)
		}
	}
}

// Printable leaves printable text alone and quotes the rest.
func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"held by a:b (token 1)": "held by a:b (token 1)",
		`say "hi"`:              `say "hi"`,
		"\x1b[31mred":           `"\x1b[31mred"`,
		"a\nb":                  `"a\nb"`,
		"\u202eevil":            `"\u202eevil"`,
		"\xff":                  `"\xff"`,
	} {
		if got := backend.Printable(in); got != want {
			t.Errorf("Printable(%q) = %s, want %s", in, got, want)
		}
	}
}

// ValidateLease, the check of configured lease lengths, refuses what
// ValidateTTL would round up, and says the limit in days.
func TestValidateLease(t *testing.T) {
	for _, d := range []time.Duration{backend.MinTTL, 1500 * time.Microsecond, time.Second, backend.MaxTTL} {
		if err := backend.ValidateLease("HoldDuration", d); err != nil {
			t.Errorf("ValidateLease(%v): %v; want nil", d, err)
		}
	}
	for d, want := range map[time.Duration]string{
		0:                            "HoldDuration 0s must be positive",
		-time.Second:                 "HoldDuration -1s must be positive",
		backend.MinTTL - 1:           "HoldDuration 999.999µs is shorter than 1ms",
		backend.MaxTTL + time.Second: "HoldDuration 365 days 1s is longer than 365 days, the longest lease a store holds",
		1<<63 - 1:                    "HoldDuration 106751 days 23h47m16.854775807s is longer than 365 days",
	} {
		err := backend.ValidateLease("HoldDuration", d)
		if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateLease(%v) = %v; want an error wrapping ErrInvalidArgument saying %q", d, err, want)
		}
	}
}

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		45 * time.Second:             "45s",
		24 * time.Hour:               "1 day",
		backend.MaxTTL:               "365 days",
		400*24*time.Hour + time.Hour: "400 days 1h0m0s",
		-48 * time.Hour:              "-2 days",
	} {
		if got := backend.FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q; want %q", d, got, want)
		}
	}
}

// A name is refused for a space or a control character by the Unicode
// tables' rule, also where the check decides an ASCII rune without them.
func TestValidateOwnerRunes(t *testing.T) {
	runes := []rune{0x85, 0xa0, 0xe9, 0x061c, 0x200e, 0x202e, 0x2066, 0xfeff, 0x1f600}
	for r := rune(0); r < utf8.RuneSelf; r++ {
		runes = append(runes, r)
	}
	for _, r := range runes {
		want := r <= ' ' || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
		if err := backend.ValidateOwner("a" + string(r) + "b"); (err != nil) != want {
			t.Errorf("ValidateOwner of a name holding %U: %v; want refused %v", r, err, want)
		}
	}
}

// Every lease call checks its key and owner: the check of a typical pair
// sits on every lock cycle.
func BenchmarkValidateOwnerAndKey(b *testing.B) {
	owner, key := "10.0.0.7:acme:billing:8080#0123456789abcdef", "{acme:billing}:lock:invoice:42"
	b.ReportAllocs()
	for b.Loop() {
		if backend.ValidateOwner(owner) != nil || backend.ValidateKey(key) != nil {
			b.Fatal("valid owner or key refused")
		}
	}
}
