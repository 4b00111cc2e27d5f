package schedlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/testkit/testenv"
)

// onGoroutine runs f on a goroutine of its own and waits for it, as
// gocron runs each run (Lock, the task, Unlock) on one goroutine.
func onGoroutine(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// A master-only run that overlaps a demotion and re-election keeps its
// own identity on gocron's shared job context: its epoch, its loss, its
// context; a goroutine that runs neither run is refused, not answered for
// the newest.
func TestOverlappingRunsKeepTheirOwnEpoch(t *testing.T) {
	f := newFleet(t, "mem", 1, fastRole)
	f.start(t)
	f.master(t, -1)
	g, err := schedlock.NewGate(schedlock.Master, f.els[0], quiet)
	if err != nil {
		t.Fatal(err)
	}
	jobCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	older := make(chan func(), 1) // the older run's goroutine runs what it is sent
	olderDone := make(chan struct{})
	olderLocked := make(chan uint64, 1)
	go func() {
		defer close(olderDone)
		l, err := g.Lock(jobCtx, "overlap")
		if err != nil {
			t.Error(err)
			close(olderLocked)
			return
		}
		ep, _ := schedlock.Token(jobCtx)
		olderLocked <- ep
		for f := range older {
			f()
		}
		_ = l.Unlock(jobCtx)
	}()

	// Demotion and re-election: a new tenure with a higher epoch.
	epoch1, ok := <-olderLocked
	if !ok {
		t.FailNow()
	}
	ctx := ctxT(t)
	if err := testenv.Stop(ctx, f.els[0]); err != nil {
		t.Fatal(err)
	}
	testenv.Start(f.els[0], f.els[0].Run)
	f.master(t, -1)
	var epoch2 uint64
	newerLock := make(chan func() error, 1)
	onGoroutine(func() {
		l, err := g.Lock(jobCtx, "overlap")
		if err != nil {
			t.Error(err)
			return
		}
		epoch2, _ = schedlock.Token(jobCtx)
		newerLock <- func() error { return l.Unlock(jobCtx) }
	})
	if t.Failed() {
		t.FailNow()
	}
	if epoch1 == 0 || epoch2 <= epoch1 {
		t.Fatalf("epochs %d then %d; want a higher one for the new tenure", epoch1, epoch2)
	}

	// The older run asks on its own goroutine.
	checked := make(chan struct{})
	older <- func() {
		defer close(checked)
		if ep, ok := schedlock.Token(jobCtx); ok || ep != 0 {
			t.Errorf("the older run's Token = %d, %v; want none (its tenure of epoch %d ended), never the newer run's", ep, ok, epoch1)
		}
		if err := schedlock.Assert(jobCtx); !errors.Is(err, schedlock.ErrLost) {
			t.Errorf("the older run's Assert = %v; want ErrLost (its tenure ended)", err)
		}
		cctx, cancel := schedlock.Context(jobCtx)
		defer cancel()
		select {
		case <-cctx.Done():
			if !errors.Is(context.Cause(cctx), schedlock.ErrLost) {
				t.Errorf("the older run's context ended with %v; want ErrLost", context.Cause(cctx))
			}
		case <-time.After(patience):
			t.Error("the older run's context was not cancelled: it follows the newer run")
		}
	}
	<-checked

	// A goroutine of neither run cannot tell them apart.
	if ep, ok := schedlock.Token(jobCtx); ok {
		t.Errorf("Token from another goroutine = %d; want none while runs overlap", ep)
	}
	if err := schedlock.Assert(jobCtx); !errors.Is(err, schedlock.ErrNoRun) {
		t.Errorf("Assert from another goroutine = %v; want ErrNoRun", err)
	}
	cctx, ccancel := schedlock.Context(jobCtx)
	defer ccancel()
	if !errors.Is(context.Cause(cctx), schedlock.ErrNoRun) {
		t.Errorf("Context from another goroutine: cause %v; want ErrNoRun at once", context.Cause(cctx))
	}

	// The older run ends; the newer one is the only one in flight.
	close(older)
	<-olderDone
	if ep, ok := schedlock.Token(jobCtx); !ok || ep != epoch2 {
		t.Errorf("Token with one run in flight = %d, %v; want the epoch %d", ep, ok, epoch2)
	}
	if err := (<-newerLock)(); err != nil {
		t.Fatal(err)
	}
}

// Overlapping gocron runs of a locked job (lockAtMostFor shorter than a
// run, runs fired more often than they last): the run that outlived its
// lock is told so — no token, ErrLost from Assert and Extend, its context
// ended — while the newer run holds the lock, and its Extend does not
// touch the newer run's lease.
func TestOverlappingGocronRunsAnswerForTheirOwnRun(t *testing.T) {
	const (
		atMost = 600 * time.Millisecond
		every  = 700 * time.Millisecond
	)
	f := newFleet(t, "mem", 1, fastRole)
	key := backend.AppKey(f.ids[0].Tenant, f.ids[0].App, "job", "overlapping")
	s := newScheduler(t)
	var runs atomic.Int32
	newerStarted := make(chan uint64, 1)
	olderChecked := make(chan struct{})
	type result struct {
		token  uint64
		ok     bool
		assert error
		extend error
		ctx    error
	}
	older := make(chan result, 1)
	newer := make(chan result, 1)
	_, err := s.NewJob(gocron.DurationJob(every), gocron.NewTask(func(ctx context.Context) {
		switch runs.Add(1) {
		case 1:
			tok, _ := schedlock.Token(ctx)
			own, cancel := schedlock.Context(ctx) // one run in flight: its own
			defer cancel()
			<-own.Done() // the lease ran out
			tok2 := <-newerStarted
			if tok2 <= tok {
				t.Errorf("the newer run's token %d is not above the older one's %d", tok2, tok)
			}
			var r result
			r.token, r.ok = schedlock.Token(ctx)
			r.assert = schedlock.Assert(ctx)
			r.extend = schedlock.Extend(ctx, time.Minute)
			c, cancel2 := schedlock.Context(ctx)
			r.ctx = context.Cause(c)
			cancel2()
			older <- r
			close(olderChecked)
		case 2:
			tok, _ := schedlock.Token(ctx)
			newerStarted <- tok
			<-olderChecked
			var r result
			r.token, r.ok = schedlock.Token(ctx)
			if !r.ok || r.token != tok {
				t.Errorf("the newer run's Token = %d, %v after the overlap; want its own %d", r.token, r.ok, tok)
			}
			r.assert = schedlock.Assert(ctx)
			// The older run's Extend did not lengthen this run's lease.
			if l, err := f.stores[0].Get(ctx, key); err != nil || l.TTL > atMost {
				t.Errorf("the newer run's lease: %v, %v; want at most lockAtMostFor %v", l.TTL, err, atMost)
			}
			newer <- r
		}
	}), gocron.WithName("overlapping"), gocron.WithStartAt(gocron.WithStartImmediately()),
		schedlock.Locked(f.stores[0], "overlapping", atMost, 0, quiet, schedlock.WithInstance(f.ids[0]), schedlock.WithScheduler(s)))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	var o, n result
	select {
	case o = <-older:
	case <-time.After(patience):
		t.Fatal("the runs did not overlap")
	}
	n = <-newer
	if o.ok {
		t.Errorf("the lapsed run's Token = %d, true; want false (the newer run's is %d)", o.token, n.token)
	}
	if !errors.Is(o.assert, schedlock.ErrLost) {
		t.Errorf("the lapsed run's Assert = %v; want ErrLost", o.assert)
	}
	if !errors.Is(o.extend, schedlock.ErrLost) {
		t.Errorf("the lapsed run's Extend = %v; want ErrLost (it must not extend the newer run's lease)", o.extend)
	}
	if !errors.Is(o.ctx, schedlock.ErrLost) {
		t.Errorf("the lapsed run's Context: cause %v; want ErrLost", o.ctx)
	}
	if n.assert != nil {
		t.Errorf("the newer run's Assert = %v; want nil", n.assert)
	}
}

// Overlapping runs through Run: the run that outlived its lock is told so
// while a newer run of the same gate holds the lock, and its Extend does
// not touch the newer run's lease.
func TestOverlappingRunsThroughRun(t *testing.T) {
	const atMost = 300 * time.Millisecond
	f := newFleet(t, "mem", 1, fastRole)
	g := lockGate(t, f, 0, "overlap-run", atMost, 0)
	ctx := ctxT(t)
	lapsed := make(chan struct{})
	check := make(chan struct{})
	checked := make(chan struct{})
	older := make(chan error, 1)
	go func() {
		older <- schedlock.Run(ctx, g.Job(), time.Time{}, func(ctx context.Context) error {
			<-ctx.Done() // the lease ran out
			close(lapsed)
			<-check
			defer close(checked)
			if tok, ok := schedlock.Token(ctx); ok {
				t.Errorf("the lapsed run's Token = %d, true; want false", tok)
			}
			if err := schedlock.Assert(ctx); !errors.Is(err, schedlock.ErrLost) {
				t.Errorf("the lapsed run's Assert = %v; want ErrLost", err)
			}
			if err := schedlock.Extend(ctx, time.Minute); !errors.Is(err, schedlock.ErrLost) {
				t.Errorf("the lapsed run's Extend = %v; want ErrLost", err)
			}
			return nil
		})
	}()
	<-lapsed
	admitted := false
	for !admitted {
		err := schedlock.Run(ctx, g.Job(), time.Time{}, func(ctx context.Context) error {
			admitted = true
			tok, ok := schedlock.Token(ctx)
			close(check)
			<-checked
			if tok2, ok2 := schedlock.Token(ctx); !ok || !ok2 || tok2 != tok {
				t.Errorf("the newer run's Token = %d, %v; want its own %d", tok2, ok2, tok)
			}
			if l, err := f.stores[0].Get(ctx, g.LockKey()); err != nil || l.TTL > atMost {
				t.Errorf("the newer run's lease: %v, %v; want at most %v", l.TTL, err, atMost)
			}
			return nil
		})
		if err != nil && !errors.Is(err, schedlock.ErrLocked) {
			t.Fatal(err)
		}
		if !admitted {
			time.Sleep(10 * time.Millisecond) // the lapsed lease is still on the store
		}
	}
	if err := <-older; !errors.Is(err, schedlock.ErrLost) {
		t.Fatalf("the lapsed run's Run = %v; want ErrLost", err)
	}
}
