package redisbackend_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

// awaitResult is what one AwaitHandover returned.
type awaitResult struct {
	l   backend.Lease
	ok  bool
	err error
}

// waitUntil polls cond until it holds, failing t after patience. It waits
// for a state of the server, not for a margin of time.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %v", what, patience)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Handover waits hold no connection of the client's pool. A client with
// two connections (go-redis's default PoolTimeout) waits on more contended
// keys than that while, on the same client, an elector renews its lease:
// every renewal succeeds and none runs into the pool's timeout. Once the
// holders release, every waiter gets its key.
func TestAwaitHandoverLeavesThePoolFree(t *testing.T) {
	r := testenv.NewRedis(t)
	opts := r.Options()
	opts.PoolSize = 2
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { rdb.Close() })
	s := newStore(t, rdb)
	holders := newStore(t, r.Client(t))
	admin := r.Client(t)
	ctx := ctxT(t)

	const keys = 4 // more than the pool's connections
	const role = "{pool:test}:role"
	if _, err := s.Acquire(ctx, role, "elector", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	results := make([]chan awaitResult, keys)
	for i := range keys {
		key := fmt.Sprintf("{pool:test}:lock:%d", i)
		if _, err := holders.Acquire(ctx, key, "holder", time.Minute, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AcquireQueued(ctx, key, "waiter", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("the waiter's AcquireQueued of %s: %v, want ErrHeld", key, err)
		}
	}
	for i := range keys {
		key := fmt.Sprintf("{pool:test}:lock:%d", i)
		results[i] = make(chan awaitResult, 1)
		go func() {
			l, ok, err := s.AwaitHandover(ctx, key, "waiter", 30*time.Second)
			results[i] <- awaitResult{l, ok, err}
		}()
	}
	// Wait until every waiter waits at the server: subscribed to its
	// key's channel, or blocked in a read (as waiters once were).
	waitUntil(t, "all waiters waiting", func() bool {
		blocked := 0
		if info, err := admin.Info(ctx, "clients").Result(); err == nil {
			for line := range strings.SplitSeq(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "blocked_clients:"); ok {
					blocked, _ = strconv.Atoi(v)
				}
			}
		}
		if blocked >= opts.PoolSize {
			return true
		}
		channels := make([]string, keys)
		for i := range keys {
			channels[i] = s.WakeChannel(fmt.Sprintf("{pool:test}:lock:%d", i))
		}
		subs, err := admin.PubSubNumSub(ctx, channels...).Result()
		if err != nil {
			return false
		}
		for _, n := range subs {
			if n == 0 {
				return false
			}
		}
		return true
	})

	before := rdb.PoolStats().Timeouts
	for i := range 20 {
		if _, err := s.Renew(ctx, role, "elector", time.Minute); err != nil {
			t.Fatalf("renewal %d while %d handover waits run on a pool of %d: %v", i, keys, opts.PoolSize, err)
		}
	}
	if n := rdb.PoolStats().Timeouts - before; n != 0 {
		t.Errorf("%d calls timed out waiting for a pool connection", n)
	}

	for i := range keys {
		key := fmt.Sprintf("{pool:test}:lock:%d", i)
		if err := holders.Release(ctx, key, "holder", 0); err != nil {
			t.Fatal(err)
		}
		res := <-results[i]
		if res.err != nil || !res.ok || res.l.Owner != "waiter" {
			t.Errorf("the waiter's AwaitHandover of %s: %+v, ok %v, err %v; want the key handed over", key, res.l, res.ok, res.err)
		}
	}
}

