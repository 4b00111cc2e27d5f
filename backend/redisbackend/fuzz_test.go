package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
)

// The values these targets feed in are what a Redis could hand back:
// script replies, published messages, handed leases and member
// entries, written by baton or by anything else that shares the keys.
// None may panic, and what parses must be a lease baton could have
// written; the rest is ErrCorrupt naming the key.

const fuzzKey = "{t:a}:lock:x"

func FuzzParseReply(f *testing.F) {
	f.Add(true, "1795537382000548", "", "", int64(0), "")
	f.Add(true, "0", "", "", int64(0), "")
	f.Add(false, "ok", "10.0.0.7:acme:billing:8080#abcd", "1795537382000548", int64(1500), "")
	f.Add(false, "held", "10.0.0.7:acme:billing:8080#abcd", "42", int64(-1), "10.0.0.8:acme:billing:8080#ef01")
	f.Add(false, "held", "o", "18446744073709551615", int64(0), "")
	f.Add(false, "recovering", "2500", "", int64(0), "")
	f.Add(false, "queued", "10.0.0.8:acme:billing:8080#ef01", "", int64(0), "")
	f.Add(false, "corrupt", "is a hash", "", int64(0), "")
	f.Add(false, "free", "", "", int64(0), "")
	f.Add(false, "who", "", "", int64(0), "")
	f.Fuzz(func(t *testing.T, bare bool, status, a, b string, ttl int64, next string) {
		asked := backend.Lease{Key: fuzzKey, Owner: "me", TTL: time.Second}
		var res any
		switch {
		case bare:
			res = status
		case status == "recovering" || status == "queued" || status == "corrupt":
			res = []any{status, a}
		default:
			res = []any{status, a, b, ttl, next}
		}
		r, err := parseReply("acquire", fuzzKey, res, asked)
		if err != nil {
			if !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), strconv.Quote(fuzzKey)) {
				t.Fatalf("error %q is not ErrCorrupt naming the key", err)
			}
			return
		}
		switch r.status {
		case "ok", "held":
			if r.lease.Token == 0 || r.lease.Token > backend.MaxToken || r.lease.Owner == "" || r.lease.Key != fuzzKey {
				t.Fatalf("%s reply %v gave lease %+v", r.status, res, r.lease)
			}
			if r.lease.TTL < 0 {
				t.Fatalf("held lease with negative TTL %v from %v", r.lease.TTL, res)
			}
			if bare && (r.lease.Owner != asked.Owner || r.lease.TTL != asked.TTL) {
				t.Fatalf("bare token reply changed the asked lease: %+v", r.lease)
			}
		case "recovering":
			if r.lease.TTL <= 0 {
				t.Fatalf("recovering for %v from %v", r.lease.TTL, res)
			}
		case "queued":
			if r.next == "" {
				t.Fatalf("queued reply with no waiter from %v", res)
			}
		case "free", "corrupt":
		default:
			t.Fatalf("parsed status %q from %v", r.status, res)
		}
	})
}

func FuzzParseEvent(f *testing.F) {
	for _, s := range []string{
		"released 42 ", "released 42 10.0.0.8:acme:billing:8080#ef01", "released - ",
		"renewed 42 1500", "renewed 42 1500 10.0.0.8:acme:billing:8080#ef01",
		"renewed 0 1500 owner", "renewed 42 -5", "renewed x y z", "", "released", "renewed 1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, payload string) {
		ev, h := parseEvent(payload)
		switch ev.Kind {
		case backend.EventRenewed:
			if ev.TTL <= 0 {
				t.Fatalf("%q: renewed with TTL %v", payload, ev.TTL)
			}
		case backend.EventReleased, backend.EventMaybeFree:
			if ev.Next != "" && backend.ValidateOwner(ev.Next) != nil {
				t.Fatalf("%q: release names the impossible waiter %q", payload, ev.Next)
			}
			if ev.TTL != 0 {
				t.Fatalf("%q: %v with TTL %v", payload, ev.Kind, ev.TTL)
			}
		default:
			t.Fatalf("%q: kind %v", payload, ev.Kind)
		}
		if h.owner != "" {
			if ev.Kind != backend.EventRenewed || h.token == 0 || h.token > backend.MaxToken || backend.ValidateOwner(h.owner) != nil || h.ttl != ev.TTL {
				t.Fatalf("%q: handover %+v with event %+v", payload, h, ev)
			}
			// What the scripts publish parses back to itself.
			again, h2 := parseEvent(fmt.Sprintf("renewed %d %d %s", h.token, h.ttl.Milliseconds(), h.owner))
			if again != ev || h2.owner != h.owner || h2.token != h.token || h2.ttl != h.ttl {
				t.Fatalf("%q: handover %+v does not round-trip: %+v %+v", payload, h, again, h2)
			}
		}
	})
}

