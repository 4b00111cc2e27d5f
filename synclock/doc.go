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
// # The rules
//
// Every key is stored as {tenant:app}:lock:<key>. Acquiring is
// set-if-absent; a waiter tries again every RetryInterval (default 1 s)
// until it succeeds, MaxRetries runs out (ErrLocked) or its context ends;
// the section runs; the key is deleted. A holder keeps the lock at most
// HoldDuration (default 45 s; Config.AutoRenew renews it up to a hard
// ceiling), so a crashed holder cannot dead-lock the others — nor a stuck
// one the other goroutines of its own process: they wait behind it only
// until its lease ends (except those that share its Mutex value, which
// stays locked until its Unlock, as a sync.Mutex does), and with
// MaxRetries at most MaxRetries x RetryInterval. With Disabled every call
// fails with ErrDisabled: a section never runs unlocked.
//
// # Beyond the rules
//
//   - Waiters wake on release: the release is published and the waiter
//     claims at once. Every wait ends by a timer after at most
//     RetryInterval (sooner when the holder's remaining TTL is shorter).
//   - Goroutines of one process that want one key queue locally in arrival
//     order; only the one at the head talks to the store. When a holder's
//     lease ends the next one goes to the store, while the late holder's
//     Unlock still reports ErrLeaseExpired.
//   - Across instances, waiters are served in arrival order too when the
//     store keeps waiting lines (backend.Queue; membackend and redisbackend
//     do). A waiter loses its place 3 x RetryInterval after its last try
//     (so a crashed waiter delays the lock at most that long); one that
//     gives up leaves the line at once.
//   - On a store that hands over (backend.Handover; both do, except a Redis
//     store made WithReplicaAck) the release grants the lock to the waiter
//     first in line, who learns of it from the store's notification, never
//     blocking a connection of the client's pool: one trip to the store per
//     handover, no other waiter woken (on other stores the release names
//     the first waiter, and only that one claims). The new holder counts
//     its hold from when it last asked, so it may give the lock up early,
//     never late.
//   - A grant first lasts ClaimWindow (default 10 s, at most HoldDuration);
//     a section that runs a third of that extends the lease to HoldDuration
//     with one more store call, so an instance that dies just after it got
//     the lock blocks the others for ClaimWindow, not HoldDuration. A
//     failed extension is tried again until the lease runs out.
//   - The holder is the instance ID plus a nonce per acquisition, and
//     release is owner-checked: a late release never deletes the next
//     holder's key.
//   - The fencing token (Token) grows with every holding. The section's
//     context is cancelled a margin (internal/lease's rule: a tenth of
//     ClaimWindow, at most 1 s) before the lease can expire, after
//     EventLost; DoKey then reports ErrLeaseExpired and Token false.
//   - One deadline decides each holding: an extension is not sent after
//     it, is bounded by it, and a reply that lands after it is void.
//   - DoKey's section ends with the caller's context; a Mutex's holding
//     lasts until Unlock or the end of its lease, whatever becomes of the
//     context passed to Lock (Mutex.Context is the one to watch).
//   - A store that restarted without its data (or lost it, or is new to
//     baton) refuses every key for a time it names. A waiter sleeps that
//     long, bounded by its context, logs once why, and the refusal does not
//     count against MaxRetries; TryLock fails at once with a *LockedError
//     whose Recovering is set, saying how to declare a new store whole.
//   - A panic in the section releases the lock and goes on. A nested DoKey
//     on a key that its call chain holds runs directly; one that would wait
//     for it through another Locker on the same store (or a Mutex locked
//     inside the section) fails at once with ErrReentrant. The call chain
//     is known by its context; two clients of one server are two stores.
//   - A call whose context has already ended asks the store nothing and
//     fails at once with the context's error and its cause.
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
