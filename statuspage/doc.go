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
//	           locks held with holder, token, lease left and waiters, and
//	           the recent transitions and skipped jobs
//	/          the same as a page: server-rendered HTML with inline CSS and
//	           no other assets, readable on a phone, reloading itself
//
// Wiring it:
//
//	events := statuspage.NewEvents(0)
//	el, _ := role.NewElector(store, id, cfg, events.RoleOptions()...)
//	gate, _ := schedlock.NewGate(schedlock.Master, el, schedlock.WithObserver(events.Job))
//	lk, _ := synclock.NewLocker(store, id, lcfg, synclock.WithObserver(events.Lock))
//	page, _ := statuspage.New(store, el, statuspage.WithEvents(events))
//	mux.Handle("/baton/", http.StripPrefix("/baton", page))
//
// # What it shows, and what it cannot
//
// Each request reads the elector's own view (role.Elector.Status), the
// role key, the member list (role.Elector.Members) and the leases under
// the service's prefix (backend.Inspector), each read bounded by the
// handler's timeout; the recent events are those this process recorded
// in its Events, not the fleet's. Stores do not record when a lease was
// granted, so the page gives no exact age: it shows the fencing token
// and the lower bound the token implies (every store makes a token at
// least its clock in µs at the grant), and, for the master, when this
// instance saw it take over. A lease's "lease left" is the store's
// remaining TTL, except on Consul, which cannot tell it and reports the
// TTL the lease was given.
//
// A duplicate instance ID keeps /healthz at 503 while another live
// process claims this instance's ID (role.Status.Duplicate: it holds the
// role key or keeps renewing its member entry) and for the role TTL and
// two heartbeat intervals after, so that an orchestrator notices it; the
// message names the entry to delete if no such process runs. A member
// entry that is not renewed (forged, or left behind) is logged by the
// elector and does not make the instance unhealthy.
//
// The handler starts no goroutine and holds no lock across a store call.
package statuspage
