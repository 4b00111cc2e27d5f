// Package role elects one master among the instances of a service (one
// tenant and app): one role key per service, held by the master under a
// lease, so that a change of master is observable and a handover takes
// milliseconds.
//
// One way per task:
//
//	el, err := role.NewElector(store, id, cfg, role.OnElected(f)) // start: NewElector,
//	go el.Run(ctx)                                               // then Run; ending ctx hands over
//	el.IsMaster()                                                // am I master? (no I/O)
//	role.SetDefault(el); role.IsMaster()                         // the same, in a handler
//	tctx, epoch, ok := el.Tenure()                               // master work: its context and epoch
//	ok, err := el.IsMasterOf(ctx, app, instanceID)               // is another instance master?
//	el.Status()                                                  // everything else: master, epoch, key, errors
//
// Callbacks OnElected(ctx), OnDemoted and OnMasterChange(id) report
// changes; WithObserver feeds metrics; IsLeader serves gocron.Elector.
//
// # The rules
//
// One role key per service, {tenant:app}:role, holds the master's owner
// string: its instance ID plus a per-process nonce, so two processes that
// share an ID (same host and port, a restart overlap) are never both
// master. The key's TTL is Config.HeartbeatExpiration (default 45 s). Every
// instance tries to create the key when it starts; whoever succeeds is
// master. The master renews the key every Config.HeartbeatInterval
// (default 15 s). A slave claims the key as soon as it is free.
//
// # Beyond the rules
//
//   - Fenced tenures: every tenure's epoch is the store's fencing token for
//     the grant, strictly larger than every earlier tenure's, also after the
//     store lost its data, and also for an instance that started after the
//     loss and has seen no epoch (the store's clock is a floor of every
//     token; the elector also passes the highest epoch it saw, in this Run
//     or an earlier one of the same Elector, as the floor of its claims;
//     a floor the store refuses as ahead of its clock, backend.ErrFloorAhead,
//     is forgotten, and forged data under the role key is logged as
//     "corrupt data in the store" and never taken as an epoch).
//     Tenure, EpochFromContext and Status return it. A
//     tenure that ended is never resumed: a master that stepped down (its
//     store out of reach) and then finds its own lease still live on the
//     store releases it and claims afresh, so its next tenure has a new,
//     larger epoch.
//   - Fast handover: the end of Run's context gives the role up
//     and deletes the key at once; waiting slaves are woken by the store's
//     release notification and claim in milliseconds. After a crash, a slave
//     schedules its next claim at the key's remaining TTL plus a few
//     milliseconds of jitter, not at its next tick.
//   - Honest IsMaster: see Elector.IsMaster. A master that cannot renew
//     steps down on its own before the store can expire its key.
//   - Loss is observable: the context passed to OnElected (and returned by
//     Tenure) is cancelled when the tenure ends; OnDemoted and
//     OnMasterChange follow. Callbacks (OnDuplicateID too) run in order on
//     one goroutine per elector, never concurrently, and a slow callback
//     never delays a renewal or a claim.
//   - WithObserver reports every step of the election for metrics (the
//     metrics package); reports never hold up the heartbeat.
//   - A store that grants nothing for a while (one that may have lost data
//     refuses claims until every lease it may have granted before has
//     ended: a refusal without a holder) makes slaves wait that long, or
//     until a release, asking once; nobody is reported as master meanwhile.
//     This holds for a brand-new instance too, so after a Redis restart
//     without its data no instance, old or new, reads IsMaster true while
//     the old master still may. Status.RecoveringUntil says until when,
//     and the elector logs why once per refusal (a store new to baton
//     looks the same: batonctl init declares one whole).
//
// # One source of truth per tenure
//
// A tenure is one holding of the role key on internal/lease, the lease
// holder synclock and schedlock use too, and it ends at the local deadline
// — send time of the last renewal that came back in time, plus the TTL,
// minus the safety margin (Config.SafetyMargin, for the claim and every
// renewal) — not when a store call returns. At that moment, in this order,
// IsMaster turns false and the tenure's context is cancelled (the holding
// does both, on its timer), then the elector's goroutine has Tenure and
// Status stop naming this instance, queues OnDemoted and logs the "no
// longer master" line. Every renewal's context ends at the deadline, and the elector does not
// rely on the store honouring it (go-redis lets a context's deadline end a
// read only with ContextTimeoutEnabled): it stops waiting at the deadline
// and drops a reply that comes back later, even a successful one. Because
// the deadline is at least the safety margin before the store can expire
// the key, all of this happens before any other instance can be granted
// the role. After such an end the elector campaigns again as a slave; if
// it wins, that is a new tenure with a new epoch and a new OnElected.
//   - Duplicate instance IDs are detected: a process that sees the role held
//     by another process with its own instance ID, or finds one in the
//     member list renewing its entry, logs an error and reports it in
//     Status until that process has been gone for the role TTL and two
//     heartbeat intervals. A member entry with its ID that is written once
//     and never renewed (forged, or left with a long TTL) is not a
//     process: it is logged at warning level with where it is kept, and
//     not reported. While it sees another entry claim its ID, a member
//     writes a changing count in its own entry at every heartbeat, so that
//     the other side can tell; a duplicate so takes two heartbeats to be
//     reported.
//
// # What is not promised
//
// Mastership is a lease, not mutual exclusion under arbitrary pauses: the
// safety margin absorbs clock-rate differences and the request's time in
// flight, not a process stopped for longer than the TTL between reading
// IsMaster and acting on it. Work that must never run under two masters
// should carry the epoch to the resource it changes and let that resource
// reject an epoch older than one it has seen.
//
// OnDemoted reports after the fact: it runs once the tenure has ended, on
// the callback goroutine, possibly after a successor was elected. The
// tenure's context is the signal to act on. Even that is ended by a timer,
// while IsMaster reads the clock on every call: a process that wakes from
// a pause can see a live context for a moment while IsMaster already reads
// false, and a write it had started goes on regardless. The epoch, checked
// by the resource, is what protects.
//
// With the role disabled (Config.Disabled, scheduler-lock.enabled=false) the
// elector writes nothing, IsMaster is always false and master-only jobs
// never run.
package role
