package schedlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/testkit/faulty"
	"github.com/baton-go/baton/testkit/testenv"
)

// An extension whose reply lands after the lease's deadline never revives
// the run: Extend fails with ErrLost, the run's context stays cancelled,
// the loss is reported once, and Assert and Token no longer claim the
// lock. The lease is a second long: the extension must reach the store
// before its deadline, also on a busy machine.
func TestLateExtensionIsVoid(t *testing.T) {
	st := faulty.NewLateRenew(membackend.New())
	defer st.Close()
	defer st.Proceed()
	id, err := instanceid.New("127.0.0.1", "acme", "late", 8081)
	if err != nil {
		t.Fatal(err)
	}
	var j journal
	g, err := schedlock.NewGate(schedlock.Any, nil, quiet, j.observer(0), schedlock.WithInstance(id),
		schedlock.WithLock(st, "late", time.Second, 0))
	if err != nil {
		t.Fatal(err)
	}
	extended := make(chan error, 1)
	err = schedlock.Run(ctxT(t), g.Job(), time.Time{}, func(ctx context.Context) error {
		go func() { extended <- schedlock.Extend(ctx, time.Minute) }()
		select {
		case <-st.Entered():
		case <-time.After(patience):
			t.Error("the extension never reached the store")
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(patience):
			t.Error("the run was not lost at its deadline while the extension hung")
			return nil
		}
		st.Proceed()
		if err := <-extended; !errors.Is(err, schedlock.ErrLost) {
			t.Errorf("Extend whose reply came after the deadline: %v, want ErrLost", err)
		}
		if cause := context.Cause(ctx); !errors.Is(cause, schedlock.ErrLost) {
			t.Errorf("the run's context ended with %v, want ErrLost", cause)
		}
		if err := schedlock.Assert(ctx); !errors.Is(err, schedlock.ErrLost) {
			t.Errorf("Assert after a late extension: %v, want ErrLost", err)
		}
		if _, ok := schedlock.Token(ctx); ok {
			t.Error("Token still claims the lock after a late extension")
		}
		return nil
	})
	if !errors.Is(err, schedlock.ErrLost) {
		t.Errorf("Run: %v, want ErrLost", err)
	}
	if n := j.count(0, schedlock.EventLost, ""); n != 1 {
		t.Fatalf("%d lost events, want 1", n)
	}
}

// fakeGate is a gate with a job lock on a memory store, both on one fake
// clock, so that the instants of a run's lease are exact on any machine.
func fakeGate(t *testing.T, atMostFor, atLeastFor time.Duration) (*schedlock.Gate, *clock.Fake, *membackend.Store) {
	t.Helper()
	clk := clock.NewFake(time.Unix(1_700_000_000, 0)) // T
	st := membackend.New(membackend.WithClock(clk))
	id, err := instanceid.New("127.0.0.1", "acme", "fake", 8081)
	if err != nil {
		t.Fatal(err)
	}
	g, err := schedlock.NewGate(schedlock.Any, nil, quiet, schedlock.WithInstance(id), schedlock.WithClock(clk),
		schedlock.WithLock(st, "fake", atMostFor, atLeastFor))
	if err != nil {
		t.Fatal(err)
	}
	return g, clk, st
}

// runAsync starts a run of g whose job calls job with its context and
// then waits for the test's release; it returns once the job runs.
func runAsync(t *testing.T, g *schedlock.Gate, job func(ctx context.Context)) (release func(), result <-chan error) {
	t.Helper()
	started, done, res := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		res <- schedlock.Run(ctxT(t), g.Job(), time.Time{}, func(ctx context.Context) error {
			job(ctx)
			close(started)
			<-done
			return nil
		})
	}()
	select {
	case <-started:
	case <-time.After(patience):
		t.Fatal("the run never started")
	}
	return func() { close(done) }, res
}

// fakeRun starts a run of a gate with a 10s lockAtMostFor (a 1s margin)
// on a fake clock reading T, and returns the job's context.
func fakeRun(t *testing.T) (*clock.Fake, context.Context, func(), <-chan error) {
	t.Helper()
	g, clk, _ := fakeGate(t, 10*time.Second, 0)
	var jobCtx context.Context
	release, res := runAsync(t, g, func(ctx context.Context) { jobCtx = ctx })
	clk.AwaitTimers(t, 1)
	return clk, jobCtx, release, res
}

func lostAt(t *testing.T, ctx context.Context, when string) {
	t.Helper()
	select {
	case <-ctx.Done():
		if cause := context.Cause(ctx); !errors.Is(cause, schedlock.ErrLost) {
			t.Fatalf("the run ended with %v at %s, want ErrLost", cause, when)
		}
	case <-time.After(patience):
		t.Fatalf("the run was not lost at %s", when)
	}
}

// A run's lease is over at grant + lockAtMostFor − margin (a tenth of
// lockAtMostFor, at most 1s), on the gate's clock: not a nanosecond
// before. Then the job's context is cancelled with ErrLost, Assert and
// Token say so, and Run reports it.
func TestRunDeadlineOnFakeClock(t *testing.T) {
	clk, jobCtx, release, res := fakeRun(t)
	clk.Advance(9*time.Second - time.Nanosecond)
	if err := schedlock.Assert(jobCtx); err != nil {
		t.Fatalf("Assert a nanosecond before the deadline: %v", err)
	}
	if _, ok := schedlock.Token(jobCtx); !ok {
		t.Fatal("Token false before the deadline")
	}
	clk.Advance(time.Nanosecond)
	lostAt(t, jobCtx, "T+9s (10s less the 1s margin)")
	if err := schedlock.Assert(jobCtx); !errors.Is(err, schedlock.ErrLost) {
		t.Errorf("Assert after the deadline: %v, want ErrLost", err)
	}
	if _, ok := schedlock.Token(jobCtx); ok {
		t.Error("Token true after the deadline")
	}
	release()
	if err := <-res; !errors.Is(err, schedlock.ErrLost) {
		t.Errorf("Run of a job that outlived its lease: %v, want ErrLost", err)
	}
}

