package main

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-go/baton/backend"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo runs end to end on the embedded Redis; run checks its own
// outcome (three tenures, increasing epochs, no overlap). The demo expects
// each master to keep the role until it stops or crashes it, so the TTL
// leaves a renewal over a second to land (heartbeat TTL/3, safety margin
// TTL/10): a shorter one lets a busy machine cost a master its role, and
// the demo then crashes an instance that is no longer master.
func TestDemoRuns(t *testing.T) {
	if err := run(func() (backend.Store, string, func(), error) { return connectRedis("") }, 2*time.Second, false); err != nil {
		t.Fatal(err)
	}
}

// The demo runs end to end on a Consul dev agent it starts, as
// `go run ./examples/cluster -consul` does.
func TestDemoRunsOnConsul(t *testing.T) {
	if err := run(func() (backend.Store, string, func(), error) { return connectConsul("", 0) }, 2*time.Second, false); err != nil {
		t.Fatal(err)
	}
}
