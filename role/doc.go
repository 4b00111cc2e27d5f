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
// # What is promised
//
//   - Fenced tenures: a tenure's epoch (Tenure, EpochFromContext, Status) is
//     the store's fencing token for the grant, larger than every earlier
//     tenure's, also after the store lost its data. A tenure that ended is
//     never resumed; the next one has a new epoch.
//   - One source of truth per tenure: a tenure is one holding of the role
//     key on internal/lease, and it ends at its deadline — send time of the
//     last renewal that came back in time, plus the TTL, minus
//     Config.SafetyMargin, on the local monotonic clock — not when a store
//     call returns. IsMaster turns false and the tenure's context is
//     cancelled; then Tenure and Status stop naming this instance, OnDemoted
//     is queued and "no longer master" is logged, all before the store can
//     expire the key. A reply that comes later is dropped, even a successful
//     one, and a store call that hangs delays none of this.
//   - Fast handover: the end of Run's context deletes the key at once, and
//     slaves, woken by the store's release notification, claim in
//     milliseconds; after a crash, at the key's remaining TTL plus a few
//     milliseconds, not at their next tick.
//   - Callbacks, OnDuplicateID and the observer's reports of one elector run
//     in order, one at a time, on a goroutine of their own, and never delay
//     a renewal or a claim.
//   - A store that may have lost data grants the role to nobody until every
//     lease it may have granted has ended (Status.RecoveringUntil), so no
//     instance reads IsMaster true while the old master still may.
//   - Two live processes with one instance ID are detected and reported
//     (Status, OnDuplicateID); a member entry written once and never renewed
//     is logged, not reported.
//
// How each of these works, step by step, is in docs/safety.md ("The
// election, step by step").
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
// elected; act on the tenure's context instead. Even that is ended by a
// timer, while IsMaster reads the clock on every call, so a process that
// wakes from a pause can see a live context for a moment: the epoch,
// checked by the resource, is what protects.
package role