func FuzzHandedLease(f *testing.F) {
	f.Add("1795537382000548 me contended", int64(1500))
	f.Add("1795537382000548 me", int64(1500))
	f.Add("1795537382000548 me released", int64(1500))
	f.Add("1795537382000548 you contended", int64(1500))
	f.Add("0 me contended", int64(1500))
	f.Add("42 me contended", int64(-1))
	f.Add("42 me contended", int64(-2))
	f.Add("x", int64(0))
	f.Add("9007199254740992 me contended", int64(10))
	f.Add("00000000000000000 me contended", int64(1))
	f.Add("20000000000000000000 me contended", int64(5))
	f.Add("01 me you", int64(1))
	f.Add("01 me contended x", int64(1))
	const name = "baton:" + fuzzKey
	f.Fuzz(func(t *testing.T, value string, pttl int64) {
		get := redis.NewStringCmd(context.Background())
		get.SetVal(value)
		left := redis.NewDurationCmd(context.Background(), time.Millisecond)
		left.SetVal(time.Duration(pttl))
		l, ok, err := handedOver(fuzzKey, "me", name, get, left)
		if err != nil {
			if !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), name) {
				t.Fatalf("error %q is not ErrCorrupt naming the lease key", err)
			}
			return
		}
		if !ok {
			if tok, found := strings.CutSuffix(value, " me contended"); pttl > 0 && found && !strings.Contains(tok, " ") {
				t.Fatalf("lease %q with %v left not read as a handover to me", value, time.Duration(pttl))
			}
			return
		}
		if !strings.HasSuffix(value, " me contended") {
			t.Fatalf("lease %q read as a handover to me; only a contended lease of mine is one", value)
		}
		if l.Token == 0 || l.Token > backend.MaxToken || l.TTL != time.Duration(pttl) || l.TTL <= 0 || l.Owner != "me" || l.Key != fuzzKey {
			t.Fatalf("lease %q, %v left gave %+v", value, time.Duration(pttl), l)
		}
		if tok, _, _ := strings.Cut(value, " "); strconv.FormatUint(l.Token, 10) != strings.TrimLeft(tok, "+") && tok[0] != '0' {
			t.Fatalf("token %q read as %d", tok, l.Token)
		}
	})
}

func FuzzParseMembers(f *testing.F) {
	f.Add("1795537382000", "n1#a", "1795537397000", "1795537381000\n10.0.0.7:acme:billing:8080\n{\"started\":\"2026-11-24T10:00:00Z\"}", 1)
	f.Add("1795537382000", "n1#a", "1.795537397e12", "1795537381000\nid\n", 2)
	f.Add("x", "n", "1", "1\ni\nd", 1)
	f.Add("1", "n", "nan", "1\ni\nd", 1)
	f.Add("1", "n", "1", "no newline", 1)
	f.Fuzz(func(t *testing.T, now, name, exp, entry string, n int) {
		n = max(0, min(n, 4))
		res := []string{"ok", now}
		for i := range n {
			res = append(res, fmt.Sprintf("%s-%d", name, i), exp, entry)
		}
		ms, err := parseMembers("{t:a}:members", res)
		if err != nil {
			if !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), `"{t:a}:members"`) {
				t.Fatalf("error %q is not ErrCorrupt naming the group", err)
			}
			return
		}
		if len(ms) != n {
			t.Fatalf("%d members from %d entries", len(ms), n)
		}
		for i, m := range ms {
			if m.Name != fmt.Sprintf("%s-%d", name, i) {
				t.Fatalf("member %d named %q: not in name order", i, m.Name)
			}
			if strings.Contains(m.Identity, "\n") || !strings.HasPrefix(entry[strings.IndexByte(entry, '\n')+1:], m.Identity) {
				t.Fatalf("identity %q from entry %q", m.Identity, entry)
			}
		}
	})
}
