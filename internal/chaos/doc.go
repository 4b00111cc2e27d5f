// Package chaos is baton's fault-injection suite, in the manner of
// Jepsen: real node processes (internal/chaos/node) run baton against
// real servers while a nemesis injects faults, every node records what it
// did in a history file, and a checker reads the merged history and
// reports every violation of baton's guarantees.
//
// The resource the nodes share is a ledger on a separate redis-server that
// no fault touches. Every write carries its fencing token and the ledger
// rejects tokens older than the last one it accepted, so the history shows
// both what leases promise (liveness) and what fencing adds (safety).
//
// The tests are built with -tags chaos: `make chaos-short` (run by
// `make test`) and `make chaos`.
package chaos
