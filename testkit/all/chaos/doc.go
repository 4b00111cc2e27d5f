// Package chaos is baton's fault-injection suite, in the manner of
// Jepsen: real node processes (testkit/all/chaos/node) run baton against
// real servers while a nemesis injects faults, every node records what it
// did in a history file, and a checker reads the merged history and
// reports every violation of baton's guarantees.
//
// # The fleet
//
// Each node is one instance of a service, as an application runs it: an
// Elector, a master-only gocron job, a ShedLock-style locked job fired
// every second, and synclock workers that increment a counter
// read-modify-write under one lock. The resource they share is a ledger
// on a separate redis-server that no fault touches: every write carries
// its fencing token (the role's epoch or the lock's token) and the
// ledger's check-and-set script (ledger.lua) rejects a token older than
// the last one it accepted, as a fenced resource should. IsMaster is
// sampled every millisecond.
//
// # The nemesis
//
// Schedule draws a fault schedule from a seed (the same seed gives the
// same schedule): kill -9 of the master or of the lock holder (restarted
// at once with the same instance ID), SIGSTOP of either for longer than
// the TTL, or of a node that is not the master (it wakes up with an
// overdue fire of the locked job, which it starts late), a restart of the
// coordination server with its data, a restart without it (plain, while
// a brand-new instance starts, or while the lock holder is paused), a
// network cut between one node and the coordination servers (each node
// dials them through its own proxy), a paused server, and on the
// Sentinel topology a failover. The topologies are Redis standalone,
// Sentinel and Cluster, and a Consul dev agent (which has no restart with
// its data: it keeps everything in memory). Every fault kind of a
// topology is injected at least once per run, and the topologies' first passes
// take different variants (ScheduleOptions.Rotate), so one run over all
// of them injects every variant; after each heal the nemesis waits a
// quiet time in which the fleet must recover.
//
// # The checks
//
// Check reads the merged history (nodes, nemesis, and the ledger's own
// log of applied writes) and reports:
//
//   - token order: accepted tokens strictly increase per resource;
//   - one master per epoch, IsMaster never true on two live nodes at once,
//     and no token shared by two holdings;
//   - the counter equals the acknowledged increments: nothing lost, nothing
//     doubled;
//   - liveness: after each heal a master and a counter increment within a
//     bound;
//   - each job fire time run at most once: every run records the fire
//     time gocron scheduled it for (schedlock.Fire), however late it
//     started, and two runs of one fire time — seen in the nodes' runs or
//     in the ledger's writes — are one violation;
//   - every error a node saw is a documented one.
//
// A deliberately broken build (the node's -unfenced switch turns the
// ledger's token check off) must make the checker report violations;
// TestChaosBrokenFencing shows it does.
//
// The process tests are built with -tags chaos: `make chaos-short` (one
// fault of each kind per topology, run by `make test`) and `make chaos`
// (CHAOS_DURATION of faults per topology, CHAOS_SEED to replay). Both
// write chaos-report.json and a readable table beside it.
package chaos
