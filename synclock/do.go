package synclock

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"

	"github.com/baton-go/baton/backend"
)

// sectionKey carries a section's grant in its context; being zero-size,
// it costs no allocation.
type sectionKey struct{}

// sectionOf returns the innermost grant whose section ctx is in, or nil.
func sectionOf(ctx context.Context) *grant {
	g, _ := ctx.Value(sectionKey{}).(*grant)
	return g
}

// heldBy returns the live holding of store key sk that the call chain of
// ctx has through lk or another Locker on lk's store, or nil. A holding
// that is over holds nothing: the lock may be another goroutine's by then.
func heldBy(ctx context.Context, lk *Locker, sk string) *grant {
	for g := sectionOf(ctx); g != nil; g = g.outer {
		if g.Key() == sk && !g.Over() && (g.lk == lk || sameStore(g.lk.store, lk.store)) {
			return g
		}
	}
	return nil
}

// sameStore reports whether a and b are one store value; a store whose
// type is not comparable is never the same as another.
func sameStore(a, b backend.Store) bool {
	t := reflect.TypeOf(a)
	return t == reflect.TypeOf(b) && t.Comparable() && a == b
}

// Token returns the fencing token of the innermost lock held by the
// section whose context is ctx: strictly larger than the token of every
// earlier holding of the same lock. Pass it to the resource the section
// changes so that it can reject a holder whose lease ran out. It reports
// false when ctx is from no section or that holding is over (lease given
// up, or lock released).
func Token(ctx context.Context) (uint64, bool) {
	g := sectionOf(ctx)
	if g == nil || g.Over() {
		return 0, false
	}
	return g.Token(), true
}

// DoKey runs fn while holding the lock key: across every instance of the
// service, only one goroutine of one instance runs a section of key at a
// time. It waits for the lock as the package doc says, or until ctx ends
// (ErrLocked joined with ctx's error). fn's context carries the fencing
// token (Token), ends with ctx, and is cancelled with cause
// ErrLeaseExpired shortly before the lease can expire; DoKey then returns
// ErrLeaseExpired joined with fn's error. To skip a held lock rather than
// wait, use Mutex(key).TryLock.
func (lk *Locker) DoKey(ctx context.Context, key string, fn func(ctx context.Context) error) (err error) {
	if fn == nil {
		return errors.New("synclock: nil function")
	}
	k := lk.lastLockKey(key)
	if g := heldBy(ctx, lk, k.sk); g != nil && g.lk == lk {
		return fn(ctx) // reentrant: this call chain holds the lock
	}
	g, err := lk.acquire(ctx, k, true, nil)
	if err != nil {
		return err
	}
	defer func() {
		rerr := g.release(ctx)
		if rerr != nil {
			err = errors.Join(err, rerr)
		}
	}()
	return fn(g.Context())
}

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
