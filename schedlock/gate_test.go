package schedlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/testkit/storetest"
	"github.com/baton-go/baton/testkit/testenv"
)

// lockGate returns a lock-only gate of instance i of f.
func lockGate(t testing.TB, f *fleet, i int, name string, atMost, atLeast time.Duration, opts ...schedlock.Option) *schedlock.Gate {
	t.Helper()
	opts = append([]schedlock.Option{quiet, schedlock.WithInstance(f.ids[i]), schedlock.WithLock(f.stores[i], name, atMost, atLeast)}, opts...)
	g, err := schedlock.NewGate(schedlock.Any, nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestNewGateRejectsBadArguments(t *testing.T) {
	store := membackend.New()
	defer store.Close()
	id, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	el, err := role.NewElector(store, id, role.Config{}, quietRole)
	if err != nil {
		t.Fatal(err)
	}
	inst := schedlock.WithInstance(id)
	cases := []struct {
		name string
		role schedlock.Role
		el   *role.Elector
		opts []schedlock.Option
		want string
	}{
		{"master without elector", schedlock.Master, nil, nil, "needs an elector"},
		{"slave without elector", schedlock.Slave, nil, nil, "needs an elector"},
		{"at most below at least", schedlock.Any, nil, []schedlock.Option{inst, schedlock.WithLock(store, "x", time.Second, time.Minute)}, "lockAtMostFor 1s is less than lockAtLeastFor 1m0s"},
		{"zero at most", schedlock.Any, nil, []schedlock.Option{inst, schedlock.WithLock(store, "x", 0, 0)}, "lockAtMostFor is 0 and there is no default"},
		{"negative default", schedlock.Any, nil, []schedlock.Option{inst, schedlock.WithLock(store, "x", time.Second, 0), (schedlock.Defaults{LockAtLeastFor: -time.Second})}, "must not be negative"},
		{"default at least past at most", schedlock.Any, nil, []schedlock.Option{inst, schedlock.WithLock(store, "x", time.Second, 0), (schedlock.Defaults{LockAtLeastFor: time.Minute})}, "lockAtMostFor 1s is less than lockAtLeastFor 1m0s"},
		{"negative at least", schedlock.Any, nil, []schedlock.Option{inst, schedlock.WithLock(store, "x", time.Second, -time.Second)}, "negative"},
		{"empty name", schedlock.Any, nil, []schedlock.Option{inst, schedlock.WithLock(store, "", time.Second, 0)}, "name is empty"},
		{"name with a space", schedlock.Any, nil, []schedlock.Option{inst, schedlock.WithLock(store, "nightly export", time.Second, 0)}, "usable key"},
		{"nil store", schedlock.Any, nil, []schedlock.Option{inst, schedlock.WithLock(nil, "x", time.Second, 0)}, "nil store"},
		{"no instance", schedlock.Any, nil, []schedlock.Option{schedlock.WithLock(store, "x", time.Second, 0)}, "pass schedlock.WithInstance(id)"},
		{"two locks", schedlock.Master, el, []schedlock.Option{schedlock.WithLock(store, "x", time.Second, 0), schedlock.WithLock(store, "y", time.Second, 0)}, "2 job locks"},
		{"bad instance", schedlock.Any, nil, []schedlock.Option{schedlock.WithInstance(instanceid.ID{App: "x"}), schedlock.WithLock(store, "x", time.Second, 0)}, "instance"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := schedlock.NewGate(c.role, c.el, c.opts...)
			if err == nil || g != nil {
				t.Fatalf("NewGate = %v, %v; want an error", g, err)
			}
			if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q: want ErrInvalid mentioning %q", err, c.want)
			}
		})
	}
}

