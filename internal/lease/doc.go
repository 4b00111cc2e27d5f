// Package lease is the one holder of one lease on a backend.Store that
// role's tenure, synclock's holding and schedlock's job lock are built on.
// It knows when a lease is over for this process; when to renew, how to
// wait, and what to report are the policy of the package that holds it.
//
// # The rule
//
// A lease granted or renewed for ttl by a request sent at sent is over for
// this process at
//
//	deadline = sent + ttl − margin
//
// read on the holder's clock (monotonic with the real clock). sent is taken
// before the request leaves, so the store's own expiry, counted from when
// it served the request, is later still; the margin absorbs the difference
// in clock rates and the time between the deadline and the work stopping.
//
// One margin per holding, fixed when its terms are made (Terms.Margin):
// the policy's configured margin where it has one (role's SafetyMargin),
// else Margin of the policy's lease, a tenth of it and at most one second.
// Every grant and every renewal of the holding is ended by the same margin,
// so a renewal never moves the deadline by a different rule than the grant.
//
// A grant whose deadline has passed when its reply arrives is late: Start
// refuses it (ErrLate) and the caller gives it back. A renewal is never
// sent once the deadline has passed, its call is bounded by the deadline,
// and a reply that lands after the deadline is void (ErrLate): the holding
// stays lost, even if the store did extend the key. The deadline, not a
// reply, decides: a holding is lost exactly once, at the deadline or when
// the policy calls Lose (the store said the key is not its own, a role
// ended), never revived after.
//
// Once a reader of Left has found the deadline passed, it never moves
// again, so a renewal whose reply was read a moment before the deadline
// and acted on after it is void too: whoever saw the holding over never
// sees it held again.
//
// At the loss the deadline is taken away (Left reads zero or less), then
// the policy's Lost hook runs (it reports, passes a turn on), then the
// holding's context is cancelled with the cause the hook returns. End marks
// the holding released — from then on nothing is lost or renewed — takes
// the deadline away and cancels the context; Drop gives the key back,
// owner-checked, keeping it keepFor longer.
//
// # What is not promised
//
// A lease is not mutual exclusion under pauses: a process stopped past its
// deadline (GC, SIGSTOP, a VM migration) runs on after another holder was
// granted the key, until it next reads the clock. The fencing token
// (Token) is what a resource uses to reject such a stale holder.
//
// # Floors
//
// Each policy keeps a Floor per key, the highest token it has seen there
// (its grants, and holders the store named), and passes it to every grant,
// so that tokens keep increasing after the store lost its counter. A floor
// the store refuses as ahead of any token it can have granted
// (backend.ErrFloorAhead) is forgotten, never kept to lock the policy out.
//
// # Timers
//
// The deadlines of many holdings share one Alarm, one timer of the clock
// armed for the earliest of them: a lock cycle that ends long before its
// deadline, the usual case, touches no timer at all.
package lease
