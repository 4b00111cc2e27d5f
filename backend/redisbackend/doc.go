// Package redisbackend is the Redis lease store of baton. It works on any
// redis.UniversalClient: a standalone server, a Sentinel-managed master
// (redis.NewFailoverClient) or a Redis Cluster.
//
// # Layout
//
// A lease key K is stored as the string "<prefix>:K", "<token> <owner>"
// with a PX expiry, followed by " contended" once someone waits for it or
// watches it, or by " released" once it was released with a keep time. Its
// fencing counter is the integer "<prefix>:K:fence", the last token
// granted, which expires max(ttl, 1 h) after K's last grant (or never, if
// a floor put it further than that ahead of the server's clock), so that
// per-entity keys such as invoice:42 leave nothing behind once idle.
// K's hash tag (the part in braces, such as "{acme:billing}") keeps all of
// a key's Redis keys in one Cluster slot; a key without one is used whole
// as its tag. A key's waiting line (backend.Queue) is the sorted set
// "<prefix>:K:line" (waiters by arrival, on the server's clock) with the
// hash "<prefix>:K:line-req" of what each waiter asked for (ttl and
// fencing floor) and when its place lapses; both expire together, at
// least a waiter's patience after its last call (a join that finds less
// left sets twice its patience, so the joins that follow only read the
// line's PTTL). A script reads the places it needs before it writes anything
// (a release that hands K over pops the head it looks at, ZPOPMIN, and
// puts back what it popped, at its arrival, when the grant is refused or
// a place is corrupt; an AcquireQueued that joins the line of a held key
// reads none: it names the holder, not the first waiter), and one call
// looks at no more than 100 of them from the head (dropping the lapsed ones among them): a place not in
// baton's shape (a ttl
// outside 1 ms to 365 days, a floor at the largest token, a waiter named
// with a space or control character, garbage) is backend.ErrCorrupt
// naming the line's key, and the call changes nothing; a line whose first
// 100 places have all lapsed (say, stuffed by another client) loses its
// order until later calls have dropped them or it expires, and Leases
// lists the live waiters among its first 100 places only. A release of a key with a live waiter in line grants it to that
// waiter (backend.Handover) and publishes the grant (see Handovers). The
// string "<prefix>:K:mailbox" is the mailbox of older versions, which
// copied a handed lease into it ("<token> <owner>", expiring with it):
// this one deletes it where a lease ends and writes none. A watched key has the marker "<prefix>:K:watch-mark"
// (see Notifications). The suffixes ":fence", ":line", ":line-req",
// ":watch-mark", ":mailbox", ":member-data" and ":member-ids" are
// reserved (see Registry below).
//
// While K lives, its counter holds K's token (a grant writes both in one
// script; a break moves the counter past it only as it ends the lease), so
// a release that hands K over takes the token for the counter and does
// not read it: the new token is max(K's token, the waiter's floor, the
// server's clock) + 1. None of these change a stored
// value's format or a key's name: stores of older and newer baton
// versions work one key together during a rolling upgrade. A least-
// privilege user made from older ACLRules, without ZPOPMIN, hands over by
// reading the head instead. A waiter of this version that missed a
// handover's message reads the lease, which older releases write alike;
// one of an older version looks in the mailbox, which this version's
// releases no longer write, and gets the lease from its next
// AcquireQueued, when its wait's max has passed.
//
// Every operation is one Lua script (EVALSHA, falling back to EVAL when the
// server does not have it yet; WithFunctions: the function of baton's
// library that runs it, FCALL), so the owner check, the fencing increment,
// the write and the release notification are atomic. Each script is a file
// of the package's lua directory, sent behind the fencing rule both Redis
// stores share (backend/internal/redislua) and one shared prelude
// (lua/prelude.lua), and declares in KEYS the eight keys that a lease
// script may touch (K's lease, counter, line, requests, watch marker and
// mailbox, and the restart guard's markers of its service and tenant), as
// Redis's scripting rules require and as Redis-compatible servers enforce.
// Expiry is decided by the server's clock alone.
//
// # ACL
//
// ACLRules gives the rules of a least-privilege Redis user for a store:
// keys and pub/sub channels under the prefix, and the commands the store
// and its scripts use. Refusals (WRONGPASS, NOPERM) come back as errors
// that name the client's user. TenantACLRules gives those of one tenant
// of a shared server: its own {tenant:app} keys and channels only, no
// SCAN (Redis does not confine SCAN to key patterns), so Leases is
// refused to it, and no scripts of its own (a looping script stalls the
// server): its stores call baton's Redis functions instead
// (WithFunctions), which an administrator loads (LoadFunctions). The
// README's Tenants section says what tenants still share.
//
// # Fencing tokens
//
// A grant's token is max(counter, floor, the server's clock in µs, from
// TIME) + 1, at most backend.MaxToken (2^53 - 1, so that the scripts
// compute it exactly as a Lua number). A script runs far longer than a microsecond, so the tokens of
// a key increase also when its counter is gone: expired, or lost with the
// server's data; a caller that has seen no token (a new process) still
// gets a larger one. The floor covers a server whose clock went back.
//
// No grant puts a token more than backend.MaxTokenLead (366 days) ahead
// of the server's clock: a floor at or beyond that limit is refused with
// backend.ErrFloorAhead, and a counter or lease token found beyond it
// (forged, or written while the server's clock was far ahead) makes every
// call that reads it fail with backend.ErrCorrupt naming the Redis key to
// delete, instead of handing it to a caller that would keep it as its
// floor. Reading a lease therefore reads TIME too.
//
// # Restart guard
//
// A server restarted without its data may have lost a lease whose holder
// still acts on it. A grant that finds no fencing counter (a key never
// granted, idle past the counter's life, or lost) therefore asks whether
// the data of the key's service is known whole for long enough, and if
// not refuses: Acquire and AcquireQueued return a *backend.HeldError with
// Recovering set and the time left as Holder.TTL (its message says why,
// and names batonctl init and WithoutRestartGuard); a waiter in line
// keeps its place. The time asked for is the guard, the ttl asked for or
// WithRestartGuard if longer: set that to the longest lease the fleet
// keeps. WithoutRestartGuard turns it off, for tests on servers started
// for them.
//
// Markers say since when data is known whole, each the server's time in
// ms and the ID of the server's run that wrote it (INFO server's run_id),
// with no expiry:
//
//	<prefix>:{T:app}:intact   the service's (IntactKey): its hash tag's keys
//	<prefix>:{T:}:intact      the tenant's (TenantIntactKey): all of tenant T's services
//
// A data loss takes both: a FLUSHALL or FLUSHDB, and a restart without
// data. A grant waits until the guard has passed since the service's
// marker says, or, for a service without one, since the tenant's says: a
// service new to a server its tenant already uses is new, not lost (had
// the server lost the service's data, it would have lost the tenant's
// marker too), and is granted at once once the tenant has used the
// server for the guard. With neither marker (a new server, or one that
// lost its data) the grant writes both and refuses: from the server's
// start, if that is nearer than the guard, else from now. A marker
// written in an earlier run of the server (it restarted with its data,
// perhaps from an older snapshot) also waits for the server's uptime to
// pass the guard plus a second (Redis counts whole seconds). A server new
// to baton looks the same as one that lost its data, so the first
// service of each tenant waits once; batonctl init (DeclareIntact), on a
// server an operator knows holds no live lease, writes the tenant's
// marker as whole since ever, for this run of the server, and the
// tenant's grants are at once. The marker is per tenant, not per server,
// so that it stays inside the keys of TenantACLRules: no tenant of a
// shared server can write what another tenant's grants trust.
//
// On a Redis Cluster a script may touch only the keys of its own slot,
// and the tenant's marker is in another: there each service's marker
// stands alone, every new service waits once, and batonctl init declares
// one service (--app) at a time. Keys without a hash tag of their own
// have no service marker: they read the marker "<prefix>:intact", which
// only DeclareIntact writes, and otherwise the uptime alone. A marker
// ahead of the server's clock (the clock was stepped back, or the value
// was forged) would refuse fresh keys until the clock caught up: the
// grant that finds one resets it to the server's time and fails with
// backend.ErrCorrupt naming it, and fresh keys then wait out the guard
// once, as after a flush. A tenant's user can write its tenant's marker,
// and so skip its own services' wait, no other tenant's.
//
// The guard does not cover a DEL of a lease key by hand (its counter and
// the marker stay), nor a failover to a replica that missed writes (see
// WithReplicaAck), nor servers that report no uptime (miniredis), nor a
// restart from a stale RDB snapshot: the snapshot brings the counter back,
// and a lease renewed after the snapshot and lost with the restart is then
// granted again at once. Fencing tokens still increase in every one of
// these cases; run Redis without persistence, or with AOF, to keep the
// guard's promise.
//
// # Notifications
//
// Release and Renew of a contended lease publish on a channel named after
// the lease key, so watchers learn of a release at once and of a renewal's
// new expiry without asking. A lease is contended when a waiter joins its
// line, when it was granted while a line or a watch marker existed, when
// it was handed over, or when a Watch began while it was held; a lease
// nobody waits for or watches is released with a GET and a DEL and
// publishes nothing. Watch subscribes to the channel over one shared
// pub/sub connection per Store (on a Cluster: sharded pub/sub, one
// connection per slot in use, so events stay on the node that owns the key
// and arrive in order with its writes), opened on the first Watch and
// closed by Close; the subscription is confirmed by the server, and the
// key marked, before Watch returns, so a release after Watch returned is
// never missed while the connection stays up. The store refreshes the
// marker of every watched key every third of its life (WithMarkerTTL,
// default 30 s); when a refresh
// fails, the key's watchers are told to look again. Keyspace notifications
// are not needed: expiry is not signalled, and waiters re-check at the
// holder's remaining TTL (backend.WaitFree). When the pub/sub connection
// breaks, every watcher gets a signal, because a release may have been
// missed. Once a key's subscription is confirmed again (the connection
// came back, or the store replaced one that stopped answering), the store
// marks the key again at once, since a server restarted without its data
// lost the markers, and then signals the key's watchers once more: from
// that mark on, releases are published again, and one that went
// unpublished before it is covered by the signal. A mark that fails is
// tried again a quarter of a second later.
//
// The pub/sub connection has two goroutines of the store: one sends on it
// (SUBSCRIBE, UNSUBSCRIBE, PING, the re-dial of a connection that stopped
// answering, in the order callers asked), the other reads it. No network
// call runs under a mutex that another caller needs, so a server that
// stalls delays only the calls that wait for it, each until its own
// context ends. A Watch whose context has a deadline returns by it even
// when the client ignores context deadlines on reads (go-redis without
// ContextTimeoutEnabled); the command it abandoned finishes on its own
// and Close waits for it.
//
// # The protocol as states and transitions
//
// A lease key K is in one of four states, by its value:
//
//	free        (no K)                   nobody holds K; its line may keep it for the first live waiter
//	plain       "<token> <owner>"        held; nobody waits or watches
//	contended   "... contended"          held; someone waits, watches, or was handed it
//	released    "... released"           released with a keep time; it only expires
//
// Every change is one script (O is the caller, W the first live waiter
// in K's line; "publish" is on K's channel, but a handover's, which goes
// to W's store alone: see Handovers):
//
//	from              call                         to                                    publish
//	free, no line     Acquire(Queued) by O         plain (contended: no counter, marker,  -
//	                                               or a busy AcquireQueued)
//	free, W first     AcquireQueued by W           contended, W leaves the line           -
//	free, W first     AcquireQueued by O != W      O joins the line; reply queued W        -
//	plain/contended   AcquireQueued by O           contended; O joins (or keeps) its place -
//	                  (patience > 0)               (reply: the holder, no next)
//	plain/contended   try by O (patience 0)        same (reply: the holder and W)         -
//	contended of O    AcquireQueued by O           same (a handover; mailbox deleted)     -
//	plain of O        Renew by O                   plain, new PX                          -
//	contended of O    Renew by O                   contended, new PX                      renewed <token> <ttl>
//	plain of O        Release by O                 free                                   -
//	contended of O    Release by O, W in line      contended of W, token max(K's, W's     renewed <token> <ttl> W
//	                                               floor, clock) + 1, W's ttl; W popped
//	                                               from the line
//	contended of O    Release by O, no W           free                                   released <token> <next>
//	contended of O    ReleaseAndJoin by O for N,   as Release by O; then N joins the       renewed <token> <ttl> W
//	                  W in line                    back of the line (reply: joined)
//	plain/contended   Release by O, keep > 0       released, PX keep (mailbox deleted)    renewed <token> <keep> if contended
//	contended of W    Dequeue by W (handed to it)  as Release by W
//	free, W first     Dequeue by W                 the next waiter's, as above            renewed ... / released - <next>
//	any, in line      Dequeue by O                 O leaves the line                      -
//	any held          Break (backend.Breaker)      counter past the token and the clock;  renewed <token> <ttl> W /
//	                                               then as Release by its owner, also     released <token> <next>,
//	                                               when plain or released                 also when plain
//	plain             Watch (mark)                 contended; marker set (WithMarkerTTL)  -
//	any held          PX runs out                  free                                   - (waiters wake at the TTL)
//
// A place in line lapses at its due time, 3 x RetryInterval after its
// waiter last asked (synclock's patience); a lapsed place in front of the
// first live waiter is dropped by the next call that reads the line (a
// Release, which pops it, a Dequeue, an AcquireQueued of the free key or
// one with patience 0), and a lapsed waiter that joins again goes to the
// back. A store made
// WithReplicaAck does not hand over: its contended release publishes
// "released <token> <W>" and W claims. The restart guard refuses a grant
// in every row that grants but a Release's handover (K is there, so its
// data was not lost), with "recovering <ms left>", when K's fencing
// counter is missing and K's data is not known whole for the guard (see
// Restart guard).
//
// The server calls of a contended acquisition (lockbench: 4 processes x
// 4 goroutines), each script and each command it calls counted once: the
// waiter's AcquireQueued, a script with GET, TIME and PTTL (the holder:
// TIME checks its token and times the arrival), ZADD, HSET and PTTL of the
// line (its place and its store's wake-up id; and once per patience
// PEXPIRE of line and requests): 7; the holder's handing Release, a
// script with GET (the lease), ZPOPMIN, TIME and HMGET (the head's
// request and wake-up id), SET of the counter and the lease, HDEL (the
// head's request), PUBLISH on the head's wake-up channel and EXISTS of
// the watch marker: 10. The PUBLISH is sent to one connection, the head
// store's, however many stores wait for K.
// An uncontended AcquireQueued and Release: 9 (the scripts; EXISTS, GET
// of the counter, TIME, SET of counter and lease; GET and DEL).
//
// # Handovers
//
// AwaitHandover never holds a connection of the client's pool: a process
// may wait on more keys than its pool has connections while its renewals
// and releases go through. A release that hands K to a waiter publishes
// "renewed <token> <ttl-ms> <new owner>" on the waiter's store's wake-up
// channel of K, "K wake <id>", where id is 16 random hex digits the store
// drew when it was made and wrote beside the waiter's request in line
// (field "wake <owner>" of "<prefix>:K:line-req"); AwaitHandover
// subscribes to that channel over the store's pub/sub connection and
// returns when the message names its owner. Only that store hears the
// handover: with many processes waiting for K, each handover costs the
// server one message, not one per waiting store. While a store watches K
// (its marker exists), the handover is published on K's channel too,
// since watchers hear of every release; a handover to a waiter of an
// older version (no wake-up id) or whose id is not 1 to 32 hex digits,
// and one of a K without a hash tag (a channel named after it might be in
// another Cluster slot), goes on K's channel, as it always did. A waiter
// of this version under an older release hears nothing and gets the
// lease from its next AcquireQueued, at its wait's max (synclock:
// RetryInterval), as an older waiter does without the mailbox. The channel stays subscribed
// for 2 s after its last watch closed and its last waiter left, and a
// handover seen while its owner was not waiting (between a refused
// AcquireQueued and the next AwaitHandover) is kept for the owner's next
// wait, up to the lease's ttl, until the next message on the channel, or
// until the owner has the lease from AcquireQueued.
// A handover published before the subscription held is found by one look
// at the key's lease (GET and PTTL in one MULTI: a handover leaves
// "<token> <owner> contended", and a lease the owner was given by
// AcquireQueued is not taken for one) once the server has confirmed the
// subscription, and again after every re-subscription; not when the
// subscription held already when the owner's last AcquireQueued was sent
// and has held since: every handover to the owner after that call was
// published where the store hears it, so a contended acquisition makes no
// look. A waiter's AcquireQueued on a store that
// waits on the key or watched it lately (it has one of the key's channels)
// expects the key held and skips the free key's fast path. A
// wait ends at its max by a timer of the client, never later (a blocking
// read on the server would end only on the server's next clock tick, up
// to 100 ms late at the default hz); if the pub/sub connection broke and
// a handover went unseen, the caller's next AcquireQueued returns it.
package redisbackend
