package redisbackend_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

// Many waiters of one process take turns on a few keys through
// AcquireQueued and AwaitHandover with short waits, while watches open and
// close on the same keys: no two hold a key at once by their own count,
// tokens of a key only increase, every waiter gets its turns, and Close
// then returns with no goroutine left (TestMain checks for leaks).
func TestHandoverChurn(t *testing.T) {
	r := testenv.NewRedis(t)
	s := newStore(t, r.Client(t))
	ctx := ctxT(t)
	const keys, perKey, turns = 3, 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, keys*perKey*turns+keys)
	for k := range keys {
		key := fmt.Sprintf("{churn}:%d", k)
		var holders atomic.Int32
		var mu sync.Mutex
		var last uint64
		for w := range perKey {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for turn := range turns {
					owner := fmt.Sprintf("w%d-%d", w, turn)
					var l backend.Lease
					for {
						var err error
						l, err = s.AcquireQueued(ctx, key, owner, 5*time.Second, 0, 5*time.Second)
						if err == nil {
							break
						}
						if !errors.Is(err, backend.ErrHeld) {
							errs <- fmt.Errorf("%s AcquireQueued: %w", owner, err)
							return
						}
						got, ok, err := s.AwaitHandover(ctx, key, owner, 5*time.Millisecond)
						if err != nil {
							errs <- fmt.Errorf("%s AwaitHandover: %w", owner, err)
							return
						}
						if ok {
							l = got
							break
						}
					}
					if n := holders.Add(1); n != 1 {
						errs <- fmt.Errorf("%s holds %q with %d others", owner, key, n-1)
					}
					mu.Lock()
					if l.Token <= last {
						errs <- fmt.Errorf("%s got token %d of %q after %d", owner, l.Token, key, last)
					}
					last = l.Token
					mu.Unlock()
					holders.Add(-1)
					if err := s.Release(ctx, key, owner, 0); err != nil {
						errs <- fmt.Errorf("%s Release: %w", owner, err)
						return
					}
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				w, err := s.Watch(ctx, key)
				if err != nil {
					errs <- fmt.Errorf("Watch(%q): %w", key, err)
					return
				}
				w.Close()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(patience):
		t.Errorf("Close did not return within %v", patience)
	}
}

// A release that hands a key over publishes the handover on the wake-up
// channel of the waiter's store alone, so that the other stores waiting
// for the key are not sent it: on the key's own channel only while a
// store watches the key (watchers hear of every release), and for a
// waiter of an older version, which named no wake-up channel, or one
// whose wake-up id is not in baton's shape.
func TestHandoverWakesTheWaitersStoreAlone(t *testing.T) {
	ctx := ctxT(t)
	admin := server.Client(t)
	holder, b, c := newStore(t, server.Client(t)), newStore(t, server.Client(t)), newStore(t, server.Client(t))
	key := "{wake:test}:lock"
	name := holder.LeaseKey(key)
	if b.WakeChannel(key) == c.WakeChannel(key) || b.WakeChannel(key) == name {
		t.Fatalf("stores share a wake-up channel: %q, %q, key's %q", b.WakeChannel(key), c.WakeChannel(key), name)
	}
	ps := admin.Subscribe(ctx, name, b.WakeChannel(key), c.WakeChannel(key))
	defer ps.Close()
	for range 3 {
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// heard returns the messages published up to now, by channel.
	heard := func() map[string][]string {
		t.Helper()
		if err := admin.Publish(ctx, name, "end").Err(); err != nil {
			t.Fatal(err)
		}
		got := map[string][]string{}
		for {
			m, err := ps.ReceiveMessage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if m.Channel == name && m.Payload == "end" {
				return got
			}
			got[m.Channel] = append(got[m.Channel], m.Payload)
		}
	}
	want := func(what string, got map[string][]string, channel, owner string) {
		t.Helper()
		if len(got) != 1 || len(got[channel]) != 1 || !strings.HasSuffix(got[channel][0], " "+owner) {
			t.Fatalf("%s: published %q, want one handover to %s on %q alone", what, got, owner, channel)
		}
	}
	if _, err := holder.Acquire(ctx, key, "a", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		s     *redisbackend.Store
		owner string
	}{{b, "b"}, {c, "c"}} {
		if _, err := w.s.AcquireQueued(ctx, key, w.owner, time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("%s's AcquireQueued: %v, want ErrHeld", w.owner, err)
		}
	}
	if err := holder.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}
	want("a handover to b", heard(), b.WakeChannel(key), "b")

	// Watched: on the key's channel too.
	watch, err := holder.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Release(ctx, key, "b", 0); err != nil {
		t.Fatal(err)
	}
	got := heard()
	if len(got) != 2 || len(got[c.WakeChannel(key)]) != 1 || len(got[name]) != 1 {
		t.Fatalf("a handover to c while the key is watched: published %q, want it on c's wake-up channel and the key's", got)
	}
	watch.Close()
	if err := admin.Del(ctx, holder.MarkerKey(key)).Err(); err != nil {
		t.Fatal(err)
	}

	// Places of an older version (no wake-up id) and a forged id.
	line, requests := holder.LineKeys(key)
	now, err := admin.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	due := strconv.FormatInt(now.UnixMilli()+60_000, 10)
	if err := admin.ZAdd(ctx, line, redis.Z{Score: float64(now.UnixMicro()), Member: "old"}, redis.Z{Score: float64(now.UnixMicro() + 1), Member: "forged"}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.HSet(ctx, requests, "old", "60000 0 "+due, "forged", "60000 0 "+due, "wake forged", "not hex!").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, key, "c", 0); err != nil {
		t.Fatal(err)
	}
	want("a handover to a waiter of an older version", heard(), name, "old")
	if err := holder.Release(ctx, key, "old", 0); err != nil {
		t.Fatal(err)
	}
	want("a handover to a waiter with a forged wake-up id", heard(), name, "forged")
	if n, err := admin.HLen(ctx, requests).Result(); err != nil || n != 0 {
		t.Fatalf("the requests left %d fields (%v), want none", n, err)
	}
}
