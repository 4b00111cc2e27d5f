// Package schedlock gates scheduled jobs by role — master-only or
// slave-only, decided before every run — and gives jobs that must run once
// per fire across a fleet a ShedLock-style lock (name, lockAtMostFor,
// lockAtLeastFor, skipped rather than waited for).
//
// The gates are being built on the role elector and the backend interface.
package schedlock
