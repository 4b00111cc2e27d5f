package redisbackend_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

// lineState is what a key's Redis keys hold, read raw: the lease, the
// line with its scores and the requests.
type lineState struct {
	lease string
	line  []redis.Z
	reqs  map[string]string
}

func readLine(t *testing.T, rdb *redis.Client, s *redisbackend.Store, key string) lineState {
	t.Helper()
	ctx := ctxT(t)
	l, r := s.LineKeys(key)
	var st lineState
	st.lease, _ = rdb.Get(ctx, s.LeaseKey(key)).Result()
	var err error
	if st.line, err = rdb.ZRangeWithScores(ctx, l, 0, -1).Result(); err != nil {
		t.Fatal(err)
	}
	if st.reqs, err = rdb.HGetAll(ctx, r).Result(); err != nil {
		t.Fatal(err)
	}
	return st
}

// heldWithWaiter makes a hold key (its lease contended) with b live in
// its line, and returns a's lease.
func heldWithWaiter(t *testing.T, s *redisbackend.Store, key string) backend.Lease {
	t.Helper()
	ctx := ctxT(t)
	l, err := s.AcquireQueued(ctx, key, "a", time.Minute, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireQueued(ctx, key, "b", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("b joining the line: %v, want ErrHeld", err)
	}
	return l
}

// forgeWaiter puts name first in key's line (score 1) with request req.
func forgeWaiter(t *testing.T, rdb *redis.Client, s *redisbackend.Store, key, name, req string) {
	t.Helper()
	ctx := ctxT(t)
	l, r := s.LineKeys(key)
	if err := rdb.ZAdd(ctx, l, redis.Z{Score: 1, Member: name}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.HSet(ctx, r, name, req).Err(); err != nil {
		t.Fatal(err)
	}
}

// A waiter's place forged into a lock's line (a ttl of 0 or beyond what
// a store accepts, a floor beyond the largest token, a request not in
// baton's shape, a name with a terminal escape and a newline) makes the
// holder's Release fail with ErrCorrupt naming the line's Redis key, and
// changes nothing: the lock is still held by its owner under its token,
// the line and its requests are as they were. It used to release the
// lock and then fail with a raw script error half-way (a ttl of 0), or
// hand the lock to the forged waiter. A try of another owner
// (AcquireQueued with patience 0, which reads the line to name the waiter
// first in it) and Dequeue of another waiter fail the same way. A join of
// the held key reads no place: it is refused as held, and the holder's
// release still finds the forged place.
func TestForgedLinePlaces(t *testing.T) {
	rdb := server.Client(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	due := strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)
	for name, forged := range map[string][2]string{
		"ttl 0":      {"forged", "0 0 " + due},
		"huge ttl":   {"forged", "99999999999999999999 0 " + due},
		"ttl beyond": {"forged", "31536000001 0 " + due},
		"huge floor": {"forged", "1000 99999999999999999999 " + due},
		"max floor":  {"forged", "1000 9007199254740991 " + due},
		"huge due":   {"forged", "1000 0 999999999999999999999"},
		"garbage":    {"forged", "garbage"},
		"escape":     {"\x1b[31mred\nline", "1000 0 " + due},
		"C1 control": {"\u009bcsi", "1000 0 " + due},
		"bidi":       {"\u202eevil", "1000 0 " + due},
		"space":      {"two words", "1000 0 " + due},
		"DEL":        {"del\x7f", "1000 0 " + due},
		"empty":      {"", "1000 0 " + due},
		"long":       {strings.Repeat("x", 257), "1000 0 " + due},
	} {
		t.Run(name, func(t *testing.T) {
			key := backend.AppKey("forged", "line", "lock", strings.ReplaceAll(name, " ", "-"))
			a := heldWithWaiter(t, s, key)
			forgeWaiter(t, rdb, s, key, forged[0], forged[1])
			before := readLine(t, rdb, s, key)
			line, reqs := s.LineKeys(key)
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, backend.ErrCorrupt) {
					t.Fatalf("%s with a forged place %q: %v; want ErrCorrupt", op, forged, err)
				}
				if msg := err.Error(); !strings.Contains(msg, line) && !strings.Contains(msg, reqs) {
					t.Errorf("%s: %v; want the error to name %s or %s", op, err, line, reqs)
				} else if strings.ContainsAny(msg, "\x1b\n") {
					t.Errorf("%s: %q; want the stored text quoted, not raw", op, msg)
				}
				if after := readLine(t, rdb, s, key); fmt.Sprint(after) != fmt.Sprint(before) {
					t.Errorf("%s changed the lock's keys:\n%v\nwant\n%v", op, after, before)
				}
			}
			check("Release", s.Release(ctx, key, "a", 0))
			_, err := s.AcquireQueued(ctx, key, "c", time.Minute, 0, 0)
			check("AcquireQueued with patience 0", err)
			check("Dequeue", s.Dequeue(ctx, key, "b"))
			if g, err := s.Get(ctx, key); err != nil || g.Owner != "a" || g.Token != a.Token {
				t.Errorf("Get after the refused calls: %+v, %v; want a's lease, token %d", g, err, a.Token)
			}
			if _, err := s.AcquireQueued(ctx, key, "c", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
				t.Errorf("c joining the line of the held key: %v; want ErrHeld", err)
			}
			before = readLine(t, rdb, s, key)
			check("Release after c joined", s.Release(ctx, key, "a", 0))
		})
	}
}

