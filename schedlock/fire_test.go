package schedlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/jonboulle/clockwork"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/testkit/testenv"
)

// waitFree waits until the store has let go of key: released, and kept
// no longer (lockAtLeastFor has passed).
func waitFree(t *testing.T, st backend.Store, key string) {
	t.Helper()
	waitFor(t, "the job lock to be free", func() bool {
		_, err := st.Get(context.Background(), key)
		return errors.Is(err, backend.ErrNotFound)
	})
}

// An instance that starts a fire late — after the instance that ran it on
// time released the lock and lockAtLeastFor passed — skips it with
// already-ran (ErrLocked); a later fire runs, an earlier one is skipped too.
func TestLateFireIsSkippedByRun(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		f := newFleet(t, kind, 2, fastRole)
		var j journal
		const atLeast = 100 * time.Millisecond
		a := lockGate(t, f, 0, "nightly", 5*time.Second, atLeast)
		b := lockGate(t, f, 1, "nightly", 5*time.Second, atLeast, j.observer(1))
		ctx := ctxT(t)
		fire := time.Now().Truncate(time.Second)
		var runs atomic.Int32
		job := func(want time.Time) func(context.Context) error {
			return func(ctx context.Context) error {
				runs.Add(1)
				if got, ok := schedlock.Fire(ctx); !ok || !got.Equal(want) {
					t.Errorf("Fire = %v, %v; want %v", got, ok, want)
				}
				return nil
			}
		}
		if err := schedlock.Run(ctx, a.Job(), fire, job(fire)); err != nil {
			t.Fatalf("the fire on time: %v", err)
		}
		waitFree(t, f.stores[0], a.LockKey())

		err := schedlock.Run(ctx, b.Job(), fire, job(fire))
		var skip *schedlock.SkipError
		if !errors.As(err, &skip) || !alreadyRan(err) {
			t.Fatalf("the same fire started late: %v; want a skip labelled already-ran", err)
		}
		if skip.Label() != "already-ran" || !skip.Fire.Equal(fire) || !skip.Done.Equal(fire) {
			t.Fatalf("skip %q: label %q, fire %v, done %v", skip, skip.Label(), skip.Fire, skip.Done)
		}
		if n := j.count(1, schedlock.EventSkipped, "already-ran"); n != 1 {
			t.Fatalf("%d already-ran skips observed, want 1", n)
		}
		if _, err := f.stores[1].Get(ctx, b.LockKey()); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("the skipped run left the lock held: %v", err)
		}

		next := fire.Add(time.Second)
		if err := schedlock.Run(ctx, b.Job(), next, job(next)); err != nil {
			t.Fatalf("the next fire: %v", err)
		}
		waitFree(t, f.stores[0], a.LockKey())
		if err := schedlock.Run(ctx, a.Job(), fire.Add(-time.Second), job(fire)); !alreadyRan(err) {
			t.Fatalf("an earlier fire started late: %v; want a skip labelled already-ran", err)
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("%d runs, want 2 (the fire and the next)", n)
		}
	})
}

// gocron on two instances, each scheduler on a clock of its own: instance
// 0 runs the fire when it comes; instance 1, "paused" over it (its clock
// held back), starts the same fire once the lock was released and
// lockAtLeastFor passed, and skips it as already-ran, then runs the next
// fire. The fire time comes from gocron (WithScheduler).
func TestLateGocronFireIsSkipped(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		f := newFleet(t, kind, 2, fastRole)
		// Fires on whole seconds, in the past of the real clock.
		start := time.Now().Truncate(time.Second).Add(-10*time.Second - 500*time.Millisecond)
		fire := start.Add(500 * time.Millisecond)
		var sk skips
		ran := make(chan time.Time, 10)
		clocks := make([]*clockwork.FakeClock, 2)
		var key string
		jobs := make([]gocron.Job, 2)
		for i := range 2 {
			clocks[i] = clockwork.NewFakeClockAt(start)
			s := newScheduler(t, gocron.WithClock(clocks[i]))
			g := lockGate(t, f, i, "every-second", 5*time.Second, 100*time.Millisecond, schedlock.WithScheduler(s))
			key = g.LockKey()
			var err error
			jobs[i], err = s.NewJob(gocron.CronJob("* * * * * *", true),
				gocron.NewTask(func(ctx context.Context) {
					fire, _ := schedlock.Fire(ctx)
					ran <- fire
				}),
				gocron.WithName("every-second"), g.Job(), sk.listener(i))
			if err != nil {
				t.Fatal(err)
			}
			s.Start()
		}
		advance := func(i int, to time.Time) {
			t.Helper()
			if err := clocks[i].BlockUntilContext(ctxT(t), 1); err != nil {
				t.Fatal(err)
			}
			clocks[i].Advance(to.Sub(clocks[i].Now()))
		}
		expectRun := func(want time.Time) {
			t.Helper()
			select {
			case got := <-ran:
				if !got.Equal(want) {
					t.Fatalf("a run for the fire of %v; want %v", got, want)
				}
			case <-time.After(patience):
				t.Fatalf("the fire of %v did not run", want)
			}
		}

		advance(0, fire)
		expectRun(fire)
		waitFree(t, f.stores[0], key)

		advance(1, fire) // instance 1 wakes up and starts the overdue fire
		waitFor(t, "instance 1 to skip the fire", func() bool { return len(sk.all(1)) > 0 })
		if errs := sk.all(1); len(errs) != 1 || !alreadyRan(errs[0]) {
			t.Fatalf("instance 1's skips: %v; want one already-ran", errs)
		}
		select {
		case got := <-ran:
			t.Fatalf("the fire of %v ran a second time", got)
		default:
		}

		next := fire.Add(time.Second)
		// gocron has moved on to the next fire (a fake clock jumps; a
		// real one would be there long before).
		waitFor(t, "instance 1's next fire", func() bool {
			n, err := jobs[1].NextRun()
			return err == nil && n.Equal(next)
		})
		advance(1, next)
		expectRun(next)
	})
}

