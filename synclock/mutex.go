package synclock

import (
	"context"
	"fmt"
	"sync"
)

// Mutex is a cross-instance lock on one key for code that cannot put its
// section in a closure. Lock it, do the work, Unlock it — with the same
// guarantees as DoKey. A Mutex is held by at most one goroutine at a time;
// get it from Locker.Mutex.
type Mutex struct {
	lk  *Locker
	key lockKey

	mu   sync.Mutex
	held *grant
}

// Mutex returns a mutex on key. The key is checked once, here; Lock and
// TryLock report a bad one (backend.ErrInvalidArgument) on every call.
func (lk *Locker) Mutex(key string) *Mutex { return &Mutex{lk: lk, key: lk.lockKey(key)} }

// Lock waits for the lock as DoKey does; ctx bounds only the wait. The
// holding then lasts until Unlock or until its lease ends (HoldDuration,
// or the WithAutoRenew ceiling), whatever happens to ctx afterwards:
// Context, not ctx, says when it is over. Context keeps ctx's values.
func (m *Mutex) Lock(ctx context.Context) error { return m.lock(ctx, true) }

// TryLock takes the lock if it is free and fails with ErrLocked otherwise.
// A holding it takes lasts as Lock's does.
func (m *Mutex) TryLock(ctx context.Context) error { return m.lock(ctx, false) }

func (m *Mutex) lock(ctx context.Context, wait bool) error {
	g, err := m.lk.acquire(ctx, m.key, wait, true)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.held = g
	m.mu.Unlock()
	return nil
}

// Unlock releases the lock, even when ctx has ended. It returns
// ErrLeaseExpired if the lease ran out while the lock was held, and
// ErrNotLocked if the mutex is not locked.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	g := m.held
	m.held = nil
	m.mu.Unlock()
	if g == nil {
		return fmt.Errorf("synclock: mutex %q: %w", m.key.key, ErrNotLocked)
	}
	return g.release(ctx)
}

// Token returns the fencing token of the current holding. It reports
// false when the mutex is not locked, and once the holding's lease was
// given up (Context is then cancelled with ErrLeaseExpired), even before
// Unlock.
func (m *Mutex) Token() (uint64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil || m.held.over.Load() {
		return 0, false
	}
	return m.held.lease.Token, true
}

// Context returns a context that is cancelled when the current holding's
// lease ends or is about to (cause ErrLeaseExpired) or the mutex is
// unlocked — not when the context passed to Lock ends; it carries the
// fencing token (Token) and the values of Lock's context. Without a
// holding it returns an already-cancelled context.
func (m *Mutex) Context() context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrNotLocked)
		return ctx
	}
	return m.held.ctx
}
