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
//   - Fenced tenures: a tenure's epoch (Tenure, EpochFromContext, Status) is
//     the store's fencing token for the grant, larger than every earlier
//     tenure's, also after the store lost its data and for an instance that
//     has seen no epoch: the store's clock is a floor of every token, and an
//     elector passes the highest epoch it saw as the floor of its claims (a
//     floor the store refuses as ahead of its clock, backend.ErrFloorAhead,
//     is forgotten; forged data under the role key is logged as "corrupt
//     data in the store", never taken as an epoch). A tenure that ended is
//     never resumed: a master that finds its ended tenure's lease still live
//     releases it and claims afresh, with a new epoch.
//   - Fast handover: the end of Run's context deletes the key at once, and
//     slaves, woken by the store's release notification, claim in
//     milliseconds. After a crash, a slave claims at the key's remaining TTL
//     plus a few milliseconds of jitter, not at its next tick.
//   - Loss is observable: the context passed to OnElected (and returned by
//     Tenure) is cancelled when the tenure ends; OnDemoted and
//     OnMasterChange follow. Callbacks, OnDuplicateID and the observer's
//     reports of one elector run in order, one at a time, on a callback
//     goroutine of their own, and never delay a renewal or a claim.
//   - A store that may have lost data grants nothing until every lease it
//     may have granted before has ended (a refusal without a holder):
//     slaves wait that long, or for a release, asking once, and no
//     instance, old or new, reads IsMaster true while the old master still
//     may. Status.RecoveringUntil says until when, and the elector logs why
//     once per refusal (batonctl init declares a store new to baton whole).
//   - Duplicate instance IDs are detected: a process that sees the role
//     held by another process with its own ID, or finds one in the member
//     list renewing its entry, logs an error and reports it (Status,
//     OnDuplicateID) until that process has been gone for the role TTL and
//     two heartbeat intervals. While another entry claims its ID, a member
//     writes a changing count into its own entry at every heartbeat, so an
//     entry written once and never renewed (forged, or left with a long
//     TTL) is told apart: it is logged at warning level with where it is
//     kept, not reported. A duplicate so takes two heartbeats to report.
//
// # One source of truth per tenure
//
// A tenure is one holding of the role key on internal/lease. A master that
// cannot renew steps down on its own at the local deadline — send time of
// the last renewal that came back in time, plus the TTL, minus
// Config.SafetyMargin — not when a store call returns: IsMaster turns
// false and the tenure's context is cancelled; then Tenure and Status stop
// naming this instance, OnDemoted is queued and "no longer master" is
// logged. The elector does not rely on the store honouring a renewal's
// context (go-redis ends a read at a context's deadline only with
// ContextTimeoutEnabled): it stops waiting at the deadline and drops a
// reply that comes later, even a successful one. As the deadline is at
// least the safety margin before the store can expire the key, all of this
// happens before another instance can be granted the role.
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
// OnDemoted reports after the fact, possibly after a successor was
// elected; the tenure's context is the signal to act on. Even that is
// ended by a timer, while IsMaster reads the clock on every call: a
// process that wakes from a pause can see a live context for a moment
// while IsMaster already reads false, and a write it had started goes on
// regardless. The epoch, checked by the resource, is what protects.
//
// With the role disabled (Config.Disabled, scheduler-lock.enabled=false) the
// elector writes nothing, IsMaster is always false and master-only jobs
// never run.
package role
