package role

import (
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Owner strings come back from the store (the role key's holder, member
// names) and may have been written by anyone. ownerID must find the
// instance ID of every owner an elector writes, "<id>#<hex nonce>", even
// when the ID holds '#' (tenants and apps may), and of anything else
// return a prefix that stops at a '#'.
func FuzzOwnerID(f *testing.F) {
	for _, s := range []struct {
		id    string
		nonce []byte
	}{
		{"10.0.0.7:acme:billing:8080", []byte{0xa1, 0xb2, 0xc3, 0xd4, 0xe5, 0xf6}},
		{"[fd00::7]:acme:billing:8080", []byte{1, 2, 3, 4, 5, 6}},
		{"10.0.0.7:a#b:c#:1", []byte{0, 0, 0, 0, 0, 0}},
		{"10.0.0.7:acme:billing:8080#a1b2c3d4e5f6", nil}, // an owner, as the fuzzer's text
		{"#", nil},
		{"", nil},
		{"no-nonce", []byte{}},
	} {
		f.Add(s.id, s.nonce)
	}
	f.Fuzz(func(t *testing.T, s string, nonce []byte) {
		id := ownerID(s)
		switch i := strings.LastIndexByte(s, '#'); {
		case i < 0 && id != s:
			t.Fatalf("ownerID(%q) = %q; an owner without a nonce is its own ID", s, id)
		case i >= 0 && (len(id) != i || !strings.HasPrefix(s, id)):
			t.Fatalf("ownerID(%q) = %q; want what precedes the last '#'", s, id)
		}
		owner := s + "#" + hex.EncodeToString(nonce)
		if got := ownerID(owner); got != s {
			t.Fatalf("ownerID(%q) = %q; want the ID %q it was made of", owner, got, s)
		}
	})
}

// Member data comes back from the store and may have been written by
// anyone. startedAt must read back every start time presence writes, and
// of anything else return a start time only if the data decodes cleanly,
// one that survives being written again.
func FuzzStartedAt(f *testing.F) {
	for _, s := range []struct {
		data      string
		sec, nsec int64
		zone      int32
	}{
		{`{"started":"2026-04-12T09:30:00.123456789+02:00"}`, 1776000000, 123456789, 120},
		{`{"started":"2026-04-12T07:30:00Z"}`, 0, 0, 0},
		{`{"Started":"2026-04-12T07:30:00Z","other":[1,2]}`, -62135596800, 0, -60}, // year 1
		{`{"started":"2026-04-12T07:30:00Z","started":1}`, 253402300799, 999999999, 840},
		{`{"started":"10000-01-01T00:00:00Z"}`, 253402300800, 0, 0}, // year 10000
		{`{"started":null}`, 0, 0, 0},
		{`{"started":"yesterday"}`, 0, 0, 0},
		{`[]`, 0, 0, 0},
		{`not json`, 0, 0, 0},
		{``, 0, 0, 0},
	} {
		f.Add([]byte(s.data), s.sec, s.nsec, s.zone)
	}
	f.Fuzz(func(t *testing.T, data []byte, sec, nsec int64, zone int32) {
		got := startedAt(data)
		if !got.IsZero() {
			if err := json.Unmarshal(data, new(memberData)); err != nil {
				t.Fatalf("startedAt(%q) = %v from data that does not decode: %v", data, got, err)
			}
			again, err := json.Marshal(memberData{Started: got})
			if err != nil || !startedAt(again).Equal(got) {
				t.Fatalf("startedAt(%q) = %v; written again as %q (%v) it reads %v", data, got, again, err, startedAt(again))
			}
		}
		// What presence writes: its clock's time, in any zone of whole
		// minutes (RFC 3339 has no seconds in an offset, and zones with
		// one since 1972).
		at := time.Unix(sec, nsec).In(time.FixedZone("", int(zone%(18*60))*60))
		written, err := json.Marshal(memberData{Started: at})
		if err != nil {
			return // a year outside 0..9999 has no RFC 3339 form
		}
		if got := startedAt(written); !got.Equal(at) {
			t.Fatalf("presence wrote %q for %v; startedAt reads %v", written, at, got)
		}
	})
}
