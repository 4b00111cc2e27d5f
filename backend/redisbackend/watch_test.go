package redisbackend_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/testkit/testenv"
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
	waitMarked(ctx, t, rdb, mark, "an empty restart", markerTTL/3)
	// Signals that the connection broke and came back say "may be free";
	// the release itself says "released".
	releasesReach(ctx, t, owner, w, key, "the restart")
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
	waitMarked(ctx, t, rdb, mark, "the connection's replacement", markerTTL/3)
	releasesReach(ctx, t, owner, w, key, "the connection's replacement")
}

// waitMarked waits until the watch marker mark exists again after event,
// failing t when ctx ends first.
func waitMarked(ctx context.Context, t *testing.T, rdb *redis.Client, mark, event string, refresh time.Duration) {
	t.Helper()
	for {
		n, err := rdb.Exists(ctx, mark).Result()
		if err == nil && n == 1 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the watch marker %s was not set again within %v of %s (refresh every %v)", mark, patience, event, refresh)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// releasesReach takes and releases key twice through owner and waits for
// each release to reach w as EventReleased, past any "may be free"
// signals of the connection that broke and came back.
func releasesReach(ctx context.Context, t *testing.T, owner *redisbackend.Store, w backend.Watch, key, after string) {
	t.Helper()
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
				t.Fatalf("release %d after %s never reached the watcher", cycle+1, after)
			}
		}
	}
}
