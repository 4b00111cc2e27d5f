package redisbackend

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// A script's reply is checked field by field: a malformed one (a script
// of another version, a proxy that rewrites replies) is ErrCorrupt with
// what was wrong, never a panic or a lease with a zero token.
func TestParseReply(t *testing.T) {
	const key = "acme:billing:lock:k"
	want := asked(key, "me", 10_000)
	good := []struct {
		name string
		res  any
		want reply
	}{
		{"granted", "7", reply{status: "ok", lease: backend.Lease{Key: key, Owner: "me", Token: 7, TTL: 10 * time.Second}}},
		{"already held", []any{"ok", "me", "8", int64(900)}, reply{status: "ok", lease: backend.Lease{Key: key, Owner: "me", Token: 8, TTL: 900 * time.Millisecond}}},
		{"held", []any{"held", "you", "9", int64(500), "next"}, reply{status: "held", next: "next", lease: backend.Lease{Key: key, Owner: "you", Token: 9, TTL: 500 * time.Millisecond}}},
		{"queued", []any{"queued", "next"}, reply{status: "queued", next: "next", lease: backend.Lease{Key: key}}},
		{"free", []any{"free"}, reply{status: "free"}},
		{"corrupt", []any{"corrupt", "key is a hash"}, reply{status: "corrupt", detail: "key is a hash"}},
	}
	for _, tc := range good {
		got, err := parseReply("acquire", key, tc.res, want)
		if err != nil || got != tc.want {
			t.Errorf("%s: parseReply(%v) = %+v, %v; want %+v", tc.name, tc.res, got, err, tc.want)
		}
	}
	bad := []struct {
		name string
		res  any
		says string
	}{
		{"nil", nil, "unexpected script reply"},
		{"integer", int64(1), "unexpected script reply"},
		{"empty array", []any{}, "unexpected script reply"},
		{"zero token", "0", `lease token "0" is not a positive integer`},
		{"word token", "seven", `lease token "seven" is not a positive integer`},
		{"unknown status", []any{"maybe"}, "unknown script reply"},
		{"short held", []any{"held", "you", "9"}, "short script reply"},
		{"short queued", []any{"queued"}, "short script reply"},
		{"queued for nobody", []any{"queued", ""}, "queued reply names no waiter"},
		{"held by nobody", []any{"held", "", "9", int64(500)}, "held reply names no owner"},
		{"ttl as text", []any{"held", "you", "9", "500"}, "lease TTL 500 is not an integer"},
		{"token missing", []any{"held", "you", nil, int64(500)}, `lease token "" is not a positive integer`},
		{"held forever", []any{"held", "you", "9", int64(-1)}, "has no expiry (PTTL -1)"},
	}
	for _, tc := range bad {
		got, err := parseReply("acquire", key, tc.res, want)
		switch {
		case !errors.Is(err, backend.ErrCorrupt):
			t.Errorf("%s: parseReply(%v) = %+v, %v; want ErrCorrupt", tc.name, tc.res, got, err)
		case !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), key):
			t.Errorf("%s: error %q should name the key and say %q", tc.name, err, tc.says)
		}
	}
}

// Published messages are read field by field: a handover names its new
// owner, a plain renewal does not, and anything malformed is "may be
// free", the safe reading, and names no owner.
func TestParseEvent(t *testing.T) {
	tests := []struct {
		payload string
		kind    backend.EventKind
		ttl     time.Duration
		next    string
		owner   string // of the handover, if one
		token   uint64
	}{
		{"released 7 ", backend.EventReleased, 0, "", "", 0},
		{"released 7 w1", backend.EventReleased, 0, "w1", "", 0},
		{"released - w1", backend.EventReleased, 0, "w1", "", 0},
		{"renewed 7 1500", backend.EventRenewed, 1500 * time.Millisecond, "", "", 0},
		{"renewed 8 2000 w1", backend.EventRenewed, 2 * time.Second, "", "w1", 8},
		{"renewed x 2000 w1", backend.EventRenewed, 2 * time.Second, "", "", 0},
		{"renewed 0 2000 w1", backend.EventRenewed, 2 * time.Second, "", "", 0},
		{"renewed 8 0 w1", backend.EventMaybeFree, 0, "", "", 0},
		{"renewed 8 abc", backend.EventMaybeFree, 0, "", "", 0},
		{"renewed 8", backend.EventMaybeFree, 0, "", "", 0},
		{"expired", backend.EventMaybeFree, 0, "", "", 0},
		{"", backend.EventMaybeFree, 0, "", "", 0},
	}
	for _, tt := range tests {
		ev, h := parseEvent(tt.payload)
		if ev.Kind != tt.kind || ev.TTL != tt.ttl || ev.Next != tt.next {
			t.Errorf("parseEvent(%q) = %+v; want kind %v, ttl %v, next %q", tt.payload, ev, tt.kind, tt.ttl, tt.next)
		}
		if h.owner != tt.owner || h.token != tt.token || (h.owner != "" && h.ttl != tt.ttl) {
			t.Errorf("parseEvent(%q) names the handover %+v; want owner %q, token %d, ttl %v", tt.payload, h, tt.owner, tt.token, tt.ttl)
		}
	}
}

