// Package synclock serialises a critical section across every instance of
// a service: only one goroutine of one instance runs it at a time, the Go
// rendition of the seed framework's synchronised method whose lock key is
// the method signature and whose value is the instance ID.
//
// This package holds the lock's configuration today; the locks themselves
// (wake on release, local queueing, fencing tokens) are being built on the
// backend interface.
package synclock
