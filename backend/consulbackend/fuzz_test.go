package consulbackend_test

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/consulbackend"
)

// A lease key's value is data anyone with KV access can write: whatever
// it holds, decoding never panics, and what it accepts is a lease baton
// could have written (a valid owner, a token in 1..MaxToken, a TTL within
// the limits) that encodes back to the same lease.
func FuzzLeaseRecord(f *testing.F) {
	f.Add([]byte(`{"owner":"10.0.0.7:acme:billing:8080#a1b2","token":1795560867874155,"ttl_ms":45000}`))
	f.Add([]byte(`{"owner":"job","token":1,"ttl_ms":1,"kept":true}`))
	f.Add([]byte(`{"owner":"","token":0,"ttl_ms":0}`))
	f.Add([]byte(`{"owner":"x","token":9007199254740992,"ttl_ms":5}`))
	f.Add([]byte(`{"owner":"x","token":-1,"ttl_ms":1e30}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`1795560867874155 owner`))
	f.Fuzz(func(t *testing.T, value []byte) {
		l, kept, err := consulbackend.DecodeLease("{acme:billing}:role", value)
		if err != nil {
			return
		}
		if backend.ValidateOwner(l.Owner) != nil || l.Token == 0 || l.Token > backend.MaxToken ||
			l.TTL <= 0 || l.TTL > backend.MaxTTL || l.TTL%time.Millisecond != 0 {
			t.Fatalf("%q decoded to %+v (kept %v)", value, l, kept)
		}
		l2, kept2, err := consulbackend.DecodeLease("{acme:billing}:role", consulbackend.EncodeLease(l, kept))
		if err != nil || l2 != l || kept2 != kept {
			t.Fatalf("%+v (kept %v) re-encoded decodes to %+v (kept %v), %v", l, kept, l2, kept2, err)
		}
	})
}

// A fencing counter's value is a decimal token in 0..MaxToken and nothing
// else.
func FuzzCounter(f *testing.F) {
	for _, s := range []string{"0", "1795560867874155", "9007199254740991", "9007199254740992", "-1", " 1", "1e5", "", "0x10"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, value []byte) {
		n, err := consulbackend.ParseCounter(value)
		if err != nil {
			return
		}
		digits := len(value) > 0 && len(bytes.Trim(value, "0123456789")) == 0
		if n > backend.MaxToken || !digits || strconv.FormatUint(n, 10) != strings.TrimLeft(string(value), "0") && n != 0 {
			t.Fatalf("%q parsed as %d", value, n)
		}
	})
}

// A member entry's value: decoding never panics, and a member it accepts
// is one Heartbeat would accept.
func FuzzMemberEntry(f *testing.F) {
	s, err := consulbackend.New(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("10.0.0.7:acme:billing:8080#a1b2", []byte(`{"identity":"10.0.0.7:acme:billing:8080","data":"eyJ4IjoxfQ==","ttl_ms":45000}`))
	f.Add("n", []byte(`{"identity":"","ttl_ms":0}`))
	f.Add("a/b", []byte(`{"identity":"i","data":null,"ttl_ms":1}`))
	f.Add("n", []byte(`{"identity":"i","ttl_ms":-5}`))
	f.Fuzz(func(t *testing.T, name string, value []byte) {
		if backend.ValidateOwner(name) != nil {
			return
		}
		ms, err := consulbackend.DecodeMember(s, "{acme:billing}:members", name, value)
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.Name != name || backend.ValidateMember(m) != nil || m.TTL <= 0 || m.TTL > backend.MaxTTL || m.Age != 0 {
				t.Fatalf("%q/%q decoded to %+v", name, value, m)
			}
		}
	})
}

// A place in a waiting line: its name and value are data anyone with KV
// access can write. Decoding never panics, and a place it accepts names
// a valid owner whose escaped name is the entry's.
func FuzzPlace(f *testing.F) {
	s, err := consulbackend.New(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("10.0.0.7:acme:billing:8080%23a1b2", []byte(`{"ttl_ms":45000,"floor":1795560867874155,"place_ms":1500,"order":42}`))
	f.Add("x/y", []byte(`{"ttl_ms":1,"place_ms":1}`))
	f.Add("%zz", []byte(`{"ttl_ms":1,"place_ms":1}`))
	f.Add("a%20b", []byte(`{"ttl_ms":-1,"floor":-1,"place_ms":0}`))
	f.Fuzz(func(t *testing.T, name string, value []byte) {
		owner, ok, err := consulbackend.DecodePlace(s, "{acme:billing}:lock:k", name, value)
		if err != nil || !ok {
			return
		}
		if backend.ValidateOwner(owner) != nil || strings.Contains(name, "/") {
			t.Fatalf("%q/%q decoded to owner %q", name, value, owner)
		}
	})
}
