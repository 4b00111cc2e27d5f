// Package backendtest is the conformance suite of backend.Store. Every
// adapter (membackend, redisbackend, consulbackend, and any store written
// outside baton) runs it from its own tests, against a real server, so that
// role, synclock and schedlock can rely on one set of behaviours whatever
// the store.
//
// # Using it
//
// An adapter's test describes how to open clients of one store and how to
// make that store lose its data, and hands both to Run:
//
//	func TestConformance(t *testing.T) {
//		srv := testenv.NewRedis(t) // a private redis-server, stopped by t.Cleanup
//		backendtest.Run(t, backendtest.Harness{
//			NewStore: func(t testing.TB) backend.Store {
//				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
//				s, err := redisbackend.New(rdb)
//				if err != nil {
//					t.Fatal(err)
//				}
//				t.Cleanup(func() {
//					s.Close()
//					rdb.Close()
//				})
//				return s
//			},
//			Wipe: func(t testing.TB) {
//				if err := srv.FlushAll(t.Context()); err != nil {
//					t.Fatal(err)
//				}
//			},
//			// Optional: a restart without data, for the restart guard.
//			Restart: func(t testing.TB) {
//				if err := srv.Restart(); err != nil {
//					t.Fatal(err)
//				}
//			},
//		})
//	}
//
// Run starts one subtest per property, so a failure names what broke
// (for example TestConformance/Parallel/NonOwnerCannotRenewOrRelease) and
// -run can select single properties while an adapter is being written.
//
// # What it checks
//
// The suite checks what the backend package documents, and nothing a store
// is free to do differently:
//
//   - at most one of many concurrent acquirers, each on its own client, is
//     granted a free key, and the others are told who holds it;
//   - Renew and Release change nothing unless the caller owns the lease,
//     also after the lease expired and another owner took the key;
//   - Renew extends a lease to its new TTL from now, Release with a keep
//     time keeps the key exactly that long and cannot be undone by a renew,
//     and Release without one frees the key at once;
//   - leases end by the store's clock without anyone calling the store,
//     never earlier than their TTL allows;
//   - fencing tokens strictly increase across release, expiry and keep
//     times, come from a clock (a fresh key's first token is at least the
//     clock in microseconds, give or take an hour of skew), are
//     independent between keys, honour the floor passed to Acquire
//     (max(counter, floor, clock)+1), refuse a floor at or beyond
//     backend.TokenLimit with ErrFloorAhead and leave the counter as it
//     was, and keep increasing across a store that lost its data, with
//     the floor and without it;
//   - with Harness.Restart: after a restart without data, a key is granted
//     to nobody before a lease the restart lost has ended by its holder's
//     count, refusals meanwhile say Recovering, and the next token is
//     above every earlier one; once the tenant has waited, a service new
//     to the store is granted at once (unless Harness.GuardPerService);
//   - a Watch opened before a release reports it, for every watcher of
//     the key; it never reports a release when the lease ended otherwise
//     (expiry, a keep time, a wipe); renewals, where a store reports
//     them, carry a TTL no longer than the renewal gave and arrive in
//     order; and backend.WaitFree returns once a key is free, whether it
//     was released, kept for a while or expired, also while the holder
//     renews right up to its release;
//   - bad arguments and ended contexts are refused without touching the
//     data;
//   - a counter incremented without atomics in a critical section guarded
//     only by a lease loses no increment under contention;
//   - for stores that also implement backend.Registry (the Registry
//     subtests are skipped for the others): heartbeats add and refresh
//     members, Members lists them by name with what was sent, Leave and
//     expiry remove them, and every heartbeat reports all other live
//     members claiming its identity.
//   - for stores that also implement backend.Queue (the Queue subtests
//     are skipped for the others): AcquireQueued grants a free key nobody
//     waits for like Acquire, with tokens from the same counter and the
//     same floor; a released key is kept for the waiter that joined the
//     line first, whom the release event names and whose grant takes it
//     out of the line; calling again keeps a place, patience 0 never
//     takes one, a place lapses once its patience has run out (and not
//     before), and Dequeue takes a waiter out, waking watchers with the
//     new first waiter when the key is free.
//   - for stores that also implement backend.Breaker (the Break subtests
//     are added only for them): Break returns the lease it ended,
//     whoever held it, kept leases included; it ends only the grant it
//     names (owner and token), and another grant on the key (a new
//     holder, the waiter it was handed to, the same owner's later grant)
//     is left untouched with a *ChangedError naming it (ErrLeaseChanged);
//     the key is free at once, or
//     with a waiter in line passes to it as a release would; watchers are
//     woken; the old holder's Renew and Release are refused with
//     ErrNotHeld; the next grant's token is above the broken one and
//     every earlier one; a free key gives ErrNotFound.
//   - for stores that also implement backend.Inspector (the Leases
//     subtests are added only for them): Leases lists exactly the leases
//     held under a prefix, sorted, as Get reports them, with the live
//     waiters of each line in order, and nothing the store keeps beside
//     its leases (counters, lines, markers, member groups); LeasesUpTo
//     lists at most its limit of them and of each line's waiters, and
//     counts the rest. For registries that implement
//     backend.MemberLister, MembersUpTo lists at most its limit of live
//     members, the identities asked for first, then the latest to
//     expire, and counts the rest.
//   - with Harness.Forge: data written into the store past its checks (an
//     owner, a waiter or a member named with terminal escapes and a
//     newline, a waiter asking for a ttl of 0, a place that is garbage) is
//     never handed back as read: Get, Acquire, Release, Leases, Members
//     and, on a line, Release, AcquireQueued with patience 0 and Dequeue
//     fail with ErrCorrupt naming the key with the text quoted (a join of
//     a held key may be refused as held instead), and a refused release
//     leaves the lease held by its owner under its token.
//
// It does not check that watchers of other keys stay silent (stores may
// signal spuriously), that expiry is signalled to watchers (stores need not
// signal it), nor anything about a store's behaviour when its server is
// unreachable; adapters test their own failure modes.
//
// # Timing
//
// The suite never treats a sleep as proof. It waits for events with
// deadlines of several seconds, uses short TTLs (100 to 500 ms) where a
// lease must run out, and judges time only from inequalities that hold on
// any machine: a lease granted by a request sent at s for d cannot end
// before s+d, and an answer received at r was produced before r. When a
// loaded machine makes a check impossible to judge (a request took longer
// than the lease it was meant to observe), the check is repeated on a fresh
// key instead of failing; Harness.Slack absorbs the resolution of the
// store's clock.
//
// # Data
//
// Each Run uses keys under a hash tag of its own, {conf:<random app>}, so
// runs against a shared server do not collide. The subtests under
// Parallel run concurrently with one another; those under Sequential call
// Harness.Wipe or Harness.Restart and so run after them, alone. Run must therefore not run
// concurrently with anything else that uses the data Wipe removes.
package backendtest
