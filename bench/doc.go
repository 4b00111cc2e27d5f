// Package bench measures baton's cross-instance lock side by side with the
// locks Go users pick today, on a private redis-server, in one run:
//
//   - baton: synclock.Locker on redisbackend, default Config (hold 45 s,
//     1 s fallback poll; waiters wake on the release notification).
//   - redsync: github.com/go-redsync/redsync/v4 with the go-redis v9 pool
//     and every option at its default (8 s expiry, 32 tries 50-250 ms
//     apart). When a Lock call gives up after its tries, the harness calls
//     it again: the wait goes on.
//   - redislock: github.com/bsm/redislock, Obtain with a 45 s TTL and
//     LinearBackoff(10 ms); an Obtain that gives up is called again.
//   - fenced-min: the minimal fenced lock, a reference: one script SET NX
//     PX and, if set, INCR of the key's fence counter; release by
//     compare-and-delete; 10 ms between tries.
//   - poller-1ms: an owner-checked poller, a reference: SET NX PX, 1 ms
//     between tries; release by compare-and-delete.
//   - seed-sleep: the seed framework's loop: SET key value NX PX 45000,
//     on failure sleep 1 s and try again; unlock is a plain DEL.
//
// This is the only module that imports redsync and redislock; the root
// module never depends on them.
//
// # Scenarios
//
// Uncontended: one goroutine with its own client runs lock+unlock cycles
// back to back on one key, no work in between. Its bound is the
// round-trip limit: a lock+unlock cycle costs at least two round trips,
// so at most 1/(2 RTT) cycles per second. The limit is measured as a
// reference with SET NX PX + DEL cycles from one client (what
// redis-benchmark -c 1 measures). The reference and the implementations
// take turns of 250 ms until each has had its time, so all of them see
// the same moments of a machine whose speed drifts. When Run pins
// redis-server and the benchmark to separate CPUs, each round runs this
// phase again with the pinning undone (UncontendedUnpinned, with its own
// round-trip limit), since production leaves placement to the scheduler.
//
// Contended: Procs operating-system processes (default 4, the program
// re-executed as workers) with Goroutines goroutines each (default 4),
// every goroutine with its own Redis client and its own lock object, all
// on one key. A holder keeps the lock for the critical section (1 ms) and
// waits the think time (2 ms) after releasing before it asks again. Its
// bound is the ideal 1/(cs + 2 RTT): one release and one acquisition per
// handoff. With H holders served in turn, each waits about H (cs + 2 RTT),
// the fair share.
//
// Contended, shared clients (ContendedShared): the same run again, right
// after each implementation's contended run, with one Redis client and one
// lock client per process that its goroutines share, as the goroutines of
// a service share one synclock.Locker (which queues them locally).
// Options.Clients runs either contended scenario alone.
//
// Redis Cluster (RunCluster): Workers goroutines (default 48), each
// locking and unlocking a key of its own app, whose hash tags spread
// evenly over three masters' slots, on a cluster of one master and on
// one of three, in turns of 1 s; the same client code on both (one
// go-redis ClusterClient, redisbackend, a synclock.Locker per app). Beside
// ops/s it reports each master's and the client's CPU use, and ops/s at
// a busy server (ops/s over the busiest master's CPU use), which is how
// the rate would grow with the masters if each had a CPU of its own.
//
// Replica acknowledgement (RunReplicaAck): one goroutine's uncontended
// lock+unlock cycles on a master with one replica (a Sentinel topology),
// with a store made with redisbackend.WithReplicaAck(1) (every grant
// waits for the replica with WAIT) and with one made without, in turns
// of 250 ms.
//
// # What is measured
//
// All times are read from the wall clock of one machine, so the processes
// agree on them.
//
//   - ops/s: acquisitions in the measured window (the run less its warm-up)
//     divided by the window's length.
//   - wait: from calling Lock to Lock returning with the lock held. Waits
//     still unfinished when the run ends count with their length so far
//     (a lower bound), so a starved waiter is not left out.
//   - handoff: from the moment one holder calls Unlock to the moment the
//     next holder's Lock returns, for holders that were already waiting
//     when the release began (uncontended: the same goroutine's unlock plus
//     its next lock). Holders are put in order by a counter each one
//     increments while it holds the lock.
//   - overlaps: right after acquiring, a holder increments a shared marker
//     key and the counter in one pipelined round trip; a marker value other
//     than 1 means another holder was inside. The holder decrements the
//     marker just before it releases.
//
// The contended critical section is 1 ms from the acquisition to the
// start of the release, bookkeeping included: the increment round trip
// runs inside it, and the decrement is started early by its measured
// round-trip time, so the lock is held for cs, not cs plus two harness
// round trips. Sleeps shorter than the Go timer's resolution use
// nanosleep and a short spin.
//
// # The published figures
//
// ReadmeLockFigures and ReadmeComparison render parts of docs/benchmarks.md
// (the comparison also of the top-level README) from results.json;
// ReadmeGoFigures renders its table of role's
// Go benchmarks (IsMaster, handover, failover, commands per elector) from
// gobench.txt, go test's output that make bench-role PUBLISH=1 keeps (read by
// GoBenchmarks). TestReadmeFigures fails while the documents and the files
// differ.
//
// # What is not promised
//
// The numbers are from one run on one machine; the targets are judged by
// reading results.json, never by a timed test. Rounds (the whole sequence
// repeated, its samples pooled) and CPU pinning (redis-server on one CPU,
// the clients on the others) make runs comparable, not noise-free: other
// work on the machine still shows. Overlap detection samples
// the holding at its start and end; it does not watch every instant.
package bench
