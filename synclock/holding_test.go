package synclock_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/faulty"
)

// A holder that never unlocks blocks the other goroutines of its process
// only until its lease lapses: the loss passes the local turn on, the next
// goroutine takes the lock at the store, and the lapsed holder's late
// Unlock reports ErrLeaseExpired without passing the turn a second time.
// On the fake clock, so that the next holder's lease lasts as long as the
// test needs it.
func TestLapsedHolderFreesLocalTurn(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	st := membackend.New(membackend.WithClock(clk))
	defer st.Close()
	const hold = 300 * time.Millisecond
	lk := lockerOn(t, 1, st, synclock.Config{HoldDuration: hold}, synclock.WithClock(clk))
	key := uniqueKey(t)
	a, b, c := lk.Mutex(key), lk.Mutex(key), lk.Mutex(key)
	if err := a.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	tokA, _ := synclock.Token(a.Context())
	got := make(chan error, 1)
	go func() { got <- b.Lock(ctxT(t)) }()
	waitQueued(t, lk, key, 1)
	// a gives its lease up a margin before the hold ends, and the store
	// lets it expire at the end.
	clk.Advance(hold)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the second goroutine: %v", err)
		}
	case <-time.After(patience):
		t.Fatal("the second goroutine of the process did not get the lock after the holder's 300ms lease lapsed")
	}
	if cause := context.Cause(a.Context()); !errors.Is(cause, synclock.ErrLeaseExpired) {
		t.Fatalf("the lapsed holder's context: cause %v, want ErrLeaseExpired", cause)
	}
	if _, ok := synclock.Token(a.Context()); ok {
		t.Error("the lapsed holder's Token still claims the lock")
	}
	tokB, ok := synclock.Token(b.Context())
	if !ok || tokB <= tokA {
		t.Fatalf("the new holder's token %d (ok %v), want one above the lapsed holder's %d", tokB, ok, tokA)
	}
	// c waits behind b; a's late Unlock must not hand it b's turn.
	cDone := make(chan error, 1)
	go func() { cDone <- c.Lock(ctxT(t)) }()
	waitQueued(t, lk, key, 1)
	if err := a.Unlock(ctxT(t)); !errors.Is(err, synclock.ErrLeaseExpired) {
		t.Fatalf("the lapsed holder's Unlock: %v, want ErrLeaseExpired", err)
	}
	if n := synclock.Waiting(lk, key); n != 1 {
		t.Fatalf("after the lapsed holder's Unlock %d goroutines wait, want 1 (c, behind b)", n)
	}
	if n := synclock.Users(lk, key); n != 2 {
		t.Fatalf("after the lapsed holder's Unlock the queue counts %d users, want 2 (b and c)", n)
	}
	l, err := st.Get(ctxT(t), backend.AppKey("acme", "billing", "lock", key))
	if err != nil || l.Token != tokB {
		t.Fatalf("after the lapsed holder's Unlock the key is %+v, %v; want b's lease (token %d)", l, err, tokB)
	}
	if err := b.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-cDone; err != nil {
		t.Fatal(err)
	}
	if err := c.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := synclock.Users(lk, key); n != 0 {
		t.Fatalf("after every holder unlocked the queue counts %d users, want 0", n)
	}
}

// With MaxRetries a goroutine waiting behind a local holder gives up after
// MaxRetries retry intervals, with ErrLocked, as a waiter at the store
// does, instead of waiting until its context ends.
func TestLocalWaiterHonoursMaxRetries(t *testing.T) {
	st := membackend.New()
	defer st.Close()
	lk := lockerOn(t, 1, st, synclock.Config{MaxRetries: 2, RetryInterval: 50 * time.Millisecond})
	key := uniqueKey(t)
	holder := lk.Mutex(key)
	if err := holder.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	ran := false
	err := lk.DoKey(ctx, key, func(context.Context) error { ran = true; return nil })
	if ctx.Err() != nil {
		t.Fatalf("the local waiter waited until its context ended: %v", err)
	}
	if !errors.Is(err, synclock.ErrLocked) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "another goroutine of this instance") || ran {
		t.Fatalf("local waiter after MaxRetries: %v (ran %v); want ErrLocked naming the key and the local holder, not run", err, ran)
	}
	if n := synclock.Users(lk, key); n != 1 {
		t.Fatalf("after the waiter gave up the queue counts %d users, want 1 (the holder)", n)
	}
	if err := holder.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if n := synclock.Users(lk, key); n != 0 {
		t.Fatalf("after the holder unlocked the queue counts %d users, want 0", n)
	}
}

type ctxKey struct{}

