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
	"github.com/baton-go/baton/testkit/faulty"
)

// An acquisition whose context has already ended asks the store nothing
// (before, a DoKey sent a Dequeue with a fresh operation timeout, which
// blocked on a stalled server): DoKey, Lock and TryLock fail at once
// with the context's error and its cause, whether the
// key is free, held by another instance, or held by another goroutine of
// this one.
func TestEndedContextAsksStoreNothing(t *testing.T) {
	aborted := errors.New("the HTTP request was cancelled")
	cancelled, cancel := context.WithCancelCause(context.Background())
	cancel(aborted)
	expired, cancelDeadline := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelDeadline()
	ctxs := []struct {
		name string
		ctx  context.Context
		want []error
	}{
		{"cancelled", cancelled, []error{context.Canceled, aborted}},
		{"past its deadline", expired, []error{context.DeadlineExceeded}},
	}
	calls := map[string]func(lk *synclock.Locker, ctx context.Context, key string, ran *bool) error{
		"DoKey": func(lk *synclock.Locker, ctx context.Context, key string, ran *bool) error {
			return lk.DoKey(ctx, key, func(context.Context) error { *ran = true; return nil })
		},
		"Lock": func(lk *synclock.Locker, ctx context.Context, key string, ran *bool) error {
			err := lk.Mutex(key).Lock(ctx)
			*ran = err == nil
			return err
		},
		"TryLock": func(lk *synclock.Locker, ctx context.Context, key string, ran *bool) error {
			err := lk.Mutex(key).TryLock(ctx)
			*ran = err == nil
			return err
		},
	}
	holders := map[string]func(t *testing.T, lk, other *synclock.Locker, key string){
		"free key": func(*testing.T, *synclock.Locker, *synclock.Locker, string) {},
		"held by another instance": func(t *testing.T, _, other *synclock.Locker, key string) {
			hold(t, other.Mutex(key))
		},
		"held by another goroutine": func(t *testing.T, lk, _ *synclock.Locker, key string) {
			hold(t, lk.Mutex(key))
		},
	}
	for _, c := range ctxs {
		for name, call := range calls {
			for held, setUp := range holders {
				t.Run(c.name+"/"+name+"/"+held, func(t *testing.T) {
					st := faulty.NewCounting(membackend.New())
					defer st.Close()
					cfg := synclock.Config{RetryInterval: time.Hour, HoldDuration: time.Minute}
					lk, other := lockerOn(t, 1, st, cfg), lockerOn(t, 2, st, cfg)
					key := uniqueKey(t)
					setUp(t, lk, other, key)
					before := st.Calls()
					ran := false
					err := call(lk, c.ctx, key, &ran)
					if ran {
						t.Errorf("%s with an ended context took the lock", name)
					}
					for _, want := range c.want {
						if !errors.Is(err, want) {
							t.Errorf("%s with an ended context: %v; want an error wrapping %v", name, err, want)
						}
					}
					if after := st.Calls(); !sameCalls(before, after) {
						t.Errorf("%s with an ended context called the store: calls before %v, after %v; want none", name, before, after)
					}
				})
			}
		}
	}
}

// hold locks m until the test ends.
func hold(t *testing.T, m *synclock.Mutex) {
	t.Helper()
	if err := m.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Unlock(context.Background()) })
}

func sameCalls(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, n := range a {
		if b[k] != n {
			return false
		}
	}
	return true
}

// A wait for a key that the caller's own call chain holds on the same
// store, through another Locker or as a Mutex, fails at once with
// ErrReentrant naming the key, instead of waiting for itself until the
// holding's lease ends; the holding is untouched. The same Locker's DoKey
// still runs a nested section directly, and the same key on another
// store is another lock.
func TestNestedWaitForOwnHoldingFails(t *testing.T) {
	st := membackend.New()
	defer st.Close()
	cfg := synclock.Config{RetryInterval: time.Hour, HoldDuration: time.Minute}
	lk, second := lockerOn(t, 1, st, cfg), lockerOn(t, 1, st, cfg)
	elsewhere := membackend.New()
	defer elsewhere.Close()
	apart := lockerOn(t, 1, elsewhere, cfg)
	key := uniqueKey(t)

	// The nested waits get a deadline of their own: before the fix they
	// waited for themselves until it.
	within := func(ctx context.Context) context.Context {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	checkReentrant := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, synclock.ErrReentrant) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v; want ErrReentrant naming the key %q", what, err, key)
		}
	}
	nothing := func(context.Context) error { return errors.New("the nested section ran") }

	err := lk.DoKey(ctxT(t), key, func(ctx context.Context) error {
		outer, _ := synclock.Token(ctx)
		checkReentrant("DoKey through a second Locker", second.DoKey(within(ctx), key, nothing))
		checkReentrant("Lock of a second Locker's Mutex", second.Mutex(key).Lock(within(ctx)))
		checkReentrant("Lock of the same Locker's Mutex", lk.Mutex(key).Lock(within(ctx)))
		if err := lk.DoKey(ctx, key, func(ctx context.Context) error {
			if tok, _ := synclock.Token(ctx); tok != outer {
				t.Errorf("the same Locker's nested section has token %d; want the holding's %d", tok, outer)
			}
			return nil
		}); err != nil {
			t.Errorf("the same Locker's nested DoKey: %v; want it run directly", err)
		}
		if err := apart.DoKey(within(ctx), key, func(context.Context) error { return nil }); err != nil {
			t.Errorf("DoKey of the same key on another store: %v; want it taken", err)
		}
		if tok, ok := synclock.Token(ctx); !ok || tok != outer {
			t.Errorf("the holding after the nested calls: token %d, %v; want %d, still held", tok, ok, outer)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the outer section: %v", err)
	}

	m := lk.Mutex(key)
	if err := m.Lock(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	checkReentrant("DoKey through a second Locker with the Mutex's Context", second.DoKey(within(m.Context()), key, nothing))
	if err := m.Unlock(ctxT(t)); err != nil {
		t.Fatalf("the Mutex's Unlock: %v", err)
	}
	if err := second.DoKey(ctxT(t), key, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("the second Locker's DoKey once the key is free: %v", err)
	}
}

// DoKey keeps the store key of the last key it was given, and a bad key's
// error with it: each key, asked for in turn, is still checked as its own.
func TestDoKeyKeepsLastKey(t *testing.T) {
	lk := lockerOn(t, 1, &grantingStore{}, synclock.Config{})
	ctx := context.Background()
	section := func(context.Context) error { return nil }
	bad := "bad key\n"
	for _, key := range []string{"a", "a", bad, bad, "b", "a"} {
		err := lk.DoKey(ctx, key, section)
		if want := key == bad; errors.Is(err, backend.ErrInvalidArgument) != want {
			t.Errorf("DoKey(%q) = %v; want an ErrInvalidArgument %v", key, err, want)
		}
	}
}
