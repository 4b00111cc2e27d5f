package role

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Flaky is the test store wrapper that fails every call while cut off
// (a crashed process, or one cut off from the store by the network), for
// the external tests.
type Flaky = flaky

// runs holds the Run each test started with Launch, by elector.
var runs sync.Map // *Elector -> *testRun

type testRun struct {
	cancel context.CancelFunc
	done   chan error
}

// Launch runs e.Run on a goroutine, as a service does with go el.Run(ctx),
// and returns once e runs, or Run's error if it returned at once (a second
// Run). Halt ends that Run.
func (e *Elector) Launch() error {
	ctx, cancel := context.WithCancel(context.Background())
	r := &testRun{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- e.Run(ctx) }()
	for !e.Status().Running {
		select {
		case err := <-r.done:
			cancel()
			return err
		case <-time.After(time.Millisecond):
		}
	}
	if old, loaded := runs.Swap(e, r); loaded {
		old.(*testRun).cancel()
	}
	return nil
}

// Halt ends the Run that Launch started — the end of Run's context, as at
// a service's shutdown — and waits for Run to return, until ctx ends.
func (e *Elector) Halt(ctx context.Context) error {
	v, ok := runs.LoadAndDelete(e)
	if !ok {
		return nil
	}
	r := v.(*testRun)
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("role: stopping elector %s: %w", e.idText, ctx.Err())
	}
}
