package redisbackend_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/internal/testenv"
)

// A server restarted without its data lost the watch marker with it. The
// watcher's store marks the key again as soon as its subscription is
// back, not at its next refresh, so that every release of a plain lease
// after that is published: here the refresh is 20 s away, yet both cycles
// after the restart reach the watcher as releases (the first grant is
// flagged contended anyway, having found no counter; the second is a
// plain lease that only the marker makes a published one).
func TestWatchMarkRestoredAfterEmptyRestart(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	watcher := newStore(t, r.Client(t))
	const markerTTL = time.Minute // refreshed every 20 s
	redisbackend.SetMarkerTTL(watcher, markerTTL)
	owner := newStore(t, r.Client(t))
	ctx := ctxT(t)
	const key = "{remark:restart}:lock"
	w, err := watcher.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	mark := watcher.MarkerKey(key)
	if n := rdb.Exists(ctx, mark).Val(); n != 1 {
		t.Fatalf("the watch marker %s does not exist after Watch returned", mark)
	}
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	// The marker comes back once the subscription does: well before the
	// refresh (20 s away), within this test's patience (10 s).
	for {
		n, err := rdb.Exists(ctx, mark).Result()
		if err == nil && n == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the watch marker %s was not set again within %v of an empty restart (refresh every %v)", mark, patience, markerTTL/3)
		case <-time.After(10 * time.Millisecond):
		}
	}
	for cycle := range 2 {
		if _, err := owner.Acquire(ctx, key, "me", time.Minute, 0); err != nil {
			t.Fatal(err)
		}
		if err := owner.Release(ctx, key, "me", 0); err != nil {
			t.Fatal(err)
		}
		// Signals that the connection broke and came back say "may be
		// free"; the release itself says "released".
		for released := false; !released; {
			select {
			case ev := <-w.C():
				released = ev.Kind == backend.EventReleased
			case <-ctx.Done():
				t.Fatalf("release %d after the restart never reached the watcher", cycle+1)
			}
		}
	}
}

// A pub/sub connection that went silent is replaced by a new one; the
// key is marked again once the new subscription is confirmed, so a marker
// that lapsed while the network was cut (here deleted, to stand for that)
// is back long before the next refresh.
func TestWatchMarkRestoredAfterRedial(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client(t)
	proxy := testenv.NewProxy(t, r.Addr())
	opts := r.Options()
	opts.Addr = proxy.Addr()
	wc := redis.NewClient(opts)
	t.Cleanup(func() { wc.Close() })
	watcher := newStore(t, wc, redisbackend.WithHealthCheck(50*time.Millisecond))
	const markerTTL = time.Minute // refreshed every 20 s
	redisbackend.SetMarkerTTL(watcher, markerTTL)
	owner := newStore(t, r.Client(t))
	ctx := ctxT(t)
	const key = "{remark:redial}:lock"
	w, err := watcher.Watch(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	defer proxy.Close() // before the stores close: their calls then fail at once

	proxy.Blackhole(true)
	// Unanswered pings make the store replace the connection, which it
	// tells the watcher about.
	select {
	case <-w.C():
	case <-ctx.Done():
		t.Fatal("no signal after the pub/sub connection went silent")
	}
	mark := watcher.MarkerKey(key)
	if err := rdb.Del(ctx, mark).Err(); err != nil {
		t.Fatal(err)
	}
	proxy.Blackhole(false)
	for {
		n, err := rdb.Exists(ctx, mark).Result()
		if err == nil && n == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the watch marker %s was not set again within %v of the connection's replacement (refresh every %v)", mark, patience, markerTTL/3)
		case <-time.After(10 * time.Millisecond):
		}
	}
	for cycle := range 2 {
		if _, err := owner.Acquire(ctx, key, "me", time.Minute, 0); err != nil {
			t.Fatal(err)
		}
		if err := owner.Release(ctx, key, "me", 0); err != nil {
			t.Fatal(err)
		}
		for released := false; !released; {
			select {
			case ev := <-w.C():
				released = ev.Kind == backend.EventReleased
			case <-ctx.Done():
				t.Fatalf("release %d after the connection's replacement never reached the watcher", cycle+1)
			}
		}
	}
}
