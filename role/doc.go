// Package role elects one master among the instances of a service (one
// tenant and app), the Go rendition of the role key with a TTL heartbeat:
// one key per service whose value names the master, claimed when absent and
// renewed by the master every heartbeat interval.
//
// This package holds the role's configuration today; the elector itself
// (fenced tenures, instant handover, an IsMaster that reads only the local
// monotonic clock) is being built on the backend interface.
package role
