package redisbackend_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
)

var ctxBg = context.Background()

// foreign writes a value of a Redis type into name.
var foreign = map[string]func(rdb *redis.Client, name string) error{
	"garbage string": func(rdb *redis.Client, name string) error {
		return rdb.Set(ctxBg, name, "\x00\xffnot baton's", time.Minute).Err()
	},
	"huge string": func(rdb *redis.Client, name string) error {
		return rdb.Set(ctxBg, name, strings.Repeat("x", 1<<20), time.Minute).Err()
	},
	"list": func(rdb *redis.Client, name string) error { return rdb.RPush(ctxBg, name, "a", "b").Err() },
	"hash": func(rdb *redis.Client, name string) error { return rdb.HSet(ctxBg, name, "f", "v").Err() },
	"set":  func(rdb *redis.Client, name string) error { return rdb.SAdd(ctxBg, name, "m").Err() },
	"zset": func(rdb *redis.Client, name string) error {
		return rdb.ZAdd(ctxBg, name, redis.Z{Score: 1, Member: "m"}).Err()
	},
	"stream": func(rdb *redis.Client, name string) error {
		return rdb.XAdd(ctxBg, &redis.XAddArgs{Stream: name, Values: []any{"f", "v"}}).Err()
	},
}

// Foreign values of every type in every Redis key a store keeps for a
// lock — the lease, its counter, its line and requests, its watch marker,
// its mailbox (a member group's keys: TestHostileMemberKeys): no call
// panics or hangs; each either works or fails with an error that wraps
// backend.ErrCorrupt and names the Redis key to delete; and the foreign
// value is left alone.
func TestHostileForeignValues(t *testing.T) {
	rdb := server.Client(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	suffixes := map[string]func(key string) string{
		"lease":    s.LeaseKey,
		"counter":  s.FenceKey,
		"line":     func(k string) string { l, _ := s.LineKeys(k); return l },
		"requests": func(k string) string { _, r := s.LineKeys(k); return r },
		"marker":   s.MarkerKey,
		"mailbox":  s.MailboxKey,
	}
	i := 0
	for which, name := range suffixes {
		for kind, write := range foreign {
			i++
			t.Run(which+"/"+kind, func(t *testing.T) {
				key := fmt.Sprintf("{hostile:%d}:lock:k", i)
				target := name(key)
				if err := write(rdb, target); err != nil {
					t.Fatal(err)
				}
				check := func(op string, err error) {
					t.Helper()
					if err != nil && !errors.Is(err, backend.ErrCorrupt) && !errors.Is(err, backend.ErrHeld) && !errors.Is(err, backend.ErrNotHeld) && !errors.Is(err, backend.ErrNotFound) {
						t.Errorf("%s with a %s in the %s key: %v; want success or an error wrapping ErrCorrupt", op, kind, which, err)
					}
					if errors.Is(err, backend.ErrCorrupt) && !strings.Contains(err.Error(), target) && !strings.Contains(err.Error(), key) {
						t.Errorf("%s: %v; want the error to name %s", op, err, target)
					}
				}
				_, err := s.Acquire(ctx, key, "me", time.Second, 0)
				check("Acquire", err)
				_, err = s.AcquireQueued(ctx, key, "other", time.Second, 0, time.Second)
				check("AcquireQueued", err)
				_, err = s.Renew(ctx, key, "me", time.Second)
				check("Renew", err)
				_, err = s.Get(ctx, key)
				check("Get", err)
				check("Dequeue", s.Dequeue(ctx, key, "other"))
				check("Release", s.Release(ctx, key, "me", 0))
				if w, err := s.Watch(ctx, key); err == nil {
					w.Close()
				} else {
					check("Watch", err)
				}
				if which != "lease" && which != "counter" {
					return // a script may clean up a key it owns
				}
				if typ, _ := rdb.Type(ctx, target).Result(); typ == "none" {
					t.Errorf("the foreign %s in the %s key was deleted", kind, which)
				}
			})
		}
	}
}

// Foreign values of every type in each of a member group's three keys:
// Heartbeat, Members and Leave either work or fail with an error that
// wraps backend.ErrCorrupt and names the Redis key to delete, and never
// panic or hang.
func TestHostileMemberKeys(t *testing.T) {
	rdb := server.Client(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	i := 0
	for which := range 3 {
		for kind, write := range foreign {
			i++
			group := backend.AppKey("hostile", fmt.Sprint(i), "members")
			target := s.GroupKeys(group)[which]
			t.Run(fmt.Sprintf("%d/%s", which, kind), func(t *testing.T) {
				if err := write(rdb, target); err != nil {
					t.Fatal(err)
				}
				check := func(op string, err error) {
					t.Helper()
					if err == nil {
						return
					}
					if !errors.Is(err, backend.ErrCorrupt) {
						t.Errorf("%s with a %s in %s: %v; want success or an error wrapping ErrCorrupt", op, kind, target, err)
					} else if !strings.Contains(err.Error(), target) {
						t.Errorf("%s: %v; want the error to name the Redis key %s", op, err, target)
					}
				}
				m := backend.Member{Name: "n1", Identity: "10.0.0.1:acme:billing:80"}
				_, err := s.Heartbeat(ctx, group, m, time.Minute)
				check("Heartbeat", err)
				_, err = s.Members(ctx, group)
				check("Members", err)
				check("Leave", s.Leave(ctx, group, "n1"))
			})
		}
	}
}

// Odd bytes in lock names that users pass (unicode, punctuation, braces
// after the tag, very long names) round-trip: the lease is granted,
// read back under the same name and released.
func TestHostileKeyNames(t *testing.T) {
	s := newStore(t, server.Client(t))
	ctx := ctxT(t)
	for _, name := range []string{
		"发票:42", "invoice/42?x=1&y=%20", "a}b{c", "'quoted'\"double\"", "emoji-🔒", strings.Repeat("k", 500), "tab\u00a0nbsp", "back\\slash",
	} {
		key := backend.AppKey("acme", "billing", "lock", name)
		l, err := s.Acquire(ctx, key, "me", time.Minute, 0)
		if err != nil {
			if errors.Is(err, backend.ErrInvalidArgument) {
				continue // refused up front: fine
			}
			t.Fatalf("Acquire(%q): %v", name, err)
		}
		if g, err := s.Get(ctx, key); err != nil || g.Token != l.Token {
			t.Errorf("Get(%q) = %+v, %v; want token %d", name, g, err, l.Token)
		}
		if err := s.Release(ctx, key, "me", 0); err != nil {
			t.Errorf("Release(%q): %v", name, err)
		}
	}
}

// FLUSHALL and SCRIPT FLUSH mid-run: the store reloads its scripts, a
// lease the flush took is gone (not renewable), and the next grant's token
// is still above every earlier one.
func TestHostileFlushes(t *testing.T) {
	rdb := server.Client(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	key := backend.AppKey("hostile", "flush", "lock", "k")
	l1, err := s.Acquire(ctx, key, "a", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Renew(ctx, key, "a", time.Minute); err != nil {
		t.Fatalf("Renew after SCRIPT FLUSH: %v; want the script reloaded", err)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Renew(ctx, key, "a", time.Minute); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("Renew after FLUSHALL: %v; want ErrNotHeld (the lease is gone)", err)
	}
	l2, err := s.Acquire(ctx, key, "b", time.Minute, 0)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Token <= l1.Token {
		t.Fatalf("token after FLUSHALL %d, not above %d from before it", l2.Token, l1.Token)
	}
}

// forgedTokens are tokens no grant can have made: beyond the server's
// clock by more than backend.MaxTokenLead.
func forgedTokens() map[string]uint64 {
	return map[string]uint64{
		"MaxToken":       backend.MaxToken,
		"2^52":           1 << 52,
		"two years away": uint64(time.Now().Add(2 * backend.MaxTokenLead).UnixMicro()),
	}
}

// A lease or fencing counter written with a token no grant can have made
// (far beyond the server's clock) is reported by every call that reads it
// as ErrCorrupt naming the Redis key, never as a token a caller would keep
// as its floor; nothing is granted and the counter stays as it was; once
// the bad key is deleted, the key is granted again with a token from the
// clock.
func TestHostileForgedTokens(t *testing.T) {
	rdb := server.Client(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	i := 0
	for name, tok := range forgedTokens() {
		for _, where := range []string{"lease", "counter"} {
			i++
			key := backend.AppKey("forged", fmt.Sprint(i), "lock", "k")
			target := s.LeaseKey(key)
			value := fmt.Sprintf("%d forger", tok)
			if where == "counter" {
				target, value = s.FenceKey(key), fmt.Sprint(tok)
			}
			t.Run(where+"/"+name, func(t *testing.T) {
				if err := rdb.Set(ctx, target, value, time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
				check := func(op string, l backend.Lease, err error) {
					t.Helper()
					if !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), target) {
						t.Errorf("%s with token %d in the %s: %+v, %v; want ErrCorrupt naming %s", op, tok, where, l, err, target)
					}
				}
				l, err := s.Acquire(ctx, key, "me", time.Minute, 0)
				check("Acquire", l, err)
				l, err = s.AcquireQueued(ctx, key, "me", time.Minute, 0, time.Second)
				check("AcquireQueued", l, err)
				if where == "lease" {
					l, err = s.Get(ctx, key)
					check("Get", l, err)
					l, err = s.Renew(ctx, key, "forger", time.Minute)
					check("Renew by the forged owner", l, err)
					l, err = s.Renew(ctx, key, "me", time.Minute)
					check("Renew by another", l, err)
					l, err = s.Break(ctx, key, "forger", tok)
					check("Break", l, err)
				}
				if v, err := rdb.Get(ctx, target).Result(); err != nil || v != value {
					t.Errorf("the %s holds %q, %v after the calls; want %q left alone", where, v, err, value)
				}
				if where == "lease" {
					if v, err := rdb.Get(ctx, s.FenceKey(key)).Result(); !errors.Is(err, redis.Nil) {
						t.Errorf("the counter holds %q, %v; want none: nothing may be granted over a corrupt lease", v, err)
					}
				}
				if err := rdb.Del(ctx, target).Err(); err != nil {
					t.Fatal(err)
				}
				sent := time.Now()
				l, err = s.Acquire(ctx, key, "me", time.Minute, 0)
				if err != nil || l.Token > uint64(sent.Add(time.Hour).UnixMicro()) {
					t.Fatalf("Acquire once the forged %s was deleted: %+v, %v; want a grant with a token from the clock", where, l, err)
				}
				if err := s.Release(ctx, key, "me", 0); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// rawText reports whether msg carries a control character raw: stored
// text in an error must be quoted.
func rawText(msg string) bool { return strings.ContainsAny(msg, "\x1b\n\r\x07") }

// Owners, waiters and member names written with terminal escapes and
// newlines by another client of the server are not returned as read: Get,
// Acquire, Release, Leases, Members and Heartbeat fail with ErrCorrupt,
// naming the key and quoting the text. They used to come back raw, and
// batonctl printed the escapes to the operator's terminal.
func TestHostileNames(t *testing.T) {
	rdb := server.Client(t)
	s := newStore(t, rdb)
	ctx := ctxT(t)
	check := func(t *testing.T, op, key string, err error) {
		t.Helper()
		if !errors.Is(err, backend.ErrCorrupt) {
			t.Errorf("%s: %v; want ErrCorrupt", op, err)
		} else if !strings.Contains(err.Error(), key) || rawText(err.Error()) {
			t.Errorf("%s: %q; want the error to name %s and quote the stored text", op, err, key)
		}
	}
	for i, owner := range []string{"\x1b[2J\x1b[31mevil", "a\nb", "bell\x07", "\u202eevil"} {
		key := backend.AppKey("hostile", "names", "lock", fmt.Sprint(i))
		t.Run(fmt.Sprintf("owner %q", owner), func(t *testing.T) {
			if err := rdb.Set(ctx, s.LeaseKey(key), "123 "+owner, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			_, err := s.Get(ctx, key)
			check(t, "Get", key, err)
			_, err = s.Acquire(ctx, key, "me", time.Minute, 0)
			check(t, "Acquire", key, err)
			_, err = s.AcquireQueued(ctx, key, "me", time.Minute, 0, time.Minute)
			check(t, "AcquireQueued", key, err)
			check(t, "Release", key, s.Release(ctx, key, "me", 0))
			_, err = s.Leases(ctx, backend.AppKey("hostile", "names", "lock", fmt.Sprint(i)))
			check(t, "Leases", key, err)
		})
	}
	t.Run("waiter", func(t *testing.T) {
		key := backend.AppKey("hostile", "names", "lock", "waiter")
		if _, err := s.AcquireQueued(ctx, key, "a", time.Minute, 0, time.Minute); err != nil {
			t.Fatal(err)
		}
		line, reqs := s.LineKeys(key)
		const name = "\x1b]0;pwned\x07"
		due := time.Now().Add(time.Hour).UnixMilli()
		rdb.ZAdd(ctx, line, redis.Z{Score: 1, Member: name})
		rdb.HSet(ctx, reqs, name, fmt.Sprintf("1000 0 %d", due))
		_, err := s.Leases(ctx, key)
		check(t, "Leases", key, err)
		_, err = s.AcquireQueued(ctx, key, "b", time.Minute, 0, 0)
		check(t, "AcquireQueued with patience 0", key, err)
		// A join of the held key reads no place, so it names nobody; the
		// release after it reads the forged one.
		var he *backend.HeldError
		if _, err = s.AcquireQueued(ctx, key, "b", time.Minute, 0, time.Minute); !errors.As(err, &he) || he.Next != "" {
			t.Errorf("b joining the line: %v; want ErrHeld naming a and nobody first in line", err)
		}
		check(t, "Release", key, s.Release(ctx, key, "a", 0))
	})
	for _, forged := range []backend.Member{{Name: "\x1b[31mname", Identity: "id"}, {Name: "name", Identity: "id\x1b[8m"}} {
		t.Run(fmt.Sprintf("member %q", forged), func(t *testing.T) {
			group := backend.AppKey("hostile", "names"+fmt.Sprint(len(forged.Name)), "members")
			keys := s.GroupKeys(group)
			exp := float64(time.Now().Add(time.Hour).UnixMilli())
			rdb.ZAdd(ctx, keys[0], redis.Z{Score: exp, Member: forged.Name})
			rdb.HSet(ctx, keys[1], forged.Name, fmt.Sprintf("%d\n%s\n", time.Now().UnixMilli(), forged.Identity))
			rdb.HSet(ctx, keys[2], forged.Identity, forged.Name)
			_, err := s.Members(ctx, group)
			check(t, "Members", group, err)
			if forged.Identity == "id" {
				_, err = s.Heartbeat(ctx, group, backend.Member{Name: "me", Identity: "id"}, time.Minute)
				check(t, "Heartbeat", group, err)
			}
		})
	}
}
