package testenv

import (
	"context"
	"fmt"
	"sync"
)

// runs holds what Start runs, by its key.
var runs sync.Map // key -> *lifecycle

type lifecycle struct {
	cancel context.CancelFunc
	done   chan error
}

// Start runs run — an elector's Run, the one lifecycle a service starts
// with go el.Run(ctx) — on a goroutine under key (the elector) until
// Stop(ctx, key) ends its context. Starting a key again replaces the
// earlier run, whose context ends.
func Start(key any, run func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	r := &lifecycle{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- run(ctx) }()
	if old, loaded := runs.Swap(key, r); loaded {
		old.(*lifecycle).cancel()
	}
}

// Stop ends the context of what Start runs under key, as a service's
// shutdown does, and waits until ctx ends for it to return; it returns
// what run returned. With nothing running under key it returns nil.
func Stop(ctx context.Context, key any) error {
	v, ok := runs.LoadAndDelete(key)
	if !ok {
		return nil
	}
	r := v.(*lifecycle)
	r.cancel()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("testenv: stopping %v: %w", key, ctx.Err())
	}
}
