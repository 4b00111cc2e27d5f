// Package statuspage serves the health and status of one instance of a
// baton service over HTTP, for load balancers, orchestrators and people.
//
// One Handler, mounted in the program's own mux, serves three paths:
//
//	/healthz   200 "ok", or 503 with the problems, one per line: the
//	           elector is not running, another live process claims this
//	           instance's ID, or the store cannot be reached
//	/status    the Status as JSON: the service, this instance, the master
//	           with its epoch, the members with their last heartbeat, the
//	           locks held with holder, token, lease left and waiters (each
//	           list capped, with a count of the rest), and the recent
//	           transitions and skipped jobs
//	/          the same as a page: server-rendered HTML with inline CSS and
//	           no other assets, readable on a phone, reloading itself
//
// Wiring it:
//
//	events := statuspage.NewEvents(0)
//	el, _ := role.NewElector(store, id, cfg, events.RoleOptions()...)
//	report := schedlock.MasterOnly(el, schedlock.WithObserver(events.Job)) // s.NewJob(def, task, report)
//	lk, _ := synclock.NewLocker(store, id, lcfg, synclock.WithObserver(events.Lock))
//	page, _ := statuspage.New(store, el, statuspage.WithEvents(events))
//	mux.Handle("/baton/", http.StripPrefix("/baton", page))
//
// batonctl's --output json describes the master, the members and the
// locks in the same shapes (Master, Member, Lock, made by MasterOf,
// MemberOf and LockOf), so that a script reads both alike. Waiters are
// named by their instance IDs (WaiterNames), the process nonce kept only
// when two places in one line share an ID; keys come with the store key
// that holds them (StoreKey), and a time or lower bound that is not known
// is left out, never shown as zero.
//
// # What it costs
//
// Nothing that grows with the number of keys or of requests. /status and
// the page answer from one snapshot read at most once per refresh
// interval (WithRefresh); requests that come while it is read wait for
// that read and share it, and HEAD reads nothing. A snapshot lists at
// most DefaultMaxLocks locks and DefaultMaxMembers members (WithLimits),
// each lock with at most five waiters, and counts the rest. The locks
// come from backend.Inspector.LeasesUpTo, whose work is bounded: on Redis,
// which keeps no index of keys by prefix, a bounded number of SCAN calls,
// after which the list is partial (Status.LocksPartial) and the count of
// the rest a lower bound. The members come from
// backend.MemberLister.MembersUpTo when the store has it (all built-in
// stores do; else from role.Elector.Members, which reads them all): this
// instance and the master first, then the most recently seen. /healthz
// reads the role key on each request.
//
// # What it reveals
//
// The page has no authentication: mount it behind the service's own. It
// shows the service's instance IDs (addresses and ports), the owners of
// the locks, the lock names (which may carry entity IDs), their tokens and
// this process's recent transitions and skipped jobs. Every response says
// X-Content-Type-Options: nosniff and Cache-Control: no-store, and text
// read from the store is escaped in the page and in the JSON.
//
// # What it shows, and what it cannot
//
// Each snapshot reads the elector's own view (role.Elector.Status), the
// role key, the members and the leases under the service's prefix
// (backend.Inspector), each read bounded by the handler's timeout; the
// recent events are those this process recorded in its Events, not the
// fleet's. Stores do not record when a lease was granted, so the page
// gives no exact age: it shows the fencing token and the lower bound the
// token implies (every store makes a token at least its clock in µs at
// the grant), and, for the master, when this instance saw it take over. A
// lease's "lease left" is the store's remaining TTL, except on Consul,
// which cannot tell it and reports the TTL the lease was given.
//
// A duplicate instance ID keeps /healthz at 503 while another live
// process claims this instance's ID (role.Status.Duplicate: it holds the
// role key or keeps renewing its member entry) and for the role TTL and
// two heartbeat intervals after, so that an orchestrator notices it; the
// message names the entry to delete if no such process runs. A member
// entry that is not renewed (forged, or left behind) is logged by the
// elector and does not make the instance unhealthy.
//
// A store that is recovering (its restart guard refuses the role to
// everyone after it restarted without its data:
// role.Status.RecoveringUntil) is shown on the page and in /status
// (instance.recovering_until and recovering_ms), so that "no master" has
// its reason; it does not make the instance unhealthy, as every instance
// of the service sees the same and a restart would not help.
//
// The handler starts no goroutine and holds no lock across a store call:
// the snapshot is read in the goroutine of the request that found it
// missing or stale.
package statuspage
