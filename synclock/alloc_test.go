package synclock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/synclock"
)

// grantingStore grants every request at once and allocates nothing, so
// that counting allocations counts synclock's own. It is safe for
// concurrent use.
type grantingStore struct{ token atomic.Uint64 }

func (s *grantingStore) Acquire(_ context.Context, key, owner string, ttl time.Duration, _ uint64) (backend.Lease, error) {
	return backend.Lease{Key: key, Owner: owner, Token: s.token.Add(1), TTL: ttl}, nil
}

func (s *grantingStore) Renew(_ context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	return backend.Lease{Key: key, Owner: owner, Token: s.token.Load(), TTL: ttl}, nil
}

func (s *grantingStore) Release(context.Context, string, string, time.Duration) error { return nil }

func (s *grantingStore) Get(context.Context, string) (backend.Lease, error) {
	return backend.Lease{}, nil
}

func (s *grantingStore) Watch(context.Context, string) (backend.Watch, error) {
	return nil, backend.ErrClosed
}

// An uncontended section costs synclock a bounded number of allocations
// besides the store's: it sits on every lock cycle, and on a real store
// every allocation makes the system calls around it slower too.
func TestSectionAllocations(t *testing.T) {
	lk := lockerOn(t, 1, &grantingStore{}, synclock.Config{})
	ctx := context.Background()
	m := lk.Mutex("allocs")
	mutex := testing.AllocsPerRun(200, func() {
		if err := m.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
	section := func(context.Context) error { return nil }
	do := testing.AllocsPerRun(200, func() {
		if err := lk.DoKey(ctx, "allocs", section); err != nil {
			t.Fatal(err)
		}
	})
	// The grant (which is its context's parent, with the section's
	// value), its context (cancel), the owner, the local queue and the
	// release's timeout context; DoKey works out the store key only when
	// its key is not the last one's.
	const maxMutex, maxDoKey = 9, 9
	if mutex > maxMutex || do > maxDoKey {
		t.Errorf("allocations per uncontended cycle: Mutex %v (at most %d), DoKey %v (at most %d)", mutex, maxMutex, do, maxDoKey)
	}
}
