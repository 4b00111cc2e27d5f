package role

import (
	"context"
	"testing"
)

// stop stops el, failing t if it does not stop within the patience.
func stop(t *testing.T, el *Elector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := el.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// An elector started again after Stop claims with the highest epoch it
// has seen as its floor, so its next tenure's epoch is larger than every
// earlier one even when the store lost its data in between.
func TestRestartedElectorKeepsEpochFloor(t *testing.T) {
	store := newStore(t)
	a, _ := NewElector(leaseOnly{store}, mustID(t, 1), fast, quiet)
	for want := uint64(1); want <= 2; want++ {
		if err := a.Start(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "a elected", a.IsMaster)
		if got := a.Epoch(); got != want {
			t.Fatalf("tenure %d: epoch %d", want, got)
		}
		stop(t, a)
	}
	store.Reset() // the store restarts empty while a is stopped
	start(t, a)
	eventually(t, "a elected again", a.IsMaster)
	_, ep, ok := a.Tenure()
	if !ok || ep <= 2 {
		t.Fatalf("after a restart and a data loss the tenure's epoch is %d (ok %v), want more than 2", ep, ok)
	}
}