// Extend moves the deadline to its own send + d − the same margin; an
// extension no longer than the margin is refused and changes nothing.
func TestRunExtendOnFakeClock(t *testing.T) {
	clk, jobCtx, release, res := fakeRun(t)
	clk.Advance(5 * time.Second)
	if err := schedlock.Extend(jobCtx, time.Second); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Fatalf("Extend by the margin: %v, want ErrInvalidArgument", err)
	}
	if err := schedlock.Extend(jobCtx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	clk.Advance(19*time.Second - time.Nanosecond) // T+24s − 1ns
	if err := schedlock.Assert(jobCtx); err != nil {
		t.Fatalf("Assert before the extended deadline: %v", err)
	}
	clk.Advance(time.Nanosecond)
	lostAt(t, jobCtx, "T+24s (5s + 20s less the 1s margin)")
	release()
	if err := <-res; !errors.Is(err, schedlock.ErrLost) {
		t.Errorf("Run: %v, want ErrLost", err)
	}
}

// lockAtLeastFor keeps the lock after a fast run until that long after
// the grant, on the store's clock, and not longer.
func TestRunLockAtLeastForOnFakeClock(t *testing.T) {
	g, clk, st := fakeGate(t, time.Minute, 30*time.Second)
	release, res := runAsync(t, g, func(context.Context) {})
	clk.Advance(2 * time.Second)
	release()
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	clk.Advance(28*time.Second - time.Millisecond)
	if _, err := st.Acquire(ctx, g.LockKey(), "other", time.Second, 0); err == nil {
		t.Fatal("the lock was free before lockAtLeastFor had passed since the grant")
	}
	clk.Advance(time.Millisecond)
	if _, err := st.Acquire(ctx, g.LockKey(), "other", time.Second, 0); err != nil {
		t.Fatalf("the lock after lockAtLeastFor: %v", err)
	}
}

// A master-only run with a job lock that loses its mastership is lost
// (ErrNotMaster), but its lease did not lapse: the release succeeds, and
// Run reports only what the job returns.
func TestRoleLossLeavesLeaseToRelease(t *testing.T) {
	f := newFleet(t, "mem", 1, fastRole)
	f.start(t)
	f.master(t, -1)
	g, err := schedlock.NewGate(schedlock.Master, f.els[0], quiet, schedlock.WithLock(f.stores[0], "demoted", time.Minute, 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	started, result := make(chan struct{}), make(chan error, 1)
	go func() {
		result <- schedlock.Run(ctx, g.Job(), time.Time{}, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			if cause := context.Cause(ctx); !errors.Is(cause, schedlock.ErrNotMaster) {
				t.Errorf("the run ended with %v, want ErrNotMaster", cause)
			}
			return nil
		})
	}()
	<-started
	if err := testenv.Stop(ctx, f.els[0]); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-result:
		if err != nil {
			t.Fatalf("Run after a role loss whose lease held: %v, want nil (the job's own result)", err)
		}
	case <-time.After(patience):
		t.Fatal("the run was not lost with its mastership")
	}
	if _, err := f.stores[0].Get(ctx, g.LockKey()); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("the job lock after the run: %v, want it released", err)
	}
}

// Run takes the job option a gocron job gets, built once and used for
// every run: it keeps the gate (its floor, its fire marker) between runs.
// Any other option, or none, is refused before fn runs, without a panic.
func TestRunTakesTheJobOption(t *testing.T) {
	f := newFleet(t, "mem", 1, fastRole)
	ctx := ctxT(t)
	job := schedlock.Locked(f.stores[0], "ticker", time.Minute, 0, quiet, schedlock.WithInstance(f.ids[0]))
	fire := time.UnixMilli(1_700_000_000_000)
	var tokens []uint64
	for range 2 {
		err := schedlock.Run(ctx, job, fire, func(ctx context.Context) error {
			tok, _ := schedlock.Token(ctx)
			tokens = append(tokens, tok)
			if at, ok := schedlock.Fire(ctx); !ok || !at.Equal(fire) {
				t.Errorf("Fire = %v, %v; want %v", at, ok, fire)
			}
			return nil
		})
		if len(tokens) == 1 && err != nil {
			t.Fatalf("first run of the fire: %v", err)
		}
		fire = fire.Add(time.Second)
	}
	if len(tokens) != 2 || tokens[1] <= tokens[0] {
		t.Fatalf("tokens %v; want two runs, the second with a larger token", tokens)
	}
	if err := schedlock.Run(ctx, job, fire.Add(-time.Second), func(context.Context) error { return nil }); !alreadyRan(err) {
		t.Fatalf("the last fire again: %v; want a skip labelled already-ran", err)
	}
	for name, opt := range map[string]gocron.JobOption{"nil": nil, "gocron.WithName": gocron.WithName("x"), "gocron.WithTags": gocron.WithTags("x")} {
		ran := false
		err := schedlock.Run(ctx, opt, time.Time{}, func(context.Context) error { ran = true; return nil })
		if !errors.Is(err, backend.ErrInvalidArgument) || ran {
			t.Errorf("Run with %s: %v, ran %v; want backend.ErrInvalidArgument and no run", name, err, ran)
		}
	}
	if err := schedlock.Run(ctx, schedlock.Locked(nil, "x", time.Minute, 0), time.Time{}, func(context.Context) error { return nil }); !errors.Is(err, backend.ErrInvalidArgument) {
		t.Errorf("Run with a bad option: %v; want its error", err)
	}
}
