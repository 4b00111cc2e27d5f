// Package consulbackend is the Consul lease store of baton: backend.Store
// on Consul's KV store, sessions and blocking queries, through
// github.com/hashicorp/consul/api.
//
// # Layout
//
// Under a prefix (default "baton"), a lease on key K is the KV entry
// "<prefix>/lease/K", locked by a session of its own and holding the JSON
// record {"owner", "token", "ttl_ms", "kept"}. Its fencing counter is
// "<prefix>/fence/K": the last token granted, as a decimal string, with
// the token of the last release in the entry's flags.
//
// # How a lease lives
//
// Acquire reads the key and its counter, creates a session (TTL = the
// lease's ttl, behavior delete, the store's lock-delay, no health checks)
// and, in one transaction, moves the counter to the new token if nobody
// changed it since the read and locks the key with the session. Renew
// renews the session and rewrites the key as it is, so that watchers see
// the renewal (EventRenewed) and a waiter counts its wait from it; Release
// deletes the key (owner-checked, in one
// transaction with the counter's release mark) and destroys the session;
// Release with a keep time moves the lease to a new session whose TTL is
// the keep time, marked kept so that it can no longer be renewed, and the
// releasing store deletes it when the keep time is over (a timer of the
// store; if the process ends first, the session's TTL ends it, up to
// twice the keep time later). A job lock's lockAtLeastFor thus does not
// skip the next run.
//
// # What differs from Redis
//
//   - Consul keeps a session for at least its TTL and up to twice that
//     (it doubles the TTL it waits for, to allow for clock drift between
//     its servers). A lease that is neither renewed nor released thus ends
//     between ttl and 2 x ttl after its last renewal, plus the lock-delay
//     (WithLockDelay) when the session ran out while holding the key. Its
//     holder, which counts ttl from before its request, has stepped down
//     long before.
//
//   - Consul refuses session TTLs below the servers' session_ttl_min (10 s
//     unless configured otherwise) and above 24 h. The store refuses such
//     ttl and keep times with ErrInvalidArgument before sending anything;
//     tell it the servers' minimum with WithSessionTTLMin.
//
//   - A session's remaining time cannot be read: Get and HeldError report
//     the TTL the lease was given, not what is left of it. Waiters are
//     woken by blocking queries when the key is deleted, so they do not
//     depend on it.
//
//   - Sessions carry no health checks: only their TTL or a release ends
//     them, never the failure detector of the holder's agent, which could
//     end a lease before its TTL while its holder still believes in it.
//
//   - A grant's token is max(counter, floor, the granting client's clock
//     in µs) + 1. Consul has no server clock a client can read, so after
//     the KV store lost a counter, tokens keep increasing if the clocks of
//     the granting clients are not behind the ones before them (NTP keeps
//     them within milliseconds) or the floor, the highest token the caller
//     has seen, is above them.
//
//   - An operator who destroys a lease's session (consul session destroy)
//     frees the key at once. Waiters that watched the key wait from the
//     holder's last renewal, which they saw; a process that never saw the
//     lease could claim the key while its holder still believes in it,
//     unless the lock-delay (WithLockDelay) covers the longest TTL.
//
//   - The store keeps no waiting lines (backend.Queue): waiters are woken
//     by the release and race for the key.
//
// # Restart guard, members, the catalog
//
// A Consul that lost its KV store is told by a missing marker (see
// WithRestartGuard); keys without a counter are then refused, Recovering,
// for the guard. The member Registry keeps an entry per member, locked by
// a session with the heartbeat's TTL; Members reports that TTL and an Age
// of 0 (unknown). Service registers an instance in the catalog, tagged
// master or slave, for role.WithAnnouncer, whatever the lease store.
//
// Watches are blocking queries on the lease key, one goroutine and one
// HTTP connection each, ended by Close (of the watch or of the store).
// Consul allows 200 connections per client IP by default
// (limits.http_max_conns_per_client); a process that waits on many locks
// at once, or many processes behind one address, may need more.
package consulbackend
