// Package springredis is a lease store for a fleet in which Java
// instances of a service (the Spring framework baton replaces, and
// ShedLock's Redis lock provider) and Go instances of the same service
// run side by side during a migration, on one Redis. It writes and reads
// the keys and values the Java side writes, so both sides elect one
// master, take one job lock and one synchronized lock, and see each other
// as master or holder.
//
// # The shared keys
//
// Baton's role, lock and job-lock keys (backend.AppKey(tenant, app,
// "role"), "lock" or "job" and a name) map to the Java side's keys
// (Layout; these are the defaults):
//
//	role          <app>                    value: the master's instance ID
//	sync lock     <name>                   value: the holder's instance ID
//	job lock      job-lock:<env>:<name>    value: ADDED:<UTC time>@<host>
//
// The role key is the service's name (spring.application.name), with
// the master's instance ID "ip:tenant:app:port" as its value and the
// heartbeat expiration as its TTL; a synchronized lock's key is the
// method's signature, so the Go side passes the very string the Java
// side uses to Locker.DoKey (a Go function name never matches it); a
// job lock is ShedLock's, with its time format and the host name
// (Layout.Hostname). Every grant is SET NX PX of the shared key, as the
// Java side's; a release is DEL, or, with a keep time (lockAtLeastFor),
// PEXPIRE, as ShedLock's unlock.
//
// Beside each shared key K the store keeps baton's own records, which
// the Java side never reads: "<prefix>:{spring:K}:owner", the token, the
// full owner (instance ID and nonce) and the value of baton's lease on
// K, with the same expiry; and "<prefix>:{spring:K}:fence", K's fencing
// counter. Members (role.Elector.Members), watch markers and every key
// of another shape are in baton's own layout (redisbackend). Tokens keep
// the backend's limit (backend.MaxTokenLead): a floor beyond it is
// refused with backend.ErrFloorAhead, and a record or counter whose token
// is beyond it is backend.ErrCorrupt naming the Redis key to delete.
//
// # What the mode gives, and what it cannot
//
//   - One master and one holder at a time across both sides, while each
//     renews its key before the key's TTL ends: both sides claim with SET
//     NX, and the server's TTL alone decides expiry.
//   - Baton's instances keep their promises among themselves: fencing
//     tokens, owner-checked renewal and release (a baton instance never
//     renews or deletes a key it does not hold, the Java side's
//     included), two Go processes with one instance ID are never both
//     master, and a late release cannot delete a newer holder's key.
//   - The Java side checks no fencing token: a Java instance that pauses
//     past its TTL can still act after a Go instance took over, and a
//     resource guarded by tokens sees no token from it. A lease the Java
//     side holds has token 0 in Get and in refusals.
//   - The Java side's release is not owner-checked: a Java instance whose
//     own key expired and went to a Go instance deletes the Go
//     instance's key when its method returns. Keep hold times well above
//     the sections' length.
//   - The Java side announces nothing: a Go waiter learns of a Java
//     release or expiry when it asks again, as the Java side learns of
//     any release — a synclock waiter at its retry interval, a Go slave
//     at its next heartbeat (the store is a backend.Unannounced, so the
//     slave does not sleep out the lease it last saw); releases by Go
//     instances wake Go waiters at once. A Go master that stops
//     hands over to a Java instance at that instance's next heartbeat.
//   - No waiting line (backend.Queue), no restart guard (the Java side
//     has none), and no Redis Cluster: the shared keys carry no hash tag.
//   - No listing of held leases (backend.Inspector): the shared keys are
//     the Java side's (a service name, a method signature,
//     job-lock:<env>:<name>) with no prefix in common, and Layout maps
//     baton's keys to them one way only, so a walk of the server could
//     neither find the Java side's locks nor name the baton key of what
//     it found. Get reads any key whose name is known.
//   - Break (backend.Breaker, batonctl release --force) ends any lease,
//     a Java instance's too, if it is still the grant read; a Java grant
//     has no token, so two grants in a row to one Java instance look
//     alike to it. The Java holder is not told and, when its
//     method returns, deletes the key whoever holds it then, as its
//     release always does.
//   - Java instances are not members (role.Elector.Members lists Go
//     instances only); IsMasterOf compares the role key's value with an
//     instance ID, for either side.
//
// Use it only for the migration: once every instance runs baton, move to
// redisbackend (a stop of the whole fleet, or a release of the role key
// by the last instance on this layout, since the two layouts do not see
// each other's keys).
package springredis