// A job lock given zero durations takes the gate's defaults, as a
// @SchedulerLock without lockAtMostFor takes ShedLock's
// defaultLockAtMostFor: the lease is the default lockAtMostFor, and the
// lock is kept for the default lockAtLeastFor after the run.
func TestLockTakesDefaults(t *testing.T) {
	store := membackend.New()
	defer store.Close()
	id, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	defaults := (schedlock.Defaults{LockAtMostFor: 10 * time.Minute, LockAtLeastFor: 30 * time.Second})
	for _, tc := range []struct {
		name            string
		atMost, atLeast time.Duration
		lease, kept     time.Duration
	}{
		{"both defaults", 0, 0, 10 * time.Minute, 30 * time.Second},
		{"own lockAtMostFor", 2 * time.Minute, 0, 2 * time.Minute, 30 * time.Second},
		{"own lockAtLeastFor", 0, 5 * time.Second, 10 * time.Minute, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ReplaceAll(tc.name, " ", "-")
			g, err := schedlock.NewGate(schedlock.Any, nil, quiet, schedlock.WithInstance(id), defaults, schedlock.WithLock(store, name, tc.atMost, tc.atLeast))
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			lock, err := g.Lock(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			l, err := store.Get(ctx, g.LockKey())
			if err != nil || l.TTL > tc.lease || l.TTL < tc.lease-time.Minute/2 {
				t.Fatalf("lease while running: %+v, %v; want a TTL of about %v", l, err, tc.lease)
			}
			if err := lock.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			l, err = store.Get(ctx, g.LockKey())
			if err != nil || l.TTL > tc.kept || l.TTL < tc.kept/2 {
				t.Fatalf("lease after the run: %+v, %v; want it kept about %v", l, err, tc.kept)
			}
		})
	}
}

// A gate's lock takes its namespace from what the gate's own options name
// (WithInstance, the gate's elector), never from a hidden global: with a
// default elector registered (role.SetDefault) and no instance given,
// NewGate still fails and says what to pass.
func TestLockedIgnoresDefaultElector(t *testing.T) {
	store := membackend.New()
	defer store.Close()
	other, _ := instanceid.New("10.0.0.9", "globex", "billing", 8080)
	el, _ := role.NewElector(store, other, role.Config{}, quietRole)
	role.SetDefault(el)
	defer role.SetDefault(nil)
	g, err := schedlock.NewGate(schedlock.Any, nil, schedlock.WithLock(store, "nightly-export", time.Minute, 0))
	if !errors.Is(err, backend.ErrInvalidArgument) || !strings.Contains(err.Error(), "schedlock.WithInstance(id)") {
		t.Fatalf("NewGate without an instance, a default elector set: %v (lock key %q); want ErrInvalid naming WithInstance", err, lockKeyOf(g))
	}
	id, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	g, err = schedlock.NewGate(schedlock.Any, nil, schedlock.WithInstance(id), schedlock.WithLock(store, "nightly-export", time.Minute, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := g.LockKey(), "{acme:billing}:job:nightly-export"; got != want {
		t.Fatalf("LockKey = %q, want %q (WithInstance's, not the default elector's)", got, want)
	}
}

// lockKeyOf returns g's lock key, or "" for no gate.
func lockKeyOf(g *schedlock.Gate) string {
	if g == nil {
		return ""
	}
	return g.LockKey()
}

func TestLockedSkipsWhileHeldAndNamesTheHolder(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		f := newFleet(t, kind, 2, fastRole)
		var j journal
		a := lockGate(t, f, 0, "report", time.Minute, 0, j.observer(0))
		b := lockGate(t, f, 1, "report", time.Minute, 0, j.observer(1))
		ctx := ctxT(t)
		la, err := a.Lock(ctx, "report-job")
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Lock(ctx, "report-job")
		var skip *schedlock.SkipError
		if !errors.As(err, &skip) || !errors.Is(err, schedlock.ErrLocked) || !errors.Is(err, schedlock.ErrSkipped) {
			t.Fatalf("second Lock: %v; want a *SkipError for ErrLocked", err)
		}
		if !strings.HasPrefix(skip.Holder.Owner, f.ids[0].String()+"#") || skip.Holder.TTL <= 0 || skip.Holder.Token == 0 {
			t.Fatalf("holder %+v: want instance 0's lease", skip.Holder)
		}
		if skip.Job != "report-job" || skip.Label() != "locked" || !strings.Contains(skip.Error(), f.ids[0].String()) {
			t.Fatalf("skip %q (job %q, label %q)", skip, skip.Job, skip.Label())
		}
		if err := la.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		lb, err := b.Lock(ctx, "report-job")
		if err != nil {
			t.Fatalf("Lock after release: %v", err)
		}
		if err := lb.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if n := j.count(1, schedlock.EventSkipped, "locked"); n != 1 {
			t.Fatalf("instance 1 reported %d locked skips, want 1", n)
		}
		if n := j.count(0, schedlock.EventReleased, ""); n != 1 {
			t.Fatalf("instance 0 reported %d releases, want 1", n)
		}
	})
}

