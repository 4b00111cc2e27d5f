package lease_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/internal/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Unix(1_700_000_000, 0)

// hooks records what the holder tells its policy.
type hooks struct {
	mu    sync.Mutex
	lost  []error
	lostC chan error
	woken chan struct{}
}

func newHooks() *hooks {
	return &hooks{lostC: make(chan error, 4), woken: make(chan struct{}, 4)}
}

func (k *hooks) Lost(cause error) error {
	k.mu.Lock()
	k.lost = append(k.lost, cause)
	k.mu.Unlock()
	k.lostC <- cause
	return fmt.Errorf("policy: %w", cause)
}

func (k *hooks) Woken() { k.woken <- struct{}{} }

func (k *hooks) losses() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.lost)
}

type env struct {
	clk   *clock.Fake
	store *membackend.Store
	terms *lease.Terms
}

func newEnv(margin time.Duration) *env {
	clk := clock.NewFake(t0)
	st := membackend.New(membackend.WithClock(clk))
	return &env{clk: clk, store: st, terms: &lease.Terms{Store: st, Alarm: lease.NewAlarm(clk), Margin: margin, OpTimeout: time.Minute}}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// grant acquires key for owner with ttl and starts h on it.
func (e *env) grant(t *testing.T, h *lease.Holder, k lease.Hooks, key string, ttl time.Duration) {
	t.Helper()
	ctx := ctxT(t)
	sent := e.clk.Now()
	l, err := e.store.Acquire(ctx, key, "me", ttl, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background(), e.terms, k, lease.Grant{Key: key, Owner: "me", Lease: l, Sent: sent, TTL: ttl}); err != nil {
		t.Fatal(err)
	}
}

// started is a holding of "k" for a second, with a 100ms margin.
func started(t *testing.T) (*env, *lease.Holder, *hooks) {
	t.Helper()
	e, h, k := newEnv(100*time.Millisecond), new(lease.Holder), newHooks()
	e.grant(t, h, k, "k", time.Second)
	return e, h, k
}

func waitLost(t *testing.T, k *hooks, want error) {
	t.Helper()
	select {
	case cause := <-k.lostC:
		if !errors.Is(cause, want) {
			t.Fatalf("lost with %v, want %v", cause, want)
		}
	case <-time.After(time.Minute):
		t.Fatal("the holding was never lost")
	}
}

func TestMargin(t *testing.T) {
	for _, c := range []struct{ ttl, want time.Duration }{
		{time.Second, 100 * time.Millisecond},
		{10 * time.Second, time.Second},
		{time.Hour, time.Second},
		{5 * time.Millisecond, 500 * time.Microsecond},
	} {
		if got := lease.Margin(c.ttl); got != c.want {
			t.Errorf("Margin(%v) = %v, want %v", c.ttl, got, c.want)
		}
	}
}

// The holding is lost at sent + ttl − margin exactly: not a nanosecond
// before, and then its context is cancelled with the cause Lost returns,
// after Lost ran.
func TestDeadlineIsSentPlusTTLLessMargin(t *testing.T) {
	e, h, k := started(t)
	if h.Token() == 0 || h.Key() != "k" || h.Owner() != "me" {
		t.Fatalf("holder names key %q owner %q token %d", h.Key(), h.Owner(), h.Token())
	}
	e.clk.AwaitTimers(t, 1)
	e.clk.Advance(900*time.Millisecond - time.Nanosecond)
	if left := h.Left(); left != time.Nanosecond {
		t.Fatalf("Left = %v a nanosecond before the deadline", left)
	}
	if h.Over() || h.Context().Err() != nil {
		t.Fatal("the holding ended before its deadline")
	}
	e.clk.Advance(time.Nanosecond)
	waitLost(t, k, lease.ErrExpired)
	<-h.Context().Done()
	if cause := context.Cause(h.Context()); !errors.Is(cause, lease.ErrExpired) || cause.Error() != "policy: "+lease.ErrExpired.Error() {
		t.Fatalf("context cause %v, want the one Lost returned", cause)
	}
	if !h.Over() || h.Left() > 0 {
		t.Fatalf("Over %v Left %v after the deadline", h.Over(), h.Left())
	}
	if h.End() != true {
		t.Fatal("End after the loss does not report it")
	}
	if k.losses() != 1 {
		t.Fatalf("Lost ran %d times", k.losses())
	}
}

// A grant whose reply lands past its deadline is refused.
func TestStartRefusesLateGrant(t *testing.T) {
	e := newEnv(100 * time.Millisecond)
	sent := e.clk.Now()
	l, err := e.store.Acquire(ctxT(t), "k", "me", time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(900 * time.Millisecond)
	if !e.terms.Late(sent, time.Second) {
		t.Fatal("Late is false at the deadline")
	}
	var h lease.Holder
	if err := h.Start(context.Background(), e.terms, newHooks(), lease.Grant{Key: "k", Owner: "me", Lease: l, Sent: sent, TTL: time.Second}); !errors.Is(err, lease.ErrLate) {
		t.Fatalf("Start of a late grant: %v, want ErrLate", err)
	}
	if err := e.terms.Drop(ctxT(t), "k", "me", 0); err != nil {
		t.Fatalf("Drop of the late grant: %v", err)
	}
}

// A renewal moves the deadline to its own sent + ttl − margin, with the
// same margin as the grant.
func TestRenewMovesDeadline(t *testing.T) {
	e, h, k := started(t)
	e.clk.AwaitTimers(t, 1)
	e.clk.Advance(500 * time.Millisecond)
	if _, err := h.Renew(ctxT(t), 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, want := h.Left(), 3*time.Second-100*time.Millisecond; got != want {
		t.Fatalf("Left after the renewal = %v, want %v", got, want)
	}
	e.clk.Advance(3*time.Second - 100*time.Millisecond - time.Nanosecond)
	if h.Over() {
		t.Fatal("lost before the renewed deadline")
	}
	e.clk.Advance(time.Nanosecond)
	waitLost(t, k, lease.ErrExpired)
}

// lateStore delays each Renew until the test lets it answer.
type lateStore struct {
	*membackend.Store
	entered chan struct{}
	answer  chan struct{}
}

func (s *lateStore) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	s.entered <- struct{}{}
	<-s.answer
	return s.Store.Renew(context.WithoutCancel(ctx), key, owner, ttl)
}

// A renewal whose reply lands after the deadline is void: the holding
// was lost at the deadline and stays lost, even though the store did
// extend the key.
func TestLateRenewalIsVoid(t *testing.T) {
	e := newEnv(100 * time.Millisecond)
	ls := &lateStore{Store: e.store, entered: make(chan struct{}), answer: make(chan struct{})}
	e.terms.Store = ls
	k := newHooks()
	var h lease.Holder
	e.grant(t, &h, k, "k", time.Second)
	e.clk.AwaitTimers(t, 1)
	done := make(chan error, 1)
	go func() {
		_, err := h.Renew(ctxT(t), 10*time.Second)
		done <- err
	}()
	<-ls.entered
	e.clk.Advance(time.Second)
	waitLost(t, k, lease.ErrExpired)
	close(ls.answer)
	if err := <-done; !errors.Is(err, lease.ErrLate) {
		t.Fatalf("a renewal answered after the deadline: %v, want ErrLate", err)
	}
	if h.Left() > 0 || !h.Over() {
		t.Fatal("a late renewal revived the holding")
	}
	if _, err := h.Renew(ctxT(t), time.Second); !errors.Is(err, lease.ErrLate) {
		t.Fatalf("a renewal after the loss: %v, want ErrLate without a store call", err)
	}
	if k.losses() != 1 {
		t.Fatalf("Lost ran %d times", k.losses())
	}
}

// A store refusal is the policy's to act on: Renew returns it and the
// deadline stays.
func TestRenewNotHeldLeavesDeadline(t *testing.T) {
	e, h, k := started(t)
	if err := e.store.Release(ctxT(t), "k", "me", 0); err != nil {
		t.Fatal(err)
	}
	left := h.Left()
	if _, err := h.Renew(ctxT(t), time.Second); !errors.Is(err, backend.ErrNotHeld) {
		t.Fatalf("Renew of a released key: %v, want ErrNotHeld", err)
	}
	if h.Left() != left || h.Over() {
		t.Fatal("a refused renewal changed the holding")
	}
	h.Lose(errors.New("gone"))
	if cause := context.Cause(h.Context()); cause == nil || cause.Error() != "policy: gone" {
		t.Fatalf("cause after Lose: %v", cause)
	}
	h.Lose(errors.New("again"))
	if k.losses() != 1 {
		t.Fatalf("Lost ran %d times", k.losses())
	}
}

// A wake-up before the deadline calls Woken and leaves the deadline; one
// at or past it is refused.
func TestWakeIn(t *testing.T) {
	e, h, k := started(t)
	if h.WakeIn(900 * time.Millisecond) {
		t.Fatal("a wake-up at the deadline was accepted")
	}
	if !h.WakeIn(300 * time.Millisecond) {
		t.Fatal("a wake-up before the deadline was refused")
	}
	e.clk.AwaitTimers(t, 1)
	e.clk.Advance(300 * time.Millisecond)
	select {
	case <-k.woken:
	case <-time.After(time.Minute):
		t.Fatal("not woken")
	}
	if h.Over() {
		t.Fatal("the wake-up ended the holding")
	}
	e.clk.AwaitTimers(t, 1)
	e.clk.Advance(600 * time.Millisecond)
	waitLost(t, k, lease.ErrExpired)
}

// End ends the holding for good: the deadline passing later loses
// nothing, and Drop frees the key, keeping it keepFor.
func TestEndThenDropKeepsFor(t *testing.T) {
	e, h, k := started(t)
	if h.End() {
		t.Fatal("End reports a loss that did not happen")
	}
	if h.Left() > 0 {
		t.Fatal("Left positive after End")
	}
	if !errors.Is(context.Cause(h.Context()), context.Canceled) {
		t.Fatalf("context after End: %v", context.Cause(h.Context()))
	}
	ctx := ctxT(t)
	if err := h.Drop(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(2 * time.Second)
	h.Lose(errors.New("late"))
	if k.losses() != 0 {
		t.Fatal("a holding lost after End")
	}
	if _, err := e.store.Acquire(ctx, "k", "other", time.Second, 0); err == nil {
		t.Fatal("the key was free before keepFor ended")
	}
	e.clk.Advance(3 * time.Second)
	if _, err := e.store.Acquire(ctx, "k", "other", time.Second, 0); err != nil {
		t.Fatalf("the key after keepFor: %v", err)
	}
}

// Many holdings share one timer, and each is still lost at its own
// deadline: the timer is armed again after going off for an ended one.
func TestAlarmSharesOneTimer(t *testing.T) {
	e := newEnv(100 * time.Millisecond)
	// The store's expiry timers run on a clock of their own, so that the
	// fake clock counts only the alarm's.
	e.store = membackend.New(membackend.WithClock(clock.NewFake(t0)))
	e.terms.Store = e.store
	var a, b lease.Holder
	ka, kb := newHooks(), newHooks()
	e.grant(t, &a, ka, "a", time.Second)   // deadline T+0.9s
	e.grant(t, &b, kb, "b", 2*time.Second) // deadline T+1.9s
	if n := e.clk.Timers(); n != 1 {
		t.Fatalf("%d timers for two holdings, want 1", n)
	}
	a.End()
	e.clk.Advance(900 * time.Millisecond)
	e.clk.AwaitTimers(t, 1) // armed again for b
	e.clk.Advance(time.Second)
	waitLost(t, kb, lease.ErrExpired)
	if ka.losses() != 0 {
		t.Fatal("an ended holding was lost")
	}
}

// pausingClock stops the n-th Since call after arm until resume is
// closed: the moment between reading the clock and acting on it.
type pausingClock struct {
	*clock.Fake
	mu     sync.Mutex
	n      int
	hit    chan struct{}
	resume chan struct{}
}

func (p *pausingClock) arm(n int) {
	p.mu.Lock()
	p.n = n
	p.mu.Unlock()
}

func (p *pausingClock) Since(t time.Time) time.Duration {
	d := p.Fake.Since(t)
	p.mu.Lock()
	pause := false
	if p.n > 0 {
		p.n--
		pause = p.n == 0
	}
	p.mu.Unlock()
	if pause {
		p.hit <- struct{}{}
		<-p.resume
	}
	return d
}

// A renewal whose reply is read a moment before the deadline and acted
// on after it, once a reader saw the holding over, is void: the holding
// never reads as held again.
func TestRenewalActedOnAfterDeadlineIsVoid(t *testing.T) {
	fake := clock.NewFake(t0)
	clk := &pausingClock{Fake: fake, hit: make(chan struct{}), resume: make(chan struct{})}
	st := membackend.New(membackend.WithClock(clock.NewFake(t0)))
	terms := &lease.Terms{Store: st, Alarm: lease.NewAlarm(clk), Margin: 100 * time.Millisecond, OpTimeout: time.Minute}
	k := newHooks()
	var h lease.Holder
	l, err := st.Acquire(ctxT(t), "k", "me", time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(context.Background(), terms, k, lease.Grant{Key: "k", Owner: "me", Lease: l, Sent: fake.Now(), TTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	fake.AwaitTimers(t, 1)
	fake.Advance(900*time.Millisecond - time.Millisecond)
	clk.arm(2) // Renew's own check, then the reading it extends on
	done := make(chan error, 1)
	go func() {
		_, err := h.Renew(ctxT(t), 10*time.Second)
		done <- err
	}()
	<-clk.hit
	fake.Advance(2 * time.Millisecond)
	if h.Left() > 0 {
		t.Fatal("held past the deadline")
	}
	close(clk.resume)
	if err := <-done; !errors.Is(err, lease.ErrLate) {
		t.Fatalf("a renewal acted on after the deadline: %v, want ErrLate", err)
	}
	if h.Left() > 0 {
		t.Fatal("a renewal acted on after the deadline revived the holding")
	}
	waitLost(t, k, lease.ErrExpired)
}

// afterHooks is a policy with something to do once the lost holder's
// context is cancelled; it records what the context said at that moment.
type afterHooks struct {
	*hooks
	h     *lease.Holder
	after chan error
}

func (k *afterHooks) AfterLost() { k.after <- context.Cause(k.h.Context()) }

// A policy's AfterLost (synclock passes the local turn there) runs only
// once the lost holding's context is cancelled, with the cause Lost gave,
// so that nothing the policy lets happen next overlaps a section still
// told it holds.
func TestAfterLostRunsOnceTheContextIsCancelled(t *testing.T) {
	e, h := newEnv(100*time.Millisecond), new(lease.Holder)
	k := &afterHooks{hooks: newHooks(), h: h, after: make(chan error, 1)}
	e.grant(t, h, k, "k", time.Second)
	e.clk.Advance(900 * time.Millisecond) // the deadline: sent + ttl - margin
	waitLost(t, k.hooks, lease.ErrExpired)
	select {
	case cause := <-k.after:
		if cause == nil || !errors.Is(cause, lease.ErrExpired) {
			t.Fatalf("AfterLost saw the context's cause %v, want the policy's cause wrapping ErrExpired", cause)
		}
	case <-time.After(time.Minute):
		t.Fatal("AfterLost never ran")
	}
}