// A handover published while nobody waited for it, or before the waiter
// subscribed, is found at once: by the channel's memory or by the look in
// the mailbox after the subscription is confirmed.
func TestAwaitHandoverFindsEarlierHandovers(t *testing.T) {
	rdb := server.Client(t)
	s := newStore(t, rdb)
	other := newStore(t, server.Client(t))
	ctx := ctxT(t)

	cases := []struct {
		name      string
		subscribe bool // the waiter's store is subscribed to the key when the handover happens
	}{{"NotSubscribed", false}, {"Subscribed", true}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			key := "{early:test}:" + c.name
			if _, err := other.Acquire(ctx, key, "holder", time.Minute, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AcquireQueued(ctx, key, "first", 7*time.Second, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
				t.Fatalf("first's AcquireQueued: %v, want ErrHeld", err)
			}
			// A watch of the waiter's store subscribes it to the key's
			// channel; one of another store does not.
			watcher := other
			if c.subscribe {
				watcher = s
			}
			w, err := watcher.Watch(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if err := other.Release(ctx, key, "holder", 0); err != nil {
				t.Fatal(err)
			}
			// The handover has happened once watchers hear of it.
			select {
			case ev := <-w.C():
				if ev.Kind != backend.EventRenewed {
					t.Fatalf("watch event %v, want %v", ev.Kind, backend.EventRenewed)
				}
			case <-ctx.Done():
				t.Fatal("no event for the handover")
			}
			heard := time.Now()
			time.Sleep(20 * time.Millisecond) // the handover ages before it is collected
			var l backend.Lease
			var ok bool
			var called time.Time
			calls := serverCalls(t, rdb, func() {
				called = time.Now()
				l, ok, err = s.AwaitHandover(ctx, key, "first", patience)
			})
			if err != nil || !ok || l.Owner != "first" {
				t.Fatalf("first's AwaitHandover after the handover: %+v, ok %v, err %v; want its lease", l, ok, err)
			}
			// Its TTL is what was left: less than the 7s granted by at
			// least the time since the handover was heard of (the
			// server's PTTL is in whole ms).
			if most := 7*time.Second - called.Sub(heard) + time.Millisecond; l.TTL <= 0 || l.TTL > most {
				t.Errorf("first's lease handed over at least %v before the call has TTL %v; want at most %v", called.Sub(heard), l.TTL, most)
			}
			if c.subscribe && calls["get"]+calls["multi"] != 0 {
				t.Errorf("first's AwaitHandover read the mailbox (%v); the subscribed store had seen the handover", calls)
			}
			if err := s.Release(ctx, key, "first", 0); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A wait ends at its max by the client's clock, not at the server's next
// clock tick: on a server with hz 1, a blocking read with a 5 ms timeout
// ends only about a second later.
func TestAwaitHandoverEndsOnTime(t *testing.T) {
	r := testenv.NewRedis(t, testenv.RedisOptions{Config: []string{"hz 1"}})
	s := newStore(t, r.Client(t))
	ctx := ctxT(t)
	const key = "{ontime:test}:lock"
	if _, err := s.Acquire(ctx, key, "holder", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireQueued(ctx, key, "waiter", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("the waiter's AcquireQueued: %v, want ErrHeld", err)
	}
	const waits, max = 5, 5 * time.Millisecond
	start := time.Now()
	for i := range waits {
		if _, ok, err := s.AwaitHandover(ctx, key, "waiter", max); ok || err != nil {
			t.Fatalf("wait %d: ok %v, err %v; want ok false", i, ok, err)
		}
	}
	// Server ticks would make this about waits seconds; the bound leaves
	// a loaded machine hundreds of milliseconds per wait.
	if took := time.Since(start); took > waits*time.Second/2 {
		t.Errorf("%d waits of %v took %v; each should end soon after its max", waits, max, took)
	}
}

// A server that stops answering (SIGSTOP) delays only the calls that wait
// for it, each until its own deadline: watches opened and closed and
// handover waits on other keys, all from other goroutines, return soon
// after their contexts end, while the subscriber's connection is being
// re-dialed.
func TestStalledServerDelaysOnlyItsCallers(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	s := newStore(t, rdb, redisbackend.WithHealthCheck(50*time.Millisecond))
	ctx := ctxT(t)
	// A watch that is confirmed before the pause, so that the connection
	// exists and the health check re-dials it during the pause.
	w0, err := s.Watch(ctx, "{stall:test}:before")
	if err != nil {
		t.Fatal(err)
	}
	defer w0.Close()
	if err := r.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Resume() })

	const deadline = 300 * time.Millisecond
	const slack = 2 * time.Second // generous; the client's read timeout is 3 s
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 8 {
		wg.Go(func() {
			for i := range 3 {
				key := fmt.Sprintf("{stall:test}:%d:%d", g, i)
				cctx, cancel := context.WithTimeout(ctx, deadline)
				start := time.Now()
				var err error
				if g%2 == 0 {
					var w backend.Watch
					w, err = s.Watch(cctx, key)
					if err == nil {
						w.Close()
					}
				} else {
					_, _, err = s.AwaitHandover(cctx, key, "waiter", time.Minute)
				}
				cancel()
				if took := time.Since(start); took > deadline+slack {
					errs <- fmt.Errorf("goroutine %d call %d took %v with a deadline of %v (err %v)", g, i, took, deadline, err)
				}
				if err == nil {
					errs <- fmt.Errorf("goroutine %d call %d succeeded on a paused server", g, i)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// Closing the first watch does not wait for the server either.
	start := time.Now()
	w0.Close()
	if took := time.Since(start); took > slack {
		t.Errorf("closing a watch on a paused server took %v", took)
	}
}

// A handover published while the waiter's pub/sub connection is broken is
// not lost for longer than the wait's max: the wait finds it after the
// re-subscription, or ends at max and the waiter's next AcquireQueued
// returns it.
func TestAwaitHandoverAcrossABrokenConnection(t *testing.T) {
	r := testenv.NewRedis(t)
	admin := r.Client(t)
	s := newStore(t, r.Client(t))
	holders := newStore(t, r.Client(t))
	ctx := ctxT(t)
	const key = "{broken:test}:lock"
	const max = 500 * time.Millisecond
	if _, err := holders.Acquire(ctx, key, "holder", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireQueued(ctx, key, "waiter", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("the waiter's AcquireQueued: %v, want ErrHeld", err)
	}
	done := make(chan awaitResult, 1)
	start := time.Now()
	go func() {
		l, ok, err := s.AwaitHandover(ctx, key, "waiter", max)
		done <- awaitResult{l, ok, err}
	}()
	waitUntil(t, "the waiter subscribed", func() bool {
		n, err := admin.PubSubNumSub(ctx, s.WakeChannel(key)).Result()
		return err == nil && n[s.WakeChannel(key)] > 0
	})
	if err := admin.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	if err := holders.Release(ctx, key, "holder", 0); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if took := time.Since(start); took > max+2*time.Second {
		t.Errorf("AwaitHandover with max %v returned after %v", max, took)
	}
	if res.err != nil {
		t.Fatalf("AwaitHandover across a broken connection: %v", res.err)
	}
	if res.ok {
		if res.l.Owner != "waiter" {
			t.Fatalf("AwaitHandover returned %+v, want the waiter's lease", res.l)
		}
		return
	}
	l, err := s.AcquireQueued(ctx, key, "waiter", time.Minute, 0, time.Minute)
	if err != nil || l.Owner != "waiter" {
		t.Fatalf("the waiter's AcquireQueued after a wait that missed the handover: %+v, %v; want the lease handed to it", l, err)
	}
}

// A handover the store saw on the key's channel is not returned by a
// wait after its owner already has the lease from AcquireQueued: the
// owner could have released it since, before the release's message
// arrived, and must not be told it holds the key again.
func TestAwaitHandoverForgetsWhatWasTaken(t *testing.T) {
	s := newStore(t, server.Client(t))
	holders := newStore(t, server.Client(t))
	ctx := ctxT(t)
	const key = "{taken:test}:lock"
	if _, err := holders.Acquire(ctx, key, "holder", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireQueued(ctx, key, "a", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("a's AcquireQueued: %v, want ErrHeld", err)
	}
	w, err := s.Watch(ctx, key) // subscribes a's store to the key's channel
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := holders.Release(ctx, key, "holder", 0); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.C(): // a's store has seen the handover
	case <-ctx.Done():
		t.Fatal("no event for the handover")
	}
	l, err := s.AcquireQueued(ctx, key, "a", time.Minute, 0, time.Minute)
	if err != nil || l.Owner != "a" {
		t.Fatalf("a's AcquireQueued of the key handed to it: %+v, %v", l, err)
	}
	if got, ok, err := s.AwaitHandover(ctx, key, "a", 100*time.Millisecond); ok || err != nil {
		t.Errorf("a's AwaitHandover after it took the handed key by AcquireQueued: %+v, ok %v, err %v; want ok false", got, ok, err)
	}
	if err := s.Release(ctx, key, "a", 0); err != nil {
		t.Fatal(err)
	}
}

// A waiter whose store's subscription to the key held when its
// AcquireQueued was sent, and has held since, hears of every handover to
// it on the channel: its AwaitHandover reads no mailbox (no MULTI, GET,
// PTTL, EXEC per contended acquisition), and still gets the key handed
// to it. A waiter that asked before the subscription held still looks.
func TestAwaitHandoverSkipsTheLookWhenSubscribedBeforeAsking(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	s := newStore(t, rdb)
	other := newStore(t, r.Client(t))
	ctx := ctxT(t)
	const key = "{look:test}:lock"
	if _, err := other.Acquire(ctx, key, "holder", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	queue := func(owner string) {
		t.Helper()
		if _, err := s.AcquireQueued(ctx, key, owner, time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("%s's AcquireQueued: %v, want ErrHeld", owner, err)
		}
	}
	// Asked before the store subscribed: the wait looks once subscribed.
	queue("early")
	calls := serverCalls(t, rdb, func() {
		if _, ok, err := s.AwaitHandover(ctx, key, "early", 200*time.Millisecond); ok || err != nil {
			t.Fatalf("early's AwaitHandover: ok %v, err %v; want neither", ok, err)
		}
	})
	if calls["multi"] != 1 {
		t.Errorf("a wait asked before the subscription held made %v; want one look in the mailbox (MULTI)", calls)
	}
	if err := s.Dequeue(ctx, key, "early"); err != nil {
		t.Fatal(err)
	}

	// A watch holds the subscription confirmed from here on.
	w, err := s.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	queue("first")
	calls = serverCalls(t, rdb, func() {
		if _, ok, err := s.AwaitHandover(ctx, key, "first", 50*time.Millisecond); ok || err != nil {
			t.Fatalf("first's AwaitHandover: ok %v, err %v; want neither", ok, err)
		}
	})
	if len(calls) != 0 {
		t.Errorf("a wait asked while the subscription held made the server calls %v; want none", calls)
	}

	queue("first")
	res := make(chan awaitResult, 1)
	go func() {
		l, ok, err := s.AwaitHandover(ctx, key, "first", patience)
		res <- awaitResult{l, ok, err}
	}()
	if err := other.Release(ctx, key, "holder", 0); err != nil {
		t.Fatal(err)
	}
	if got := <-res; got.err != nil || !got.ok || got.l.Owner != "first" {
		t.Fatalf("first's AwaitHandover across the release: %+v, ok %v, err %v; want the key handed to it", got.l, got.ok, got.err)
	}
}

// The look of a wait that began before its store subscribed reads the
// key's lease: a contended lease of the owner is a handover to it; its
// plain or released lease, another's lease, and a key in the shape of no
// lease are not (the last fails as corrupt). A release writes no mailbox.
func TestAwaitHandoverLookReadsTheLease(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	other := newStore(t, r.Client(t))
	ctx := ctxT(t)
	cases := []struct {
		name, value string
		handed      bool
		corrupt     bool
	}{
		{"Contended", "1795537382000548 me contended", true, false},
		{"Plain", "1795537382000548 me", false, false},
		{"Released", "1795537382000548 me released", false, false},
		{"Another", "1795537382000548 you contended", false, false},
		{"Garbage", "me contended", false, true},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t, rdb) // not subscribed to the key: the wait looks
			key := fmt.Sprintf("{lookup:%d}:lock", i)
			if err := rdb.Set(ctx, s.LeaseKey(key), c.value, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			l, ok, err := s.AwaitHandover(ctx, key, "me", 100*time.Millisecond)
			switch {
			case c.corrupt:
				if !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), s.LeaseKey(key)) {
					t.Errorf("AwaitHandover over %q: %v; want ErrCorrupt naming the lease key", c.value, err)
				}
			case err != nil || ok != c.handed:
				t.Errorf("AwaitHandover over %q: %+v, ok %v, err %v; want ok %v", c.value, l, ok, err, c.handed)
			case ok && (l.Token != 1795537382000548 || l.TTL <= 0 || l.TTL > time.Minute):
				t.Errorf("AwaitHandover over %q: %+v; want its token and what is left of its minute", c.value, l)
			}
		})
	}

	// A real handover: the waiter's store subscribes only after it.
	s := newStore(t, rdb)
	const key = "{lookup:real}:lock"
	if _, err := other.Acquire(ctx, key, "holder", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcquireQueued(ctx, key, "me", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("me's AcquireQueued: %v, want ErrHeld", err)
	}
	if err := other.Release(ctx, key, "holder", 0); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, s.MailboxKey(key)).Val(); n != 0 {
		t.Errorf("the handing release wrote the mailbox %s", s.MailboxKey(key))
	}
	if l, ok, err := s.AwaitHandover(ctx, key, "me", patience); err != nil || !ok || l.Owner != "me" {
		t.Errorf("me's AwaitHandover after the handover: %+v, ok %v, err %v; want its lease", l, ok, err)
	}
}

// The store notes an owner's ask only until the wait that follows it: a
// granted AcquireQueued, a try without patience and a wait leave no note,
// and the notes of refused owners that never wait stay bounded, however
// many claims pass through a key that stays subscribed.
func TestAskNotesDoNotPileUp(t *testing.T) {
	s := newStore(t, server.Client(t))
	ctx := ctxT(t)
	const key = "{notes:test}:lock"
	w, err := s.Watch(ctx, key) // keeps the key's channel subscribed
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for i := range 10 {
		owner := fmt.Sprintf("granted-%d", i)
		if _, err := s.AcquireQueued(ctx, key, owner, time.Minute, 0, time.Minute); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AcquireQueued(ctx, key, "try", time.Minute, 0, 0); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("a try while %s holds the key: %v, want ErrHeld", owner, err)
		}
		if err := s.Release(ctx, key, owner, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.AskNotes(key); n != 0 {
		t.Errorf("%d ask notes after granted calls and tries; want none", n)
	}
	if _, err := s.Acquire(ctx, key, "holder", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		owner := fmt.Sprintf("refused-%d", i)
		if _, err := s.AcquireQueued(ctx, key, owner, time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
			t.Fatalf("%s's AcquireQueued: %v, want ErrHeld", owner, err)
		}
		if err := s.Dequeue(ctx, key, owner); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.AskNotes(key); n > 64 {
		t.Errorf("%d ask notes of refused owners that never waited; want at most 64", n)
	}
	if err := s.Release(ctx, key, "holder", 0); err != nil {
		t.Fatal(err)
	}
}

// A look that the server refuses to queue (MULTI answered EXECABORT: a
// restarted server LOADING its data, or, here, a user refused GET) fails
// with the refusal itself, which says why and which callers can tell
// apart, not with the bare abort.
func TestAwaitHandoverLookSaysWhyItWasRefused(t *testing.T) {
	r := testenv.NewRedis(t)
	ctx := ctxT(t)
	full := newStore(t, r.Client(t))
	rules := strings.Replace(redisbackend.ACLRules(""), " +get", "", 1)
	aclUser(t, r, "noget", "s3cret", rules)
	s := newStore(t, aclClient(t, r, "noget", "s3cret"))
	const key = "{look:test}:lock"
	if _, err := full.Acquire(ctx, key, "holder", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := full.AcquireQueued(ctx, key, "waiter", time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
		t.Fatalf("the waiter's AcquireQueued: %v, want ErrHeld", err)
	}
	_, ok, err := s.AwaitHandover(ctx, key, "waiter", 30*time.Second)
	if ok || err == nil || !strings.Contains(err.Error(), "NOPERM") || !strings.Contains(err.Error(), "get") {
		t.Fatalf("AwaitHandover whose look may not GET: ok %v, err %v; want the NOPERM refusal of GET", ok, err)
	}
}
