package redisbackend_test

import (
	"testing"
	"time"

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