// A release with a huge line of lapsed places in front of the live
// waiter does bounded work: it looks at no more than a hundred places
// (counted by the server: INFO commandstats) and drops only those (a join
// of the held key looks at none). The
// waiter then gets the key, and Leases stays bounded too. It used to drop
// every lapsed place in one call: 200,000 stalled the server half a
// second.
func TestHugeLineBoundedWork(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	const key = "{forged:huge}:lock"
	heldWithWaiter(t, s, key)
	const n = 20000
	line, reqs := s.LineKeys(key)
	lapsed := "1000 0 " + strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10)
	for i := 0; i < n; i += 1000 {
		zs := make([]redis.Z, 0, 1000)
		hs := make([]any, 0, 2000)
		for j := i; j < i+1000; j++ {
			name := fmt.Sprintf("lapsed%d", j)
			zs = append(zs, redis.Z{Score: float64(j + 1), Member: name})
			hs = append(hs, name, lapsed)
		}
		if err := rdb.ZAdd(ctx, line, zs...).Err(); err != nil {
			t.Fatal(err)
		}
		if err := rdb.HSet(ctx, reqs, hs...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	const look = 100 // the places one call looks at (lua/prelude.lua)
	bounded := func(what string, calls map[string]int64) {
		t.Helper()
		var all int64
		for _, c := range calls {
			all += c
		}
		if all > 3*look+30 {
			t.Errorf("%s with %d lapsed places made %d server calls, want at most %d: %v", what, n, all, 3*look+30, calls)
		}
	}
	calls := serverCalls(t, rdb, func() {
		if _, err := s.AcquireQueued(ctx, key, "c", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("c joining the line: %v; want ErrHeld", err)
		}
	})
	bounded("a join of the held key", calls)
	calls = serverCalls(t, rdb, func() {
		if err := s.Release(ctx, key, "a", 0); err != nil {
			t.Fatal(err)
		}
	})
	bounded("Release", calls)
	if left := rdb.ZCard(ctx, line).Val(); left < n+1-look {
		t.Errorf("the release dropped %d places, more than %d", n+1-left, look)
	}
	calls = serverCalls(t, rdb, func() {
		if _, err := s.Leases(ctx, "{forged:huge}"); err != nil {
			t.Fatal(err)
		}
	})
	delete(calls, "scan")
	bounded("Leases", calls)
	// The lapsed places in front lose the line its order for a while:
	// the key, free, goes to whoever asks.
	if l, err := s.AcquireQueued(ctx, key, "b", time.Minute, 0, time.Minute); err != nil || l.Owner != "b" {
		t.Fatalf("b after the release: %+v, %v; want the key", l, err)
	}
}

// A release whose handover's grant is refused (here: the waiter's floor
// is beyond what any grant may give) frees the key as a release with
// nobody to hand it to, and the line is as it was: the waiter popped to
// be handed the key is back in its place, at its arrival, and the line
// that popping emptied has an expiry again. A line with a place not in
// baton's shape refuses the release and is left as it was.
func TestReleasePutsBackTheHeadNotHandedOver(t *testing.T) {
	rdb := server.Client(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	const key = "{putback:test}:lock"
	line, _ := s.LineKeys(key)
	if _, err := s.AcquireQueued(ctx, key, "a", time.Minute, 0, time.Minute); err != nil {
		t.Fatal(err)
	}
	const ahead = backend.MaxToken - 1 // far beyond the server's clock plus 366 days
	if _, err := s.AcquireQueued(ctx, key, "b", time.Minute, ahead, time.Minute); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("b joining the line: %v, want ErrHeld", err)
	}
	before := rdb.ZRangeWithScores(ctx, line, 0, -1).Val()
	if err := s.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}
	after := rdb.ZRangeWithScores(ctx, line, 0, -1).Val()
	if fmt.Sprint(after) != fmt.Sprint(before) || len(after) != 1 {
		t.Errorf("the line after a release whose handover was refused: %v; want it as before, %v", after, before)
	}
	if left := rdb.PTTL(ctx, line).Val(); left <= 0 {
		t.Errorf("the line after the release has PTTL %v; want an expiry", left)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("Get after the release: %v; want ErrNotFound (freed, kept for b)", err)
	}

	// A place not in baton's shape behind a lapsed one.
	if _, err := s.Acquire(ctx, key+":2", "a", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	line2, req2 := s.LineKeys(key + ":2")
	rdb.ZAdd(ctx, line2, redis.Z{Score: 1, Member: "gone"}, redis.Z{Score: 2, Member: "bad"})
	rdb.HSet(ctx, req2, "bad", "garbage")
	rdb.PExpire(ctx, line2, time.Minute)
	rdb.PExpire(ctx, req2, time.Minute)
	if v := rdb.Get(ctx, s.LeaseKey(key+":2")).Val(); !strings.HasSuffix(v, " contended") {
		rdb.Set(ctx, s.LeaseKey(key+":2"), v+" contended", time.Minute)
	}
	before = rdb.ZRangeWithScores(ctx, line2, 0, -1).Val()
	if err := s.Release(ctx, key+":2", "a", 0); !errors.Is(err, backend.ErrCorrupt) {
		t.Errorf("a release with a corrupt place in line: %v; want ErrCorrupt", err)
	}
	if after := rdb.ZRangeWithScores(ctx, line2, 0, -1).Val(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the line after a release refused as corrupt: %v; want it as before, %v", after, before)
	}
	if left := rdb.PTTL(ctx, line2).Val(); left <= 0 {
		t.Errorf("the line after the refused release has PTTL %v; want an expiry", left)
	}
}
