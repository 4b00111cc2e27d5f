package synclock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/synclock"
)

// lateGrant is an in-memory store whose first grant is made at once but
// answered only after the test lets it: a server that ran the script and
// then stalled (SIGSTOP, a long GC of a proxy) before its reply went out.
type lateGrant struct {
	*membackend.Store
	entered, proceed chan struct{}
	once             sync.Once
	releases         atomic.Int32
}

func (s *lateGrant) AcquireQueued(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
	l, err := s.Store.AcquireQueued(ctx, key, owner, ttl, floor, patience)
	first := false
	s.once.Do(func() { first = true })
	if first && err == nil {
		close(s.entered)
		<-s.proceed
	}
	return l, err
}

func (s *lateGrant) Release(ctx context.Context, key, owner string, keepFor time.Duration) error {
	s.releases.Add(1)
	return s.Store.Release(ctx, key, owner, keepFor)
}

// waitGone waits until key's lease has ended on the store.
func waitGone(t *testing.T, st backend.Store, key string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		if _, err := st.Get(ctxT(t), key); errors.Is(err, backend.ErrNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the late grant's lease never ended on the store")
		}
		time.Sleep(time.Millisecond)
	}
}

// A grant that comes back after its claim window has passed is void: the
// section never runs on it (another holder may have the lock by then).
// TryLock reports ErrLeaseExpired; DoKey asks again and runs the section once
// on a fresh grant with a larger token.
func TestLateGrantIsVoid(t *testing.T) {
	for _, wait := range []bool{false, true} {
		name := "TryLock"
		if wait {
			name = "DoKey"
		}
		t.Run(name, func(t *testing.T) {
			mem := membackend.New()
			defer mem.Close()
			st := &lateGrant{Store: mem, entered: make(chan struct{}), proceed: make(chan struct{})}
			lk := lockerOn(t, 1, st, synclock.Config{HoldDuration: time.Second, ClaimWindow: 200 * time.Millisecond})
			key := uniqueKey(t)
			var runs atomic.Int32
			done := make(chan error, 1)
			go func() {
				section := func(ctx context.Context) error {
					runs.Add(1)
					return nil
				}
				if wait {
					done <- lk.DoKey(ctxT(t), key, section)
				} else {
					done <- tryDo(lk, ctxT(t), key, section)
				}
			}()
			<-st.entered
			// The store granted the key; its reply is held back until
			// the lease has ended there.
			waitGone(t, mem, backend.AppKey(idN(t, 1).Tenant, idN(t, 1).App, "lock", key))
			close(st.proceed)
			err := <-done
			switch {
			case !wait && !errors.Is(err, synclock.ErrLeaseExpired):
				t.Fatalf("TryLock on a late grant: %v, want ErrLeaseExpired", err)
			case !wait && runs.Load() != 0:
				t.Fatal("TryLock ran the section on a grant that came back after its claim window")
			case wait && err != nil:
				t.Fatalf("DoKey after a late grant: %v", err)
			case wait && runs.Load() != 1:
				t.Fatalf("DoKey ran the section %d times, want once, on the fresh grant", runs.Load())
			}
			if st.releases.Load() == 0 {
				t.Error("the late grant was not given back")
			}
		})
	}
}

// spentHandover hands over once a lease with nothing left, as a store
// does for a handover whose lease ran out before it was collected.
type spentHandover struct {
	*membackend.Store
	handed atomic.Uint64 // the token of the spent lease
}

func (s *spentHandover) AwaitHandover(ctx context.Context, key, owner string, max time.Duration) (backend.Lease, bool, error) {
	l, ok, err := s.Store.AwaitHandover(ctx, key, owner, max)
	if ok && s.handed.CompareAndSwap(0, l.Token) {
		l.TTL = 0
	}
	return l, ok, err
}

// A handed lease with no TTL left is as void as a late grant: it is
// given back and never used; DoKey runs the section on a fresh grant.
func TestSpentHandoverIsVoid(t *testing.T) {
	mem := membackend.New()
	defer mem.Close()
	st := &spentHandover{Store: mem}
	lk := lockerOn(t, 1, st, synclock.Config{HoldDuration: time.Second})
	key := uniqueKey(t)
	sk := backend.AppKey(idN(t, 1).Tenant, idN(t, 1).App, "lock", key)
	ctx := ctxT(t)
	if _, err := mem.Acquire(ctx, sk, "other", time.Minute, 0); err != nil {
		t.Fatal(err)
	}
	var used atomic.Uint64
	done := make(chan error, 1)
	go func() {
		done <- lk.DoKey(ctx, key, func(ctx context.Context) error {
			tok, _ := synclock.Token(ctx)
			used.Store(tok)
			return nil
		})
	}()
	for { // until the locker waits in line
		_, err := mem.AcquireQueued(ctx, sk, "probe", time.Minute, 0, 0)
		var he *backend.HeldError
		if errors.As(err, &he) && he.Next != "" {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the locker never joined the line")
		}
		time.Sleep(time.Millisecond)
	}
	if err := mem.Release(ctx, sk, "other", 0); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("DoKey after a spent handover: %v", err)
	}
	if spent := st.handed.Load(); spent == 0 || used.Load() <= spent {
		t.Fatalf("the section ran with token %d; want a fresh grant above the spent handover's %d", used.Load(), spent)
	}
}

// A section's context keeps the caller's values, carries its fencing
// token and ends, with the caller's cause, when the caller's context does.
func TestSectionContextFollowsCaller(t *testing.T) {
	lk := lockerOn(t, 1, &grantingStore{}, synclock.Config{})
	type valueKey struct{}
	bye := errors.New("caller left")
	ctx, cancel := context.WithCancelCause(context.WithValue(ctxT(t), valueKey{}, "v"))
	defer cancel(nil)
	err := lk.DoKey(ctx, "section", func(sctx context.Context) error {
		if v := sctx.Value(valueKey{}); v != "v" {
			t.Errorf("section's context has value %v, want the caller's v", v)
		}
		if tok, ok := synclock.Token(sctx); !ok || tok == 0 {
			t.Error("section's context carries no fencing token")
		}
		cancel(bye)
		select {
		case <-sctx.Done():
		case <-time.After(patience):
			t.Fatal("section's context did not end with the caller's")
		}
		if cause := context.Cause(sctx); !errors.Is(cause, bye) {
			t.Errorf("section's context ended with cause %v, want the caller's %v", cause, bye)
		}
		return nil
	})
	if err != nil {
		t.Errorf("DoKey: %v, want nil: the section returned nil before the lease ended", err)
	}
}