// Values no script writes are refused, or read the safe way, wherever
// they come back: a token above MaxToken (as the next floor it would make
// every later Acquire fail), a lease of the caller's without expiry, a
// release naming a waiter no line could hold, a handover to such an
// owner, and a member whose expiry is not a time.
func TestForeignValuesAreRefused(t *testing.T) {
	const key = "{t:a}:lock:x"
	asked := backend.Lease{Key: key, Owner: "me", TTL: time.Second}
	for _, res := range []any{
		"9223372036854775808",
		[]any{"ok", "me", "9223372036854775808", int64(100)},
		[]any{"held", "you", "18446744073709551615", int64(100)},
		[]any{"ok", "me", "5", int64(-1)},
	} {
		if _, err := parseReply("acquire", key, res, asked); !errors.Is(err, backend.ErrCorrupt) {
			t.Errorf("reply %v: %v, want ErrCorrupt", res, err)
		}
	}
	for _, payload := range []string{"released 5 a b", "released 5 own\x01er"} {
		if ev, _ := parseEvent(payload); ev.Kind != backend.EventMaybeFree || ev.Next != "" {
			t.Errorf("%q read as %+v, want may-be-free", payload, ev)
		}
	}
	for _, payload := range []string{"renewed 9223372036854775808 1000 w", "renewed 5 1000 w\x01"} {
		ev, h := parseEvent(payload)
		if ev.Kind != backend.EventRenewed || h.owner != "" {
			t.Errorf("%q read as %+v with handover %+v, want a renewal without handover", payload, ev, h)
		}
	}
	for _, exp := range []string{"nan", "inf", "1e300"} {
		if _, err := parseMembers("{t:a}:members", []string{"ok", "1000", "n", exp, "900\nid\n"}); !errors.Is(err, backend.ErrCorrupt) {
			t.Errorf("member expiry %q: %v, want ErrCorrupt", exp, err)
		}
	}
}

func TestLeaseKeys(t *testing.T) {
	got := leaseKeys("baton:{a}:lock", "baton:{a}:intact", "baton:intact")
	want := []string{"baton:{a}:lock", "baton:{a}:lock:fence", "baton:{a}:lock:line", "baton:{a}:lock:line-req", "baton:{a}:lock:watch-mark", "baton:{a}:lock:mailbox", "baton:{a}:intact", "baton:intact"}
	if !slices.Equal(got, want) {
		t.Fatalf("leaseKeys = %q, want %q", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { leaseKeys("baton:{a}:lock", "baton:{a}:intact", "baton:intact") }); n > 2 {
		t.Errorf("leaseKeys allocates %v times, want at most 2", n)
	}
	s := &Store{prefix: "baton"}
	for key, want := range map[string]string{
		"{acme:billing}:lock:x": "baton:{acme:billing}:intact",
		"{acme:billing}:role":   "baton:{acme:billing}:intact",
		"a{b}c":                 "baton:{b}:intact",
		"invoice:42":            "",
		"{}x":                   "",
		"x{y":                   "",
	} {
		if got := s.IntactKey(key); got != want {
			t.Errorf("IntactKey(%q) = %q, want %q", key, got, want)
		}
	}
}

// A store keeps the names of the last key it was asked for: the same key
// again builds nothing, and another key gets its own names, never the
// kept ones.
func TestStoreLeaseKeysKeepsTheLastKey(t *testing.T) {
	s := &Store{prefix: "baton"}
	a := s.leaseKeys("{t:a}:lock:x")
	if n := testing.AllocsPerRun(100, func() { s.leaseKeys("{t:a}:lock:x") }); n != 0 {
		t.Errorf("leaseKeys of the last key again allocates %v times, want 0", n)
	}
	for _, key := range []string{"{t:a}:lock:y", "{t:a}:lock:x", "{t:b}:lock:x", "{t:a}:lock:x"} {
		got := s.leaseKeys(key)
		if want := s.buildLeaseKeys(key); !slices.Equal(got, want) {
			t.Errorf("leaseKeys(%q) = %q, want %q", key, got, want)
		}
	}
	if !slices.Equal(a, s.buildLeaseKeys("{t:a}:lock:x")) {
		t.Errorf("the names handed out for {t:a}:lock:x changed to %q", a)
	}
}

// The scripts write the fencing limits as literals: they must be
// backend.MaxTokenLead in µs and backend.MaxToken.
func TestScriptFencingLimits(t *testing.T) {
	shared := leaseScripts.acquire.shared
	for _, want := range []uint64{uint64(backend.MaxTokenLead / time.Microsecond), backend.MaxToken} {
		if !strings.Contains(shared, strconv.FormatUint(want, 10)) {
			t.Errorf("the lease scripts' fencing rule (backend/internal/redislua/fence.lua) does not hold %d", want)
		}
	}
}