// markerStore counts the calls a run makes and lets a test act just
// before one on the fire marker.
type markerStore struct {
	backend.Store
	calls         atomic.Int32
	beforeRelease func(key string)
	beforeAcquire func(key, owner string)
	guard         time.Duration // Acquire refuses fresh leases longer than this, as after a restart
}

func (s *markerStore) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	s.calls.Add(1)
	if s.beforeAcquire != nil {
		s.beforeAcquire(key, owner)
	}
	if s.guard > 0 && ttl > s.guard {
		if _, err := s.Store.Get(ctx, key); errors.Is(err, backend.ErrNotFound) {
			return backend.Lease{}, &backend.HeldError{Holder: backend.Lease{Key: key, TTL: ttl}, Recovering: true}
		}
	}
	return s.Store.Acquire(ctx, key, owner, ttl, floor)
}

func (s *markerStore) Release(ctx context.Context, key, owner string, keepFor time.Duration) error {
	s.calls.Add(1)
	if s.beforeRelease != nil {
		s.beforeRelease(key)
	}
	return s.Store.Release(ctx, key, owner, keepFor)
}

func (s *markerStore) Get(ctx context.Context, key string) (backend.Lease, error) {
	s.calls.Add(1)
	return s.Store.Get(ctx, key)
}

// The fire marker costs a run one store call when it is new, three when
// it moves on, one when the fire has run; a run that loses a race for it
// (another run changed it at the same time, as a run whose lease lapsed
// can) is skipped, never run.
func TestFireMarkerCostsAndRaces(t *testing.T) {
	f := newFleet(t, "mem", 1, fastRole)
	st := &markerStore{Store: f.stores[0]}
	g, err := schedlock.NewGate(schedlock.Any, nil, quiet, schedlock.WithInstance(f.ids[0]), schedlock.WithLock(st, "raced", 5*time.Second, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	marker := backend.AppKey(f.ids[0].Tenant, f.ids[0].App, "fired", "raced")
	fire := time.Now().Truncate(time.Second).Add(-time.Minute)
	var runs int
	run := func(at time.Time) error {
		return schedlock.Run(ctx, g.Job(), at, func(context.Context) error { runs++; return nil })
	}
	calls := func(what string, want int32, err error) {
		t.Helper()
		if n := st.calls.Swap(0); n != want {
			t.Fatalf("%s (%v): %d store calls, want %d", what, err, n, want)
		}
	}
	err = run(fire)
	calls("a first fire: lock, marker taken, lock released", 3, err)
	err = run(fire.Add(time.Second))
	calls("the next fire: lock, marker held, released, taken, lock released", 5, err)
	err = run(fire.Add(time.Second))
	calls("the same fire again: lock, marker held, lock released", 3, err)
	if !alreadyRan(err) || runs != 2 {
		t.Fatalf("the same fire again: %v, %d runs; want a skip labelled already-ran after 2 runs", err, runs)
	}

	// Another run moves the marker on between this run's look and its
	// release of the marker it saw.
	other := func(at time.Time) {
		l, err := f.stores[0].Get(ctx, marker)
		if err == nil {
			_ = f.stores[0].Release(ctx, marker, l.Owner, 0)
		}
		if _, err := f.stores[0].Acquire(ctx, marker, "fire:"+strconv.FormatInt(at.UnixMilli(), 10)+":other", time.Hour, 0); err != nil {
			t.Error(err)
		}
	}
	st.beforeRelease = func(key string) {
		if key == marker {
			st.beforeRelease = nil
			other(fire.Add(5 * time.Second))
		}
	}
	if err := run(fire.Add(3 * time.Second)); !errors.Is(err, schedlock.ErrLocked) {
		t.Fatalf("a race for the marker before its release: %v; want a skip with ErrLocked", err)
	}
	// ... or between the release and the take.
	st.beforeAcquire = func(key, owner string) {
		if key == marker && st.beforeRelease == nil {
			if l, err := f.stores[0].Get(ctx, marker); errors.Is(err, backend.ErrNotFound) {
				st.beforeAcquire = nil
				other(fire.Add(6 * time.Second))
			} else if err != nil {
				t.Error(err, l)
			}
		}
	}
	if err := run(fire.Add(5500 * time.Millisecond)); !alreadyRan(err) {
		t.Fatalf("a race for the marker after its release: %v; want a skip labelled already-ran (a later fire took it)", err)
	}
	if runs != 2 {
		t.Fatalf("%d runs; want 2: every race ends in a skip", runs)
	}
}

// A fire marker holding no fire time (forged, or corrupt) skips the job
// with an error naming the key, changes nothing, and the job runs again
// once the key is gone.
func TestCorruptFireMarkerSkipsUntilDeleted(t *testing.T) {
	f := newFleet(t, "mem", 1, fastRole)
	g := lockGate(t, f, 0, "forged", 5*time.Second, 0)
	ctx := ctxT(t)
	marker := backend.AppKey(f.ids[0].Tenant, f.ids[0].App, "fired", "forged")
	if _, err := f.stores[0].Acquire(ctx, marker, "<script>", time.Hour, 0); err != nil {
		t.Fatal(err)
	}
	fire := time.Now().Truncate(time.Second)
	err := schedlock.Run(ctx, g.Job(), fire, func(context.Context) error { return nil })
	if !errors.Is(err, schedlock.ErrUnavailable) || !errors.Is(err, backend.ErrCorrupt) || !strings.Contains(err.Error(), marker) {
		t.Fatalf("a run beside a corrupt marker: %v; want ErrUnavailable wrapping ErrCorrupt naming %q", err, marker)
	}
	if l, err := f.stores[0].Get(ctx, marker); err != nil || l.Owner != "<script>" {
		t.Fatalf("the corrupt marker was changed: %v, %v", l, err)
	}
	if err := f.stores[0].Release(ctx, marker, "<script>", 0); err != nil {
		t.Fatal(err)
	}
	if err := schedlock.Run(ctx, g.Job(), fire, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("a run once the corrupt marker is gone: %v", err)
	}
}

// A store that may have lost its data refuses fresh keys for as long as
// the lease asked for (its restart guard): the marker, a day-long lease,
// is then taken for lockAtMostFor, which the lock itself was granted, and
// renewed to its day; the run is not skipped for a day.
func TestFireMarkerAfterTheStoreLostItsData(t *testing.T) {
	f := newFleet(t, "mem", 1, fastRole)
	const atMost = 5 * time.Second
	st := &markerStore{Store: f.stores[0], guard: atMost}
	g, err := schedlock.NewGate(schedlock.Any, nil, quiet, schedlock.WithInstance(f.ids[0]), schedlock.WithLock(st, "guarded", atMost, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	fire := time.Now().Truncate(time.Second)
	ran := false
	if err := schedlock.Run(ctx, g.Job(), fire, func(context.Context) error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("a fire while the store guards fresh keys: %v (ran %v); want it run", err, ran)
	}
	marker := backend.AppKey(f.ids[0].Tenant, f.ids[0].App, "fired", "guarded")
	if l, err := f.stores[0].Get(ctx, marker); err != nil || l.TTL < time.Hour {
		t.Fatalf("the marker: %v, %v; want it held for its day", l, err)
	}
	if err := schedlock.Run(ctx, g.Job(), fire, func(context.Context) error { return nil }); !alreadyRan(err) {
		t.Fatalf("the same fire again: %v; want a skip labelled already-ran", err)
	}
}

// On a real redis-server with its restart guard on, fresh (as after a
// restart without its data): the lock is granted once the guard for
// lockAtMostFor has passed, and the fire is then recorded and run — the
// marker's day-long lease does not keep the job waiting for a day.
func TestFireMarkerUnderRedisRestartGuard(t *testing.T) {
	r := testenv.NewRedis(t)
	st, err := redisbackend.New(r.Client(t)) // the restart guard is on
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testFireMarkerUnderRestartGuard(t, st)
}

// The same on the memory store restarted without its data, which refuses
// each key for the lease asked for: the marker's day too.
func TestFireMarkerUnderRestartGuard(t *testing.T) {
	st := membackend.New()
	defer st.Close()
	st.Restart()
	testFireMarkerUnderRestartGuard(t, st)
}

// testFireMarkerUnderRestartGuard runs a fire on st, a store whose restart
// guard is on, until the guard for the lock has passed, and checks that
// the fire is then recorded for its day and not run again.
func testFireMarkerUnderRestartGuard(t *testing.T, st backend.Store) {
	id, err := instanceid.New("127.0.0.1", "acme", "guarded", 8080)
	if err != nil {
		t.Fatal(err)
	}
	const atMost = time.Second
	g, err := schedlock.NewGate(schedlock.Any, nil, quiet, schedlock.WithInstance(id), schedlock.WithLock(st, "guarded", atMost, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	fire := time.Now().Truncate(time.Second)
	ran := false
	waitFor(t, "the fire to run once the guard for lockAtMostFor passed", func() bool {
		err := schedlock.Run(ctx, g.Job(), fire, func(context.Context) error { ran = true; return nil })
		if err != nil && !errors.Is(err, schedlock.ErrSkipped) {
			t.Fatal(err)
		}
		return ran
	})
	l, err := st.Get(ctx, backend.AppKey("acme", "guarded", "fired", "guarded"))
	if err != nil || l.TTL < time.Hour {
		t.Fatalf("the marker: %v, %v; want it held for its day", l, err)
	}
	if err := schedlock.Run(ctx, g.Job(), fire, func(context.Context) error { return nil }); !alreadyRan(err) {
		t.Fatalf("the same fire again: %v; want a skip labelled already-ran", err)
	}
}

// On a store restarted without its data (the memory store's Restart, with
// its restart guard on) a job lock and the role are refused until the
// guard has passed: every gate skips with ErrRecovering, label
// "recovering", not "locked" or "not-slave" — nobody holds anything.
// TestSkipRecoveringOnFreshRedis checks the same on a real Redis, with
// its advice.
func TestSkipRecoveringOnRestartedStore(t *testing.T) {
	st := membackend.New(membackend.WithRestartGuard(time.Hour))
	defer st.Close()
	st.Restart()
	testSkipRecovering(t, st, "restarted")
}

// On a redis-server baton has never used, with the restart guard on, a
// job lock and the role are refused until the guard has passed: the
// skips say "recovering", not "locked" or "not-slave" (nobody holds
// anything), with how long and how to declare a new store.
func TestSkipRecoveringOnFreshRedis(t *testing.T) {
	r := testenv.NewRedis(t)
	st, err := redisbackend.New(r.Client(t)) // the restart guard is on
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	testSkipRecovering(t, st, "fresh", "batonctl init", "WithoutRestartGuard", "for another")
}

// testSkipRecovering checks that a job lock, a slave-only and a
// master-only gate of app on st, a store that refuses every lease while
// it recovers, skip as recovering, saying each of advice.
func testSkipRecovering(t *testing.T, st backend.Store, app string, advice ...string) {
	id, err := instanceid.New("127.0.0.1", "acme", app, 8080)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error) {
		t.Helper()
		var skip *schedlock.SkipError
		if !errors.Is(err, schedlock.ErrRecovering) || !errors.As(err, &skip) || skip.Label() != "recovering" {
			t.Fatalf("%s on a %s store: %v; want a skip with reason ErrRecovering, label recovering", what, app, err)
		}
		for _, want := range advice {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the skip %q does not say %q", what, err, want)
			}
		}
	}
	g, err := schedlock.NewGate(schedlock.Any, nil, quiet, schedlock.WithInstance(id), schedlock.WithLock(st, "nightly", time.Hour, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	check("a job lock", schedlock.Run(ctx, g.Job(), time.Time{}, func(context.Context) error { return nil }))

	el, err := role.NewElector(st, id, role.Config{HeartbeatInterval: time.Second, HeartbeatExpiration: time.Hour}, quietRole)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Start(el, el.Run)
	defer testenv.Stop(context.WithoutCancel(ctx), el)
	waitFor(t, "the elector to see the store refuse", func() bool { return !el.Status().RecoveringUntil.IsZero() })
	for _, c := range []struct {
		what string
		role schedlock.Role
	}{{"a slave-only job", schedlock.Slave}, {"a master-only job", schedlock.Master}} {
		g, err := schedlock.NewGate(c.role, el, quiet)
		if err != nil {
			t.Fatal(err)
		}
		check(c.what, schedlock.Run(ctx, g.Job(), time.Time{}, func(context.Context) error { return nil }))
	}
}