// The context passed to Lock bounds the wait, not the holding: the lease
// is still extended past the claim window after it ends, Context stays
// live and keeps its values, and Unlock succeeds. On the fake clock, so
// that the extension has all the time it needs to land.
func TestMutexOutlivesLockContext(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_700_000_000, 0))
	st := membackend.New(membackend.WithClock(clk))
	defer st.Close()
	const claim = 300 * time.Millisecond
	extended := make(chan struct{}, 1)
	lk := lockerOn(t, 1, st, synclock.Config{HoldDuration: time.Minute, ClaimWindow: claim}, synclock.WithClock(clk), synclock.WithObserver(func(ev synclock.Event) {
		if ev.Kind == synclock.EventExtended {
			select {
			case extended <- struct{}{}:
			default:
			}
		}
	}))
	key := uniqueKey(t)
	m := lk.Mutex(key)
	ctx, cancel := context.WithCancel(context.WithValue(ctxT(t), ctxKey{}, "v"))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := m.Context().Err(); err != nil {
		t.Errorf("the holding's context ended with Lock's: %v", err)
	}
	if v := m.Context().Value(ctxKey{}); v != "v" {
		t.Errorf("the holding's context carries %v, want Lock's value", v)
	}
	clk.Advance(claim / 3) // the extension starts
	select {
	case <-extended:
	case <-m.Context().Done():
		t.Fatalf("the holding ended (%v) instead of being extended past the claim window", context.Cause(m.Context()))
	case <-time.After(patience):
		t.Fatal("the lease was never extended")
	}
	l, err := st.Get(ctxT(t), backend.AppKey("acme", "billing", "lock", key))
	if err != nil || l.TTL <= claim {
		t.Fatalf("the lease after the extension: %+v, %v; want more than the %v claim window left", l, err, claim)
	}
	if _, ok := synclock.Token(m.Context()); !ok || m.Context().Err() != nil {
		t.Fatalf("the extended holding: Token ok %v, context %v; want held", ok, m.Context().Err())
	}
	if err := m.Unlock(ctxT(t)); err != nil {
		t.Fatalf("Unlock of a holding whose Lock context ended: %v", err)
	}
}

// An extension whose reply lands after the holder gave its lease up is
// void: the loss is reported once, no extension is reported after it, the
// section stays cancelled and Token no longer claims the lock.
func TestLateRenewalReplyIsVoid(t *testing.T) {
	st := faulty.NewLateRenew(membackend.New())
	defer st.Close()
	defer st.Proceed()
	r := &recorder{}
	lk := lockerOn(t, 1, st, synclock.Config{HoldDuration: time.Minute, ClaimWindow: 300 * time.Millisecond}, synclock.WithObserver(r.observe))
	m := lk.Mutex(uniqueKey(t))
	if err := m.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	section := m.Context()
	select {
	case <-st.Entered():
	case <-time.After(patience):
		t.Fatal("the holder never tried to extend its lease")
	}
	select {
	case <-section.Done():
	case <-time.After(patience):
		t.Fatal("the lease was not given up while its extension hung")
	}
	st.Proceed()
	// Unlock waits for the extension in flight, so its reply has been
	// dealt with when Unlock returns.
	if err := m.Unlock(ctxT(t)); !errors.Is(err, synclock.ErrLeaseExpired) {
		t.Errorf("Unlock after the lease was given up: %v, want ErrLeaseExpired", err)
	}
	if cause := context.Cause(section); !errors.Is(cause, synclock.ErrLeaseExpired) {
		t.Errorf("the section ended with %v, want ErrLeaseExpired", cause)
	}
	if _, ok := synclock.Token(section); ok {
		t.Error("Token still claims the lock after the lease was given up")
	}
	want := []synclock.EventKind{synclock.EventAcquired, synclock.EventLost, synclock.EventReleased}
	if got := kinds(r.take()); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v: a reply after the deadline must not extend the lease", got, want)
	}
}

// blockingClose is a store whose watches' Close blocks until the test lets
// it, as an UNSUBSCRIBE to a server that stopped answering does.
type blockingClose struct {
	*membackend.Store
	watches atomic.Int32
	closing chan struct{} // closed when a Close starts
	release chan struct{} // closed by the test to let it finish
	once    sync.Once
}

type stuckWatch struct {
	backend.Watch
	s *blockingClose
}

func (s *blockingClose) Watch(ctx context.Context, key string) (backend.Watch, error) {
	w, err := s.Store.Watch(ctx, key)
	if err != nil {
		return nil, err
	}
	s.watches.Add(1)
	return stuckWatch{w, s}, nil
}

func (w stuckWatch) Close() error {
	w.s.once.Do(func() { close(w.s.closing) })
	<-w.s.release
	return w.Watch.Close()
}

// Closing a key's watch may be a round trip to the store; one that hangs
// stalls that key's release, not the other keys of the Locker.
func TestHungWatchCloseStallsNoOtherKey(t *testing.T) {
	mem := membackend.New(membackend.WithoutHandover())
	defer mem.Close()
	st := &blockingClose{Store: mem, closing: make(chan struct{}), release: make(chan struct{})}
	cfg := synclock.Config{RetryInterval: time.Hour}
	lk := lockerOn(t, 1, st, cfg)
	synclock.SetParkLimit(lk, 0) // close every watch when its queue empties
	other := lockerOn(t, 2, mem, cfg)
	var wg sync.WaitGroup
	defer wg.Wait()
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(st.release) })

	// lk waits for a key other holds, watching it; when its section ends
	// the queue empties and the watch is closed, which hangs.
	key := uniqueKey(t)
	held := other.Mutex(key)
	if err := held.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	wg.Go(func() {
		if err := lk.DoKey(ctxT(t), key, func(context.Context) error { return nil }); err != nil {
			t.Error(err)
		}
	})
	waitFor(t, "the waiter watches the key", func() bool { return st.watches.Load() == 1 })
	if err := held.Unlock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.closing:
	case <-time.After(patience):
		t.Fatal("the watch was never closed")
	}

	done := make(chan error, 1)
	wg.Go(func() {
		done <- lk.DoKey(ctxT(t), key+":other", func(context.Context) error { return nil })
	})
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(patience):
		t.Fatal("a section on another key stalled behind a watch's hung Close")
	}
}
