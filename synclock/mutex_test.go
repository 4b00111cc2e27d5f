package synclock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/synclock"
)

// One Mutex shared by two goroutines, as a sync.Mutex is: the first
// holder's lease lapses, and it unlocks late. The Mutex stays locked until
// that Unlock — Lock on it waits, here until its MaxRetries budget is
// spent — so the late Unlock reports ErrLeaseExpired and can never end
// another goroutine's holding of the same Mutex.
func TestSharedMutexLateUnlockKeepsNextHolding(t *testing.T) {
	st := membackend.New()
	defer st.Close()
	lk := lockerOn(t, 1, st, synclock.Config{HoldDuration: 300 * time.Millisecond, MaxRetries: 2, RetryInterval: 100 * time.Millisecond})
	key := uniqueKey(t)
	m := lk.Mutex(key)
	if err := m.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Context().Done():
	case <-time.After(patience):
		t.Fatal("the 300ms lease never lapsed")
	}

	// A second goroutine locks the same Mutex while the lapsed holding
	// is not unlocked yet.
	second := make(chan error, 1)
	go func() { second <- m.Lock(ctxT(t)) }()
	var err2 error
	select {
	case err2 = <-second:
	case <-time.After(patience):
		t.Fatal("the second Lock neither got the mutex nor gave up after its MaxRetries budget")
	}
	tok2, held2 := synclock.Token(m.Context())

	// The first goroutine's late Unlock.
	if err := m.Unlock(ctxT(t)); !errors.Is(err, synclock.ErrLeaseExpired) {
		t.Errorf("the lapsed holder's late Unlock: %v, want ErrLeaseExpired", err)
	}
	if err2 == nil {
		// The second goroutine holds the mutex: the late Unlock must
		// have left its holding alone.
		if tok, ok := synclock.Token(m.Context()); !ok || tok != tok2 {
			t.Errorf("after the lapsed holder's late Unlock the second holding's Token is %d, %v; want %d, true", tok, ok, tok2)
		}
		l, err := st.Get(ctxT(t), backend.AppKey("acme", "billing", "lock", key))
		if err != nil || l.Token != tok2 {
			t.Errorf("after the lapsed holder's late Unlock the key is %+v, %v; want the second holding's (token %d)", l, err, tok2)
		}
		t.Fatalf("the second Lock took a Mutex still locked by a lapsed holding (token %d, held %v)", tok2, held2)
	}
	if !errors.Is(err2, synclock.ErrLocked) || !strings.Contains(err2.Error(), key) {
		t.Fatalf("the second Lock on a Mutex still locked: %v, want ErrLocked naming the key", err2)
	}

	// Unlocked now, the Mutex locks again at once.
	if err := m.Lock(ctxT(t)); err != nil {
		t.Fatalf("Lock after the late Unlock: %v", err)
	}
	if err := m.Unlock(ctxT(t)); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if n := synclock.Users(lk, key); n != 0 {
		t.Fatalf("after every holder unlocked the queue counts %d users, want 0", n)
	}
}

// Without MaxRetries, a Lock on a shared Mutex whose holding lapsed waits
// for the late Unlock and then takes the lock.
func TestSharedMutexLockWaitsForLateUnlock(t *testing.T) {
	st := membackend.New()
	defer st.Close()
	lk := lockerOn(t, 1, st, synclock.Config{HoldDuration: 300 * time.Millisecond})
	m := lk.Mutex(uniqueKey(t))
	if err := m.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	tok1, _ := synclock.Token(m.Context())
	select {
	case <-m.Context().Done():
	case <-time.After(patience):
		t.Fatal("the 300ms lease never lapsed")
	}
	second := make(chan error, 1)
	go func() { second <- m.Lock(ctxT(t)) }()
	if err := m.Unlock(ctxT(t)); !errors.Is(err, synclock.ErrLeaseExpired) {
		t.Errorf("the lapsed holder's late Unlock: %v, want ErrLeaseExpired", err)
	}
	select {
	case err := <-second:
		if err != nil {
			t.Fatalf("the second Lock: %v", err)
		}
	case <-time.After(patience):
		t.Fatal("the second Lock did not get the mutex after the late Unlock")
	}
	if tok, ok := synclock.Token(m.Context()); !ok || tok <= tok1 {
		t.Fatalf("the second holding's Token is %d, %v; want more than %d", tok, ok, tok1)
	}
	if err := m.Unlock(ctxT(t)); err != nil {
		t.Fatalf("the second holder's Unlock: %v", err)
	}
}

// A nested DoKey in a section whose holding has lapsed does not run fn as
// if its call chain still held the lock: after the lapse the next
// goroutine of the process may hold it.
func TestNestedDoKeyAfterLapseDoesNotRun(t *testing.T) {
	st := membackend.New()
	defer st.Close()
	lk := lockerOn(t, 1, st, synclock.Config{HoldDuration: 300 * time.Millisecond})
	key := uniqueKey(t)
	ran := false
	var nested error
	err := lk.DoKey(ctxT(t), key, func(ctx context.Context) error {
		select {
		case <-ctx.Done():
		case <-time.After(patience):
			return errors.New("the 300ms lease never lapsed")
		}
		nested = lk.DoKey(ctx, key, func(context.Context) error { ran = true; return nil })
		return nil
	})
	if !errors.Is(err, synclock.ErrLeaseExpired) {
		t.Fatalf("the outer section: %v, want ErrLeaseExpired", err)
	}
	if ran || !errors.Is(nested, synclock.ErrLeaseExpired) {
		t.Fatalf("a nested DoKey after the lapse ran %v and returned %v; want not run and ErrLeaseExpired", ran, nested)
	}
}
