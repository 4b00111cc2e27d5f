package synclock

import (
	"context"
	"fmt"
	"sync"
)

// Mutex is a cross-instance lock on one key, with DoKey's guarantees, for
// code that cannot put its section in a closure. Get it from
// Locker.Mutex.
//
// Like a sync.Mutex, one Mutex may be shared by goroutines and is locked
// from Lock until Unlock, also after its holding's lease lapsed, so that
// the late Unlock never ends a later holding; a lapsed holding frees the
// key at once for DoKey and for other Mutex values.
type Mutex struct {
	lk   *Locker
	key  lockKey
	gate chan struct{} // holds a token while the Mutex is unlocked

	mu   sync.Mutex
	held *grant
}

// Mutex returns a mutex on key. The key is checked once, here; Lock and
// TryLock report a bad one (backend.ErrInvalidArgument) on every call.
func (lk *Locker) Mutex(key string) *Mutex {
	m := &Mutex{lk: lk, key: lk.lockKey(key), gate: make(chan struct{}, 1)}
	m.gate <- struct{}{}
	return m
}

// Lock waits for the lock as DoKey does; ctx bounds only the wait. The
// holding lasts until Unlock or its lease's end, whatever happens to ctx:
// Context, which keeps ctx's values, says when it is over. A ctx from a
// live section holding the key fails with ErrReentrant.
func (m *Mutex) Lock(ctx context.Context) error { return m.lock(ctx, true) }

// TryLock takes the lock as Lock does if it is free and fails with
// ErrLocked otherwise (also when this Mutex is locked).
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

// Unlock releases the lock, even when ctx has ended, and unlocks the
// Mutex; it returns ErrLeaseExpired if the lease ran out first, and
// ErrNotLocked if the Mutex is not locked.
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

// Context returns the current holding's context: cancelled when its
// lease ends or is about to (cause ErrLeaseExpired) or at Unlock, not
// with Lock's context; Token(m.Context()) is its fencing token. Without a
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
