package role

import (
	"context"
	"time"

	"github.com/baton-go/baton/testkit/testenv"
)

// Flaky is the test store wrapper that fails every call while cut off
// (a crashed process, or one cut off from the store by the network), for
// the external tests.
type Flaky = flaky

// Launch runs e.Run on a goroutine, as a service does with go el.Run(ctx),
// and returns once e runs (looking every 20 µs: BenchmarkHandover times
// the handover that follows, and a coarser look let the halted master
// rejoin a millisecond late and the next handover meet it still
// starting). Halt ends that Run.
func (e *Elector) Launch() error {
	testenv.Start(e, e.Run)
	for !e.Status().Running {
		time.Sleep(20 * time.Microsecond)
	}
	return nil
}

// Halt ends the Run that Launch started — the end of Run's context, as at
// a service's shutdown — and waits for Run to return, until ctx ends.
func (e *Elector) Halt(ctx context.Context) error { return testenv.Stop(ctx, e) }
