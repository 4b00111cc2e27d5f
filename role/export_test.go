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
// and returns once e runs. Halt ends that Run.
func (e *Elector) Launch() error {
	testenv.Start(e, e.Run)
	for !e.Status().Running {
		time.Sleep(time.Millisecond)
	}
	return nil
}

// Halt ends the Run that Launch started — the end of Run's context, as at
// a service's shutdown — and waits for Run to return, until ctx ends.
func (e *Elector) Halt(ctx context.Context) error { return testenv.Stop(ctx, e) }
