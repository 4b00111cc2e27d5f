package schedlock

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
)

// runKey carries a run in the contexts that Context and Run hand out.
type runKey struct{}

// registry finds the run of a gocron job from the job's context (see the
// package doc, While a job runs), indexed by the context's Done channel so
// that contexts derived with values still lead to it, from Lock to Unlock.
type registry struct {
	mu sync.Mutex
	m  map[<-chan struct{}][]*run
}

var inflight = registry{m: make(map[<-chan struct{}][]*run)}

// add registers r, admitted on the calling goroutine, under ctx.
func (reg *registry) add(ctx context.Context, r *run) {
	if ctx == nil || ctx.Done() == nil {
		return // a context that is never cancelled cannot name a run
	}
	r.gid = goid()
	reg.mu.Lock()
	defer reg.mu.Unlock()
	r.regKey = ctx.Done()
	reg.m[r.regKey] = append(reg.m[r.regKey], r)
}

func (reg *registry) remove(r *run) {
	if r.regKey == nil {
		return
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	if list := slices.DeleteFunc(reg.m[r.regKey], func(x *run) bool { return x == r }); len(list) > 0 {
		reg.m[r.regKey] = list
	} else {
		delete(reg.m, r.regKey)
	}
}

// find returns the run ctx belongs to: the one it carries; else, among
// the runs in flight under its Done channel, the only one or the one
// admitted on the calling goroutine. When several are in flight and none
// was admitted here, it fails with errOverlap rather than answer for
// another run; with ErrNoRun when ctx leads to no run in flight.
func (reg *registry) find(ctx context.Context) (*run, error) {
	if ctx == nil {
		return nil, ErrNoRun
	}
	if r, ok := ctx.Value(runKey{}).(*run); ok {
		return r, nil
	}
	reg.mu.Lock()
	runs := reg.m[ctx.Done()]
	if len(runs) == 1 {
		defer reg.mu.Unlock()
		return runs[0], nil
	}
	runs = slices.Clone(runs)
	reg.mu.Unlock()
	if len(runs) == 0 {
		return nil, ErrNoRun
	}
	gid := goid()
	if i := slices.IndexFunc(runs, func(r *run) bool { return r.gid == gid }); i >= 0 &&
		!slices.ContainsFunc(runs[i+1:], func(r *run) bool { return r.gid == gid }) {
		return runs[i], nil
	}
	return nil, fmt.Errorf("%w: %d runs of job %q are in flight and share gocron's job context, and none of them runs on this goroutine, "+
		"so the context cannot say which run it is: call schedlock.Context(ctx) in the task itself and pass "+
		"the context it returns on, or give the job gocron.WithSingletonMode so that its runs never overlap",
		errOverlap, len(runs), runs[0].job)
}

// goid returns the calling goroutine's ID, read from the first line of its
// stack trace ("goroutine 42 [running]:"), in about a microsecond.
func goid() uint64 {
	var buf [64]byte
	s := bytes.TrimPrefix(buf[:runtime.Stack(buf[:], false)], []byte("goroutine "))
	s, _, _ = bytes.Cut(s, []byte(" "))
	id, _ := strconv.ParseUint(string(s), 10, 64)
	return id
}
