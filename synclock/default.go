package synclock

import (
	"context"
	"sync/atomic"
)

var defaultLocker atomic.Pointer[Locker]

// SetDefault makes lk the locker that the package-level Do and DoKey use.
// Pass nil to clear it.
func SetDefault(lk *Locker) { defaultLocker.Store(lk) }

// Default returns the locker set by SetDefault, or nil.
func Default() *Locker { return defaultLocker.Load() }

// Do is Locker.Do on the locker set by SetDefault: the lock is named
// after fn when fn is a named function or method value, else after the
// named function Do is called in (see Locker.Do). It returns ErrNoDefault
// when no locker is set.
func Do(ctx context.Context, fn func(ctx context.Context) error) error {
	lk := defaultLocker.Load()
	if lk == nil {
		return ErrNoDefault
	}
	key, err := doKey(fn, 1)
	if err != nil {
		return err
	}
	return lk.DoKey(ctx, key, fn)
}

// DoKey is Locker.DoKey on the locker set by SetDefault. It returns
// ErrNoDefault when none is set.
func DoKey(ctx context.Context, key string, fn func(ctx context.Context) error) error {
	lk := defaultLocker.Load()
	if lk == nil {
		return ErrNoDefault
	}
	return lk.DoKey(ctx, key, fn)
}
