package testenv

import "testing"

// skipShort skips t when the tests run with -short. A test that starts a
// server belongs to the real-store tier, which `make test` runs in full;
// the short tier (`make test-short`) is the unit tests on the memory store
// and the fake clock, and passes with no server binary at all.
func skipShort(t testing.TB, program string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("starts %s: real-store tier, run without -short (make test)", program)
	}
}