// fire has the instances try the lock at the given offsets from now, each
// running a 1ms job when admitted, and records every try in log.
func fire(t *testing.T, log *attempts, gates []*schedlock.Gate, offsets []time.Duration) {
	t.Helper()
	var wg sync.WaitGroup
	start := time.Now()
	for i, g := range gates {
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(offsets[i])))
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			l, err := log.lock(ctx, i, g, "fast")
			if err != nil {
				return // checkJobLock judges it
			}
			time.Sleep(time.Millisecond)
			if err := l.Unlock(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
}

// A fast job fired by three instances up to 50ms apart runs once per fire
// with lockAtLeastFor: the lock stays held until lockAtLeastFor after each
// grant, so the later instances' tries are refused though the job has
// ended; without it the lock is free again as soon as the job ends. Which
// tries run depends on how the machine schedules them; checkJobLock judges
// each try by the instants it began and returned, so a try delayed past
// lockAtLeastFor may run and one that came while the lock was free must.
func TestLockAtLeastForCoversFireOffsets(t *testing.T) {
	offsets := []time.Duration{0, 25 * time.Millisecond, 50 * time.Millisecond}
	const fires = 5
	forEachStore(t, func(t *testing.T, kind string) {
		for _, atLeast := range []time.Duration{150 * time.Millisecond, 0} {
			f := newFleet(t, kind, 3, fastRole)
			var gates []*schedlock.Gate
			for i := range 3 {
				gates = append(gates, lockGate(t, f, i, "fast", 5*time.Second, atLeast))
			}
			var log attempts
			for range fires {
				fire(t, &log, gates, offsets)
				// The next fire finds the lock free.
				waitFor(t, "the lock to be free", func() bool {
					_, err := f.stores[0].Get(context.Background(), gates[0].LockKey())
					return errors.Is(err, backend.ErrNotFound)
				})
			}
			history := log.snapshot()
			checkJobLock(t, history, atLeast)
			ran := 0
			for _, a := range history {
				if a.err == nil {
					ran++
				}
			}
			t.Logf("lockAtLeastFor %v: %d fires ran %d times", atLeast, fires, ran)
		}
	})
}

