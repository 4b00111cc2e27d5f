// Package consulbackend is the Consul lease store of baton: backend.Store
// on Consul's KV store, sessions and blocking queries, through
// github.com/hashicorp/consul/api. It is a module of its own (go get
// github.com/baton-go/baton/backend/consulbackend), as go-redis keeps its
// extra/ integrations, so that a service that uses Redis only does not
// pull the Consul client; github.com/baton-go/baton/config/consulconfig
// makes a store from baton's configuration (consul.* keys).
//
// # Layout
//
// Under a prefix (default "baton"), a lease on key K is the KV entry
// "<prefix>/lease/K", locked by a session of its own and holding the JSON
// record {"owner", "token", "ttl_ms", "kept", "mark", "next", "released"}
// (see record). Its fencing counter is
// "<prefix>/fence/K": the last token granted, as a decimal string, with
// the token of the last release in the entry's flags, locked by a keeper
// session of the store that last granted K, so that it ends an hour or
// more after K's last grant (WithCounterKeep) instead of staying for
// ever, unless a floor put it further ahead of the clock than that
// (backend.CounterLife): then it is kept with no session. The waiters of K
// hold their places under "<prefix>/line/K/", one entry per waiter,
// locked by the waiter's session and ordered by when they joined (see
// AcquireQueued).
//
// # How a lease lives
//
// Acquire reads the key and its counter, takes a session (TTL = the
// lease's ttl, behavior delete, the store's lock-delay, no health checks)
// and, in one transaction, moves the counter to the new token if nobody
// changed it since the read and locks the key with the session. Renew
// renews the session and rewrites the key with its next mark, so that
// watchers see the renewal (EventRenewed) and a waiter counts its wait
// from it; Release deletes the key (owner-checked, in one transaction with
// the counter's release mark) and keeps the session idle. A session that
// holds nothing any more is not destroyed but kept for the store's next
// lease or place in line of the same TTL, and renewed when it is taken
// (creating and destroying a session are Raft writes, a renewal is not).
// AcquireQueued renews that session while it reads the key, and a release
// of a lease granted with nobody in line needs no read while nothing
// changed since the grant (see known.go); the store's next AcquireQueued
// of a key it freed so needs none either while the counter is as that
// release wrote it, so that an uncontended lock cycle is a renewal, then
// two Raft writes.
// Release with a keep time moves the lease to a new session whose TTL is
// the keep time, marked kept so that it can no longer be renewed, and the
// releasing store deletes it when the keep time is over (a timer of the
// store; if the process ends first, the session's TTL ends it, up to
// twice the keep time later). A job lock's lockAtLeastFor thus does not
// skip the next run.
//
// # Waiting line and handover
//
// The store implements backend.Queue and backend.Handover. A refused
// AcquireQueued joins the key's line: an entry locked by a session whose
// TTL is half the waiter's patience (Consul keeps a session for twice its
// TTL) or the servers' minimum, written in a transaction that holds only
// if the waiter last in line is still there as the refusal read it (it
// was in line all along, so no release in between could free the key
// without seeing a waiter), or, with nobody else in line, if the key is
// as the refusal read it, so that a release cannot slip between the
// refusal and the join; such a join also writes the key's counter again
// as it is, so that a release that read the line before it reads again
// (the counter, not the lease, so that no watcher wakes for a join).
// Joins behind others thus neither race each other nor the handovers
// ahead of them. The place carries a second
// session, of the ttl the waiter asks for, made for its lease. A call with
// the same patience renews both sessions. Release with a live waiter
// in line does not free the key: in one transaction it deletes the lease,
// moves the counter to the waiter's token, marks the waiter's place
// handed, with the lease in it (the place is out of the line from then on,
// and its holder's release deletes it), and locks the key with the
// waiter's lease session, so that no session is created between one
// holder and the next. Watchers see the key held (EventRenewed); the
// waiter's AwaitHandover, a blocking query on the waiter's own place (or,
// for the waiter first in line, on the lease key), returns the lease the
// place now holds, without another read; the waiter
// first in line also returns at once, ok false, when the key falls free
// without being handed to it (an expiry, a release that found it not yet
// in line), so that it asks again. A contended key thus passes from holder
// to holder without the waiters racing for it, each race costing Raft
// writes, and a handover wakes only the waiter it is for. The handover
// also names in the handed place the next few waiters, so that the
// holder's release can hand the key on to the next of them without
// reading the line first; a holder named fewer than two reads the line
// while it holds the key, not when it releases it (see known.go); and the
// releasing store's next AcquireQueued of the key joins behind the
// waiters it knows of without reading: in the steady state of a contended
// key, a lock costs two Raft writes (the handover and the holder's join,
// once it asks again), no session create or destroy, and on the way from
// one holder to the next one transaction and one blocking query's answer,
// never a read.
//
// Every place (and every waiter a lease or a handed place names as next)
// is checked when it is read, before anything is written: a lease ttl the
// store's sessions cannot hold, a place TTL beyond 24 h, a floor at the
// largest token, a handed lease without a token, or a waiter named with a
// space or control character is backend.ErrCorrupt naming the entry, and
// the release (or join, or dequeue) changes nothing. A line is read
// whole, with its entries that have no session (which the store skips).
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
//     has seen, is above them. The reading client's clock also bounds the
//     tokens it accepts: a floor at or beyond that clock plus
//     backend.MaxTokenLead is refused (backend.ErrFloorAhead), and a lease
//     or counter holding a token beyond it is backend.ErrCorrupt naming
//     the KV key, so a client whose clock is more than a year off sees
//     the fleet's tokens as corrupt.
//
//   - An operator who destroys a lease's session (consul session destroy)
//     frees the key at once. Waiters that watched the key wait from the
//     holder's last renewal, which they saw; a process that never saw the
//     lease could claim the key while its holder still believes in it,
//     unless the lock-delay (WithLockDelay) covers the longest TTL.
//
//   - A waiter's place in a key's line (backend.Queue) is kept by a
//     session too, so it lapses between the waiter's patience and twice
//     the servers' session minimum after its last call, whichever is
//     longer: with Consul's default minimum of 10 s, a waiter that
//     crashed is first in line for up to 20 s, and a key released
//     meanwhile is handed to it, on the session the waiter made for its
//     lease when it joined: the key stays held until that session ends,
//     between the waiter's ttl and twice that after its last call.
//
//   - A waiter behind another in line waits on its own place, not on the
//     lease key, so it does not see the key fall free by an expiry: it
//     asks again when its wait (synclock's retry interval) is over.
//
// # Restart guard, members, the catalog
//
// A Consul that lost its KV store is told, service by service, by a
// missing marker "<prefix>/booted/{tenant:app}" (see WithRestartGuard);
// the service's keys without a counter are then refused, Recovering, for
// the guard, and no other service's. A service whose marker is missing
// while its tenant's ("<prefix>/booted/{tenant:}") is there is new, not
// lost, and is granted at once; a Consul new to the tenant waits once,
// unless an operator declared it whole (DeclareIntact, batonctl init).
// The refusal's message names batonctl init and WithoutRestartGuard. The markers hold no time, so no
// clock, stepped back or forged, can stretch the refusal: it lasts as
// long as the session that locks the recovering entry, which Consul's
// servers end by its TTL (at most MaxSessionTTL, twice that in the worst
// case). ACLPolicy gives the rules of a service's ACL token: its own keys
// and markers, and sessions. The member Registry keeps an entry per member, locked by
// a session with the heartbeat's TTL; Members reports that TTL and an Age
// of 0 (unknown). Service registers an instance in the catalog, tagged
// master or slave, for role.WithAnnouncer, whatever the lease store.
//
// Watches are blocking queries on the lease key, one goroutine and one
// HTTP connection each, ended by Close (of the watch or of the store).
// Consul allows 200 connections per client IP by default
// (limits.http_max_conns_per_client); a process that waits on many locks
// at once, or many processes behind one address, may need more.
//
// # Files
//
// One concept each: consulbackend.go the store and its options,
// acquire.go the grant (Acquire, and take, the transaction every grant
// makes), lease.go a lease's life (its record, Renew, Release, Get),
// counter.go the fencing counters and their keepers, sessions.go making,
// ending and reusing sessions, state.go what one read of a key finds,
// queue.go the waiting line (AcquireQueued, Dequeue), join.go joining it,
// handover.go handing a released key to the first waiter (AwaitHandover),
// known.go releasing without a read (and what a release leaves for the
// store's next call on the key), watch.go, force.go (Break),
// guard.go (restart guard), registry.go and members.go (members),
// inspect.go (listing), service.go (the catalog), acl.go (ACL policy).
package consulbackend
