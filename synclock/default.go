package synclock

import (
	"context"
	"sync/atomic"
)

var defaultLocker atomic.Pointer[Locker]

// SetDefault makes lk the locker that the package-level Do uses. Pass nil
// to clear it.
func SetDefault(lk *Locker) { defaultLocker.Store(lk) }

// Do runs fn while holding, on the locker set by SetDefault, the lock
// named after the code it runs, as an annotation on a method names it:
// fn's own fully qualified name when fn is a named function or a method
// value (Do(ctx, svc.Close) holds
// "github.com/acme/billing/invoice.(*Service).Close"), else the nearest
// named function around the call, shared by all its closures. Do never
// fails for want of a key; it returns ErrNoDefault when no locker is set.
// See "Naming locks" in the package doc for what a rename does in a
// rolling deploy, and Locker.DoKey for the rules of the lock.
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
