// Package synclock serialises a critical section across every instance of
// a service: only one goroutine of one instance runs it at a time. A lock
// is a key in the store whose value names the holding instance.
//
// One way per task:
//
//	lk, err := synclock.NewLocker(store, id, cfg.SyncLock)
//	synclock.SetDefault(lk)                          // once, at start-up
//	err = synclock.Do(ctx, svc.CloseInvoices)         // a section named after the code it runs
//	err = lk.DoKey(ctx, "invoice:"+id, func(ctx context.Context) error { ... }) // a constant or per-entity key
//	m := lk.Mutex("nightly-export")                   // code that cannot be a closure
//	if err := m.TryLock(ctx); err == nil {            // skip a held lock (Lock waits for it)
//		defer m.Unlock(ctx)
//	}
//	token, ok := synclock.Token(ctx)                  // in a section (or Token(m.Context())): the fencing token
//
// A section's context (or a Mutex's Context) is cancelled with cause
// ErrLeaseExpired when the lease is lost or about to end; WithObserver
// reports every step (acquired, refused, extended, lost, released) for
// metrics.
//
// # Naming locks
//
// A lock's key is a contract between every instance that runs at once —
// during a rolling deploy, between two versions of the service. Name it
// with a constant (or a constant plus an entity's ID) and DoKey or
// Mutex, so that it changes only when you change it.
//
// Do, the seed's rule, keys the lock by a function's fully qualified
// name (see Do): fn's own when fn is a named function or a method value,
// else the nearest named function around the call, so Do never fails for
// want of a key and the closures of one function share its lock (the
// compiler's numbered names, ".func1", change when a closure is added
// above, and are never used). Every instantiation of a generic function
// shares one lock ("[...]"), and so does every implementation behind a
// method value taken from an interface.
//
// In a rolling deploy the old and the new version hold one lock only
// while the name is the same in both. Renaming the function, moving it to
// another package or type, changing a method's receiver between pointer
// and value, or moving a Do into another function (or handing Do a method
// value where it was given a literal) gives the section a new key: for
// the length of the deploy, an old and a new instance can run it at
// once. Name the lock with DoKey and a constant before such a change, or
// deploy it when the section may run twice.
//
// # What is promised
//
// Acquiring is set-if-absent on {tenant:app}:lock:<key>. A waiter wakes
// when the release is published, and tries again at least every
// RetryInterval, until it gets the lock, MaxRetries runs out (ErrLocked)
// or its context ends. A holding lasts at most HoldDuration (AutoRenew
// renews it up to a ceiling), so a crashed or stuck holder blocks the
// others only until its lease ends. With Disabled every call fails with
// ErrDisabled: a section never runs unlocked.
//
//   - Goroutines of one process that want one key queue locally in arrival
//     order; only the one at the head talks to the store. When a holder's
//     lease ends the turn passes on, and its late Unlock reports
//     ErrLeaseExpired.
//   - Across instances, waiters are served in arrival order where the
//     store keeps a waiting line (backend.Queue), and a release hands the
//     lock to the first of them (backend.Handover).
//   - A grant first lasts ClaimWindow; a section that runs a third of it
//     extends the lease to HoldDuration.
//   - Release is owner-checked, and the fencing token (Token) grows with
//     every holding. One deadline decides each holding (internal/lease):
//     the context ends a margin before the lease can expire, and a reply
//     after it is void.
//   - A nested DoKey on a key its call chain holds runs directly; one that
//     would wait for it through another Locker or a Mutex fails at once
//     with ErrReentrant. A panic in the section releases the lock.
//   - A store that restarted without its data refuses every key for a time
//     it names: a waiter sleeps through it without spending MaxRetries, and
//     TryLock fails with a *LockedError whose Recovering is set.
//
// Every rule in full, with its defaults and timings: docs/locks.md.
//
// # What is not promised
//
// A lock is a lease: a holder paused past its hold (GC, SIGSTOP, a slow
// network) may still run while the next holder runs. Its context is
// cancelled by a timer, so a process that wakes from a pause may see it
// live for a moment after the deadline; code that ignores the context
// keeps going. A resource that must never see two holders should check
// the fencing token of every write, rejecting tokens older than one it
// has seen.
package synclock
