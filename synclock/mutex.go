package synclock

import (
	"context"
	"fmt"
	"sync"
)

// Mutex is a cross-instance lock on one key for code that cannot put its
// section in a closure. Lock it, do the work, Unlock it — with the same
// guarantees as DoKey. Get it from Locker.Mutex.
//
// Like a sync.Mutex, one Mutex may be shared by goroutines, and it is
// locked from Lock until Unlock: also after its holding's lease lapsed
// (Context is then cancelled and Token reports false for it), so that the late
// Unlock is paired with that holding and never ends a later one. A Lock
// on a locked Mutex waits for its Unlock, within the limits of any wait
// behind this process's goroutines (ctx, MaxRetries). A lapsed holding
// does free the key at once for DoKey and for other Mutex values.
type Mutex struct {
	lk  *Locker
	key lockKey
	// gate is full while the Mutex is locked, from Lock until Unlock.
	gate chan struct{}

	mu   sync.Mutex
	held *grant
}

// Mutex returns a mutex on key. The key is checked once, here; Lock and
// TryLock report a bad one (backend.ErrInvalidArgument) on every call.
func (lk *Locker) Mutex(key string) *Mutex {
	return &Mutex{lk: lk, key: lk.lockKey(key), gate: make(chan struct{}, 1)}
}

// Lock waits for the lock as DoKey does; ctx bounds only the wait. The
// holding then lasts until Unlock or until its lease ends (HoldDuration,
// or Config.AutoRenew), whatever happens to ctx afterwards:
// Context, not ctx, says when it is over. Context keeps ctx's values.
// Lock with a ctx that comes from a live holding's section of the same
// key on the same store (the call chain holds the key) fails at once with
// ErrReentrant; with a ctx that has already ended it asks the store
// nothing and returns ctx's error.
func (m *Mutex) Lock(ctx context.Context) error { return m.lock(ctx, true) }

// TryLock takes the lock if it is free and fails with ErrLocked otherwise
// (also when this Mutex is locked). A holding it takes lasts as Lock's
// does.
func (m *Mutex) TryLock(ctx context.Context) error { return m.lock(ctx, false) }

func (m *Mutex) lock(ctx context.Context, wait bool) error {
	g, err := m.lk.acquire(ctx, m.key, wait, m.gate)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.held = g
	m.mu.Unlock()
	return nil
}

// Unlock releases the lock, even when ctx has ended, and then unlocks
// the Mutex. It returns ErrLeaseExpired if the lease ran out while the
// lock was held, and ErrNotLocked if the mutex is not locked.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.mu.Lock()
	g := m.held
	m.held = nil
	m.mu.Unlock()
	if g == nil {
		return fmt.Errorf("synclock: mutex %q: %w", m.key.key, ErrNotLocked)
	}
	err := g.release(ctx)
	unlockGate(m.gate)
	return err
}

// Context returns a context that is cancelled when the current holding's
// lease ends or is about to (cause ErrLeaseExpired) or the mutex is
// unlocked — not when the context passed to Lock ends; it carries the
// values of Lock's context and the holding's fencing token:
// Token(m.Context()). Without a
// holding it returns an already-cancelled context.
func (m *Mutex) Context() context.Context {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrNotLocked)
		return ctx
	}
	return m.held.Context()
}