// A holder that never releases (a crash) holds the lock for lockAtMostFor;
// its late release then fails without touching the next holder's lock.
// The next holder's own lockAtMostFor is long, so that its lease outlasts
// the test on a busy machine.
func TestLockAtMostForFreesACrashedHolder(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		f := newFleet(t, kind, 2, fastRole)
		const atMost = 300 * time.Millisecond
		a := lockGate(t, f, 0, "export", atMost, 0)
		b := lockGate(t, f, 1, "export", time.Minute, 0)
		ctx := ctxT(t)
		start := time.Now()
		crashed, err := a.Lock(ctx, "export")
		if err != nil {
			t.Fatal(err)
		}
		var lb interface{ Unlock(context.Context) error }
		waitFor(t, "the crashed holder's lock to lapse", func() bool {
			l, err := b.Lock(ctx, "export")
			if err != nil {
				if !errors.Is(err, schedlock.ErrLocked) {
					t.Fatal(err)
				}
				return false
			}
			lb = l
			return true
		})
		// The crashed holder's grant came after start and lasted
		// lockAtMostFor on the store.
		if took := time.Since(start); took < atMost {
			t.Fatalf("the lock was free after %v, before lockAtMostFor %v", took, atMost)
		}
		err = crashed.Unlock(ctx)
		if !errors.Is(err, schedlock.ErrLost) {
			t.Fatalf("late Unlock: %v; want ErrLost", err)
		}
		l, err := f.stores[1].Get(ctx, b.LockKey())
		if err != nil || !strings.HasPrefix(l.Owner, f.ids[1].String()+"#") {
			t.Fatalf("after the late Unlock the lock is %+v, %v; want instance 1's", l, err)
		}
		if err := lb.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// Unlock with a cancelled context (gocron's Shutdown) still releases, and
// keeps the key until lockAtLeastFor after the grant.
func TestUnlockWithCancelledContextReleases(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		f := newFleet(t, kind, 1, fastRole)
		for _, atLeast := range []time.Duration{0, 2 * time.Second} {
			g := lockGate(t, f, 0, "shutdown", 10*time.Second, atLeast)
			ctx, cancel := context.WithCancel(context.Background())
			start := time.Now()
			l, err := g.Lock(ctx, "shutdown")
			if err != nil {
				t.Fatal(err)
			}
			cancel()
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock with a cancelled context: %v", err)
			}
			lease, err := f.stores[0].Get(context.Background(), g.LockKey())
			if atLeast == 0 {
				if !errors.Is(err, backend.ErrNotFound) {
					t.Fatalf("lockAtLeastFor 0: after Unlock the key is %+v, %v; want it gone", lease, err)
				}
				continue
			}
			// The grant came after start and the key is kept until
			// lockAtLeastFor after it; the store counts in milliseconds.
			if least := atLeast - time.Since(start) - time.Millisecond; err != nil || lease.TTL > atLeast || lease.TTL < least {
				t.Fatalf("lockAtLeastFor %v: after Unlock the key is %+v, %v; want it kept between %v and %v", atLeast, lease, err, least, atLeast)
			}
			if err := f.stores[0].Release(context.Background(), g.LockKey(), lease.Owner, 0); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func TestRunAssertExtendAndLeaseLoss(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		f := newFleet(t, kind, 2, fastRole)
		const atMost = 200 * time.Millisecond
		var j journal
		a := lockGate(t, f, 0, "long", atMost, 0, j.observer(0))
		b := lockGate(t, f, 1, "long", atMost, 0)
		ctx := ctxT(t)

		// Extend keeps a long job's lock beyond lockAtMostFor. The run
		// must extend before its first lease ends, so that lease is a
		// second long: on a busy machine the job may start late.
		const extAtMost = time.Second
		ext := lockGate(t, f, 0, "long", extAtMost, 0)
		start := time.Now()
		err := schedlock.Run(ctx, ext.Job(), time.Time{}, func(ctx context.Context) error {
			if tok, ok := schedlock.Token(ctx); !ok || tok == 0 {
				t.Errorf("Token = %d, %v", tok, ok)
			}
			if err := schedlock.Extend(ctx, time.Minute); err != nil {
				return err
			}
			// Past the end of the first lease, which began after start.
			time.Sleep(time.Until(start.Add(extAtMost)))
			if err := schedlock.Assert(ctx); err != nil {
				return err
			}
			if ctx.Err() != nil {
				t.Errorf("context cancelled though the lock was extended: %v", context.Cause(ctx))
			}
			if _, err := b.Lock(ctx, "long"); !errors.Is(err, schedlock.ErrLocked) {
				t.Errorf("Lock by another instance during an extended run: %v; want ErrLocked", err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Run with Extend: %v", err)
		}

		// Without Extend the run's context ends before the lease lapses.
		start = time.Now()
		var cause error
		err = schedlock.Run(ctx, a.Job(), time.Time{}, func(ctx context.Context) error {
			<-ctx.Done()
			cause = context.Cause(ctx)
			return schedlock.Assert(ctx)
		})
		took := time.Since(start)
		if !errors.Is(cause, schedlock.ErrLost) || !errors.Is(err, schedlock.ErrLost) {
			t.Fatalf("cause %v, Run = %v; want ErrLost", cause, err)
		}
		if took < atMost-atMost/5 || took > atMost+time.Second {
			t.Fatalf("the context ended after %v; want just before lockAtMostFor %v", took, atMost)
		}
		if n := j.count(0, schedlock.EventLost, ""); n != 1 {
			t.Fatalf("%d lost events, want 1", n)
		}
		if err := schedlock.Extend(ctx, time.Second); !errors.Is(err, schedlock.ErrNoRun) {
			t.Fatalf("Extend outside a run: %v; want ErrNoRun", err)
		}
		if err := schedlock.Assert(context.Background()); !errors.Is(err, schedlock.ErrNoRun) {
			t.Fatalf("Assert outside a run: %v; want ErrNoRun", err)
		}
	})
}

// Extend finds out that the lock is no longer the run's (removed by hand,
// as batonctl's force-release would) and cancels the run's context.
func TestExtendNoticesAStolenLock(t *testing.T) {
	f := newFleet(t, "mem", 1, fastRole)
	g := lockGate(t, f, 0, "stolen", 10*time.Second, 0)
	ctx := ctxT(t)
	err := schedlock.Run(ctx, g.Job(), time.Time{}, func(ctx context.Context) error {
		l, err := f.stores[0].Get(ctx, g.LockKey())
		if err != nil {
			return err
		}
		if err := f.stores[0].Release(ctx, g.LockKey(), l.Owner, 0); err != nil {
			return err
		}
		err = schedlock.Extend(ctx, time.Minute)
		if !errors.Is(err, schedlock.ErrLost) || !errors.Is(err, backend.ErrNotHeld) {
			t.Errorf("Extend of a removed lock: %v; want ErrLost and ErrNotHeld", err)
		}
		if !errors.Is(context.Cause(ctx), schedlock.ErrLost) {
			t.Errorf("context cause %v; want ErrLost", context.Cause(ctx))
		}
		return nil
	})
	if !errors.Is(err, schedlock.ErrLost) {
		t.Fatalf("Run = %v; want the lapsed lock reported", err)
	}
}

func TestRoleGates(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		f := newFleet(t, kind, 2, fastRole)
		ctx := ctxT(t)
		gate := func(r schedlock.Role, i int, opts ...schedlock.Option) *schedlock.Gate {
			g, err := schedlock.NewGate(r, f.els[i], append([]schedlock.Option{quiet}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		// Before the electors run, nobody is master or slave.
		for i := range 2 {
			if _, err := gate(schedlock.Master, i).Lock(ctx, "m"); !errors.Is(err, schedlock.ErrNotMaster) || !strings.Contains(err.Error(), "not running") {
				t.Fatalf("master gate, elector not running: %v", err)
			}
			if _, err := gate(schedlock.Slave, i).Lock(ctx, "s"); !errors.Is(err, schedlock.ErrNotSlave) || !strings.Contains(err.Error(), "not running") {
				t.Fatalf("slave gate, elector not running: %v", err)
			}
		}
		f.start(t)
		m := f.master(t, -1)
		s := 1 - m

		mg := gate(schedlock.Master, m)
		l, err := mg.Lock(ctx, "m")
		if err != nil {
			t.Fatalf("master gate on the master: %v", err)
		}
		if ep, ok := schedlock.Token(ctx); !ok || ep != f.els[m].Status().Epoch {
			t.Fatalf("Token of a master-only run = %d, %v; want the epoch %d", ep, ok, f.els[m].Status().Epoch)
		}
		if err := schedlock.Assert(ctx); err != nil {
			t.Fatalf("Assert on the master: %v", err)
		}
		if err := schedlock.Extend(ctx, time.Second); !errors.Is(err, schedlock.ErrNoRun) {
			t.Fatalf("Extend without a lock: %v; want ErrNoRun", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := gate(schedlock.Master, s).Lock(ctx, "m"); !errors.Is(err, schedlock.ErrNotMaster) || !strings.Contains(err.Error(), f.ids[m].String()) {
			t.Fatalf("master gate on the slave: %v; want ErrNotMaster naming the master", err)
		}
		if _, err := gate(schedlock.Slave, m).Lock(ctx, "s"); !errors.Is(err, schedlock.ErrNotSlave) {
			t.Fatalf("slave gate on the master: %v; want ErrNotSlave", err)
		}
		l, err = gate(schedlock.Slave, s).Lock(ctx, "s")
		if err != nil {
			t.Fatalf("slave gate on the slave: %v", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}

		// Master and lock together: the slave is refused before it
		// touches the lock.
		lockOpt := func(i int) schedlock.Option { return schedlock.WithLock(f.stores[i], "both", time.Minute, 0) }
		if _, err := gate(schedlock.Master, s, lockOpt(s)).Lock(ctx, "both"); !errors.Is(err, schedlock.ErrNotMaster) {
			t.Fatalf("master+lock gate on the slave: %v", err)
		}
		if _, err := f.stores[s].Get(ctx, gate(schedlock.Master, s, lockOpt(s)).LockKey()); !errors.Is(err, backend.ErrNotFound) {
			t.Fatalf("the slave touched the lock: %v", err)
		}
		mlg := gate(schedlock.Master, m, lockOpt(m))
		err = schedlock.Run(ctx, mlg.Job(), time.Time{}, func(ctx context.Context) error {
			if _, ok := schedlock.Token(ctx); !ok {
				t.Error("no token in a master+lock run")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("master+lock gate on the master: %v", err)
		}
	})
}

func TestDisabledRoleSkipsEveryRoleGate(t *testing.T) {
	f := newFleet(t, "mem", 1, role.Config{Disabled: true})
	f.start(t)
	ctx := ctxT(t)
	waitFor(t, "the elector to run", func() bool { return f.els[0].Status().Running })
	for _, r := range []schedlock.Role{schedlock.Master, schedlock.Slave} {
		g, err := schedlock.NewGate(r, f.els[0], quiet)
		if err != nil {
			t.Fatal(err)
		}
		_, err = g.Lock(ctx, "job")
		var skip *schedlock.SkipError
		want := map[schedlock.Role]error{schedlock.Master: schedlock.ErrNotMaster, schedlock.Slave: schedlock.ErrNotSlave}[r]
		if !errors.As(err, &skip) || !errors.Is(err, want) || skip.Label() != "disabled" {
			t.Fatalf("%s gate with the role disabled: %v; want %v labelled disabled", r, err, want)
		}
	}
}

// A run watched by Context is cancelled when its mastership ends.
func TestContextCancelledOnDemotion(t *testing.T) {
	forEachStore(t, func(t *testing.T, kind string) {
		f := newFleet(t, kind, 1, fastRole)
		f.start(t)
		f.master(t, -1)
		g, err := schedlock.NewGate(schedlock.Master, f.els[0], quiet)
		if err != nil {
			t.Fatal(err)
		}
		ctx := ctxT(t)
		started := make(chan struct{})
		result := make(chan error, 1)
		go func() {
			result <- schedlock.Run(ctx, g.Job(), time.Time{}, func(ctx context.Context) error {
				close(started)
				<-ctx.Done()
				if err := schedlock.Assert(ctx); !errors.Is(err, schedlock.ErrNotMaster) {
					t.Errorf("Assert after demotion: %v", err)
				}
				return context.Cause(ctx)
			})
		}()
		<-started
		if err := testenv.Stop(ctx, f.els[0]); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-result:
			if !errors.Is(err, schedlock.ErrLost) || !errors.Is(err, schedlock.ErrNotMaster) {
				t.Fatalf("cause after demotion: %v; want ErrLost and ErrNotMaster", err)
			}
		case <-time.After(patience):
			t.Fatal("the run's context was not cancelled after the demotion")
		}
	})
}

// failingStore fails every Acquire, as an unreachable store does.
type failingStore struct {
	backend.Store
	releases atomic.Int32
}

var errDown = errors.New("connection refused")

func (s *failingStore) Acquire(context.Context, string, string, time.Duration, uint64) (backend.Lease, error) {
	return backend.Lease{}, errDown
}

func (s *failingStore) Release(ctx context.Context, key, owner string, keepFor time.Duration) error {
	s.releases.Add(1)
	return s.Store.Release(ctx, key, owner, keepFor)
}

func TestUnreachableStoreSkipsWithErrUnavailable(t *testing.T) {
	mem := membackend.New()
	defer mem.Close()
	st := &failingStore{Store: mem}
	id, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	var j journal
	g, err := schedlock.NewGate(schedlock.Any, nil, quiet, j.observer(0), schedlock.WithInstance(id), schedlock.WithLock(st, "x", time.Minute, 0))
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Lock(ctxT(t), "x")
	if !errors.Is(err, schedlock.ErrUnavailable) || !errors.Is(err, errDown) {
		t.Fatalf("Lock on a failing store: %v; want ErrUnavailable wrapping the store's error", err)
	}
	if st.releases.Load() != 1 {
		t.Fatalf("%d releases after a failed acquire; want 1 (the grant may have happened)", st.releases.Load())
	}
	if n := j.count(0, schedlock.EventSkipped, "unavailable"); n != 1 {
		t.Fatalf("%d unavailable skips reported, want 1", n)
	}
}

// hookStore calls before ahead of every Acquire.
type hookStore struct {
	backend.Store
	before func()
}

func (s *hookStore) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	s.before()
	return s.Store.Acquire(ctx, key, owner, ttl, floor)
}

// A mastership that ends while the lock is being taken does not admit the
// run, and the lock it took is given back at once.
func TestMastershipLostDuringAcquireSkips(t *testing.T) {
	f := newFleet(t, "mem", 1, fastRole)
	f.start(t)
	f.master(t, -1)
	ctx := ctxT(t)
	st := &hookStore{Store: f.stores[0], before: func() {
		if err := testenv.Stop(ctx, f.els[0]); err != nil {
			t.Error(err)
		}
	}}
	g, err := schedlock.NewGate(schedlock.Master, f.els[0], quiet, schedlock.WithLock(st, "demoted", time.Minute, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Lock(ctx, "demoted"); !errors.Is(err, schedlock.ErrNotMaster) {
		t.Fatalf("Lock while demoted mid-acquire: %v; want ErrNotMaster", err)
	}
	if _, err := f.stores[0].Get(ctx, g.LockKey()); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("the lock taken mid-demotion is still held: %v", err)
	}
}

// Overlapping runs of one job share gocron's job context: the context
// speaks for the newest run in flight, then for the older one.
func TestOverlappingRunsShareTheJobContext(t *testing.T) {
	f := newFleet(t, "mem", 1, fastRole)
	f.start(t)
	f.master(t, -1)
	g, err := schedlock.NewGate(schedlock.Master, f.els[0], quiet)
	if err != nil {
		t.Fatal(err)
	}
	jobCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	older, err := g.Lock(jobCtx, "overlap")
	if err != nil {
		t.Fatal(err)
	}
	newer, err := g.Lock(jobCtx, "overlap")
	if err != nil {
		t.Fatal(err)
	}
	if err := newer.Unlock(jobCtx); err != nil {
		t.Fatal(err)
	}
	if err := schedlock.Assert(jobCtx); err != nil {
		t.Fatalf("Assert with the older run in flight: %v", err)
	}
	cancel() // gocron's Shutdown: the job context ends before Unlock
	if err := older.Unlock(jobCtx); err != nil {
		t.Fatal(err)
	}
	if err := schedlock.Assert(jobCtx); !errors.Is(err, schedlock.ErrNoRun) {
		t.Fatalf("Assert after both runs ended: %v; want ErrNoRun", err)
	}
}

// A lock token the store refuses as a floor, because no grant can have
// had it (ErrFloorAhead), is forgotten and the lock asked for again
// without it: the run is admitted, so a token once seen never locks the
// job out.
func TestFloorAheadIsForgotten(t *testing.T) {
	mem := membackend.New()
	defer mem.Close()
	id, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	g, err := schedlock.NewGate(schedlock.Any, nil, quiet, schedlock.WithInstance(id), schedlock.WithLock(&storetest.Forging{Store: mem}, "x", time.Minute, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	if _, err := g.Lock(ctx, "x"); !errors.Is(err, schedlock.ErrLocked) {
		t.Fatalf("Lock while the forged holder is named: %v; want ErrLocked", err)
	}
	l, err := g.Lock(ctx, "x")
	if err != nil {
		t.Fatalf("Lock after a floor the store refuses: %v; want the run admitted", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
