// Package backend defines the storage-only lease interface that every baton
// store implements, the errors it returns, and helpers shared by adapters.
//
// A Store grants a key to one owner for a TTL measured on the store's own
// clock, renews and releases it only for that owner, and tells waiters when
// a key was released. Policy — when to renew, how long to wait, when to step
// down — lives above it in the role, synclock and schedlock packages and is
// written once for every store. The adapters are membackend (in-process, for
// tests and examples), redisbackend (redis.UniversalClient: standalone,
// Sentinel, Cluster), springredis (Redis keys shared with the Spring
// framework's Java instances) and consulbackend (Consul KV and sessions).
// The conformance suite in backendtest runs against every adapter on real
// servers.
//
// # Tiers
//
// Store (Acquire, Renew, Release, Get, Watch) is all a store must have.
// Every other capability is an interface of its own, which the packages
// above find with a type assertion and do without when it is missing (a
// type that embeds a built-in store, such as config.RedisStore, passes
// them on; one that embeds the Store interface hides them):
//
//	interface      adds                                    its users, and what they do without it  mem  redis  spring  consul
//	Store          Acquire Renew Release Get Watch         everyone (required)                     yes  yes    yes     yes
//	Queue          AcquireQueued Dequeue: waiting line     synclock: waiters race for a release    yes  yes    -       yes
//	Handover       AwaitHandover: key to the first waiter  synclock: waits for EventReleased       yes  yes*   -       yes
//	Rejoin         ReleaseAndJoin: a release that puts     synclock: the process's next waiting    yes  yes*   -       -
//	               another waiter of the process in line   goroutine asks (AcquireQueued)
//	Registry       Heartbeat Members Leave: members        role: Members is ErrNoRegistry, no      yes  yes    yes     yes
//	                                                       duplicate-ID check by entries;
//	                                                       batonctl status: an error
//	MemberLister   MembersUpTo: a bounded part             statuspage: reads role's Members        yes  yes    -       yes
//	MemberLocator  MemberEntry: where an entry is          role: duplicate-ID log without it       -    yes    yes     yes
//	Inspector      Leases LeasesUpTo: listing              statuspage: LocksError;                 yes  yes    -       yes
//	                                                       batonctl locks: an error
//	Breaker        Break: forced release                   batonctl release --force: an error      yes  yes    yes     yes
//	Namer          StoreName: the kind, for logs           StoreName: the package's name           yes  yes    yes     yes
//	Unannounced    ReleasesUnannounced                     role: trusts its Watch                  -    -      yes     -
//
// (*) A Redis store made WithReplicaAck, and a membackend store made
// WithoutHandover, answer AwaitHandover with errors.ErrUnsupported, and
// synclock then waits as with a plain Queue; their ReleaseAndJoin hands
// nothing over and so puts nobody in line. The restart guard is no
// interface: it is part of Acquire's contract (a HeldError with
// Recovering set), which every built-in store keeps (consulbackend and
// membackend can be told to wait longer, WithRestartGuard); a store that
// cannot tell that it lost its data never refuses so, and the packages
// above treat such a refusal as any other, with a wait.
//
// The fencing rule (NextToken, CheckFence) and the counter's life
// (CounterLife) are written once here for the Go stores; the Redis
// stores run the same rule in their Lua scripts.
//
// # What is promised
//
//   - At most one owner holds a key at any instant of the store's clock.
//   - Every grant of a key carries a fencing token strictly greater than
//     the token of every earlier grant of that key in the same store, also
//     across expiry and release, and across a store that lost its data or
//     the key's counter, for callers that never saw a token as well: a
//     token is at least the store's clock in microseconds. When the caller
//     passes the highest token it has seen as the floor of Acquire, also
//     across a store whose clock went back (by less than MaxTokenLead).
//   - No token more than MaxTokenLead ahead of the store's clock is ever
//     handed to a caller: a forged one in the store is ErrCorrupt naming
//     the key, and a floor that far ahead is refused (ErrFloorAhead), so
//     forged data never becomes a caller's floor, and deleting it is all
//     the repair there is.
//   - After a store restarted without its data, it grants a key to nobody
//     until every lease on it granted before the restart has ended (the
//     restart guard: at least the requested ttl); until then Acquire
//     returns a HeldError with Recovering set, saying how long to wait.
//   - Renew and Release change nothing unless the caller is the current
//     owner: a stale owner can never extend, shorten or delete a newer
//     holder's lease.
//
// # What is not promised
//
// A lease is not mutual exclusion between processes: a holder that pauses
// (GC, SIGSTOP, a slow network) past its TTL may still believe it holds the
// key while a newer owner does. Code that changes a shared resource under a
// lease should pass the fencing token to that resource and let it reject
// writes carrying a token older than one it has seen. Release notifications
// are hints: a waiter must still Acquire, and must re-check at the holder's
// remaining TTL because stores need not signal expiry.
//
// # Breaking a lease
//
// Stores that implement Breaker can end a lease whoever holds it, for an
// operator freeing a lock whose holder is stuck (batonctl release
// --force). Break names the grant to end (owner and token, as Get showed
// it) and ends nothing if another grant is on the key by then
// (ErrLeaseChanged). The broken holder is not told and may still be running; the
// next grant's fencing token is above the broken one, so a resource that
// checks tokens turns the old holder away.
//
// # Keys
//
// Keys are opaque strings. A key may carry one Redis-style hash tag such as
// "{acme:billing}:role"; stores that shard keep every key with the same tag
// together. AppKey builds the keys baton uses.
//
// # Limits
//
// The limits of what a store accepts are written once, here, and the
// packages above check them when they are configured rather than on every
// call: ValidateLease bounds a configured lease to MinTTL..MaxTTL (1 ms to
// 365 days) for role.NewElector, synclock.NewLocker, schedlock's job locks
// and config.Load alike, and ValidateKeyPrefix restricts a store's key
// prefix to letters, digits and - _ . : / for redisbackend, consulbackend
// and config. A store that refuses the client's credentials returns an
// error wrapping ErrAuth.
package backend
