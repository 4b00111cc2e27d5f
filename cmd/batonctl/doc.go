// Command batonctl shows and fixes what baton keeps in its store: the
// master of a service, its members, the locks held, a lock stuck with a
// holder that will not release it, and a new store's restart guard.
//
// Usage:
//
//	batonctl [flags] COMMAND [ARGS]
//
// It reads the configuration the library reads (package config): the
// file named by --config (.yaml, .yml, .json, .toml or .properties), then
// the BATON_* environment variables, then the flags that set keys: --app
// and --tenant (instance.app, instance.tenant), --redis (redis.addrs),
// --consul (consul.address), --prefix (the store's key prefix). A store
// that a program made with a prefix of its own is reached with the flags
// alone, as every example prints:
//
//	batonctl --redis 127.0.0.1:6379 --prefix baton-demo --tenant acme --app billing status
//
// The service is {tenant:app}; its keys are {tenant:app}:role,
// {tenant:app}:lock:NAME (synclock) and {tenant:app}:job:NAME
// (schedlock), which the store keeps under its prefix: on Redis the key
// baton:{tenant:app}:role, on Consul the KV path
// baton/lease/{tenant:app}:role (the output shows these store keys). The
// store is Redis (redis.*; in the Spring framework's layout with
// redis.layout=spring) or Consul (consul.*): --redis or --consul
// chooses, or --backend redis|consul; without them, Consul when the
// configuration sets consul.address and not redis.addrs.
//
// # Commands
//
//	status          the master (instance ID, epoch, lease left), the
//	                number of locks held, and the members
//	members         the live instances: ID, whether master, last
//	                heartbeat (Redis), start time, owner string
//	master          the master's instance ID and epoch; exit 3 if none
//	locks [PREFIX]  the leases held under the service's keys, or those
//	                starting with {tenant:app}:PREFIX: key, holder,
//	                fencing token, lease left, waiters in line
//	release KEY     end the lease on KEY whoever holds it (see below)
//	watch [KEY]     print KEY's holder (default: the role key, i.e. the
//	                master), then a line for every change, until
//	                interrupted (SIGINT, SIGTERM)
//	init            declare a store that holds no live lease whole, so
//	                that the tenant's first grants skip the restart
//	                guard's wait (see below)
//	functions       print baton's Redis function library, for stores
//	                with redis.functions (a tenant's ACL user)
//	functions load  load it into the configured Redis (every master of
//	                a Cluster), as an administrator's user
//
// KEY is a full key such as {acme:billing}:lock:nightly, the store key
// that holds it as the output shows it (baton:{acme:billing}:lock:nightly
// on Redis), or the part of the service's key after {tenant:app}:
// (lock:nightly, job:report, role). A PREFIX with a hash tag ({) is taken
// as a full key prefix, or a store key prefix.
//
// A mistyped command is answered with the closest one (did you mean
// "status"?).
//
// Text read from the store (keys, owners, instance IDs, waiters) is shown
// as it is when every character of it is printable, and quoted as a Go
// string otherwise, so that a terminal escape or a newline written into
// the store by another client is shown, not acted on by the terminal;
// the stores report such names as corrupt data in the first place.
//
// On Consul the lease times shown are the TTLs the leases were given:
// Consul cannot say how much of a session's TTL is left. On the Spring
// layout locks is not available (the Java side's keys share no prefix to
// list them by) and status shows the locks as unknown; release ends a
// Java instance's lease too.
//
// # Flags
//
//	--config FILE     configuration file
//	--app NAME        the service (instance.app); required if not configured
//	--tenant NAME     the tenant (instance.tenant, default "default")
//	--redis ADDR      the Redis server, host:port; several comma-separated
//	                  for a Cluster or Sentinel (redis.addrs)
//	--consul ADDR     the Consul agent, host:port or a URL (consul.address);
//	                  the store is then Consul
//	--prefix P        the store's key prefix (redis.key-prefix or
//	                  consul.key-prefix, default "baton")
//	--backend NAME    redis or consul
//	--output FORMAT   table (default) or json; watch writes one JSON
//	                  object per line
//	--force           let release end a lease its holder did not release
//	--yes             release or init without asking for confirmation
//	--timeout D       longest wait for the store per request (default 5s,
//	                  the Redis client's own dial and read timeouts, so a
//	                  server that does not answer fails after 5s); when
//	                  given, it sets those client timeouts too, so that
//	                  the wait is D
//	--interval D      watch: how often to look when no event comes
//	                  (default 1s; a grant of a free key is not signalled)
//
// Flags may come before or after the command and its arguments.
//
// # Output
//
// Tables are for people; --output json is for scripts. It describes the
// master, the members and the locks as the status page's /status does,
// with the same fields (package statuspage: Master, Member, Lock, made by
// the same functions), so that a script reads both alike. Durations are
// in ms, times in RFC 3339, and a token or epoch is a fencing token, a
// large integer that only increases:
//
//	status   {service: {tenant, app}, backend, store, key_prefix, master,
//	         members, locks, locks_held}; master: a Master or null;
//	         locks and locks_held: null when the store cannot list
//	         leases (locks_error says so)
//	members  [Member]: {id, owner, master, self, started_at,
//	         last_heartbeat_ms, ttl_ms} (self is always false: batonctl
//	         is no instance; last_heartbeat_ms is 0 on Consul, which
//	         cannot tell)
//	master   Master: {id, owner, key, store_key, epoch, lease_ms,
//	         held_at_least_ms}, or null with exit 3
//	locks    [Lock]: {key, kind, name, store_key, holder, owner, token,
//	         lease_ms, held_at_least_ms, waiters}
//	release  {key, store_key, released: Lock, now: Lock or null}; now
//	         is the lease right after (the waiter the key was handed to)
//	init     {store, tenant, app, declared}
//	watch    one object per line: {time, key, store_key, held, holder,
//	         owner, token, lease_ms}
//
// id and holder are the instance ID part of an owner
// ("ip:tenant:app:port"); owner adds the per-process nonce after '#',
// which release needs to end that grant and no other. Waiters are named
// by their instance IDs, and keep their nonces only when two places in
// one line share an instance ID (two processes with one ID).
// store_key is the key the store keeps the lease in (with Redis's key
// prefix; Consul's KV path). Values that are unknown or zero
// (held_at_least_ms, started_at) are left out, never shown as 0 or as
// the year 1.
//
// # Releasing a stuck lock
//
// release refuses without --force and says who holds the key. With
// --force it asks for confirmation on stdin (exactly yes, as the prompt
// says; y or anything else releases nothing) unless --yes is
// given, and then ends the lease it showed, and only that grant (its
// owner and fencing token), through backend.Breaker: the key is freed
// (or handed to the waiter first in its line, as a release would) and its
// fencing counter is moved past the broken token, so every later holder's
// token is above it. The old holder is not told: it learns at its next
// renewal or release, which the store refuses, and until then it may
// still be running its section. Resources that check fencing tokens turn
// it away; others do not, so end a lease only when its holder is gone or
// stuck. Releasing the role key makes the master step down at its next
// renewal and another election happen at once.
//
// If the key changed hands between the prompt and the release (its
// holder released it and another instance took it, or it was handed to
// the waiter first in line), release ends nothing: the store compares
// the grant shown with the one on the key in the same step that would
// end it. batonctl then says who holds the key now and exits 4; run
// release again to see the new holder and decide again. On the Spring
// layout a Java instance's grant has no token, so two grants in a row to
// the same Java instance look alike to release.
//
// # Exit codes
//
//	0  done
//	1  error: the store is unreachable or failed, the configuration is
//	   invalid (every problem is listed, with the key to fix)
//	2  the command line is wrong (unknown command or flag, missing
//	   argument, no service named)
//	3  the answer is no: master found no master, release was refused
//	   (no --force) or not confirmed, the key was free, or init was not
//	   confirmed
//	4  release ended nothing because the key changed hands after it was
//	   shown (the message names the holder now)
//
// Results go to stdout; messages and the confirmation prompt go to
// stderr.
//
// # init
//
// A store that may have lost its data refuses, for the longest lease,
// every key that has no fencing counter (the restart guard: a lease it
// lost may still be used by its holder), and a store baton has never used
// looks the same: the first grants of a new Redis or Consul wait, 45 s
// with the defaults and as long as the longest lock hold. init, on a
// store an operator knows holds no live lease (a new one, or one whose
// every holder has stopped), declares the tenant's data whole, after a
// confirmation unless --yes; the tenant's services are then granted at
// once until the store restarts without its data or loses it, when the
// guard holds again. On a Redis Cluster the declaration is per service
// (--app): run it for each. A service new to a store its tenant already
// uses does not wait in any case.
//
// # No purge
//
// There is no purge command: the stores keep no leftover counters of
// dynamic lock names. A key's fencing counter expires by itself, at the
// earliest an hour (or the lease's ttl if longer) after the key's last
// grant: on Redis with PX, on Consul through the keeper session that
// locks it (consulbackend.WithCounterKeep), in memory by the same rule.
// Waiting lines and watch markers expire with their last waiter or
// watcher, and member entries with their heartbeats. The one counter that
// stays is one a caller's floor pushed further ahead of the store's clock
// than its life: the clock alone would give smaller tokens once it
// expired, so it must stay, and deleting it would break fencing.
package main
