package main

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo runs end to end on the embedded Redis with a short TTL; run
// checks its own outcome (three tenures, increasing epochs, no overlap).
func TestDemoRuns(t *testing.T) {
	if err := run("", 600*time.Millisecond, false); err != nil {
		t.Fatal(err)
	}
}
