package schedlock

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// runKey carries a run in the contexts that Context and Run hand out.
type runKey struct{}

// registry finds the run of a gocron job from the job's context. gocron
// passes one context to every run of a job, to Gate.Lock and to the task,
// so the context alone names the job, not the run. What names the run is
// the goroutine: gocron calls Lock, the task and Unlock of one run on one
// goroutine (executor.go, runJob), and a goroutine runs one run at a time.
// Runs are indexed by the context's Done channel, so contexts derived with
// values still lead to their runs, and each run records the goroutine
// that called Lock. Entries live from Lock to Unlock.
type registry struct {
	mu sync.Mutex
	m  map[<-chan struct{}][]*run
}

var inflight = registry{m: make(map[<-chan struct{}][]*run)}

// add registers r, admitted on the calling goroutine, under ctx.
func (reg *registry) add(ctx context.Context, r *run) {
	if ctx == nil {
		return
	}
	d := ctx.Done()
	if d == nil {
		return // a context that is never cancelled cannot name a run
	}
	r.gid = goid()
	reg.mu.Lock()
	defer reg.mu.Unlock()
	r.regKey = d
	reg.m[d] = append(reg.m[d], r)
}

func (reg *registry) remove(r *run) {
	if r.regKey == nil {
		return
	}
	reg.mu.Lock()
	defer reg.mu.Unlock()
	list := reg.m[r.regKey]
	for i, x := range list {
		if x == r {
			list = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(reg.m, r.regKey)
	} else {
		reg.m[r.regKey] = list
	}
}

// find returns the run ctx belongs to: the one it carries; else, among
// the runs in flight under its Done channel, the one admitted on the
// calling goroutine, or the only one. When several runs of the job are in
// flight and none was admitted on this goroutine, it cannot tell which is
// the caller's and fails with errOverlap rather than answer for another
// run. ErrNoRun: ctx leads to no run in flight.
func (reg *registry) find(ctx context.Context) (*run, error) {
	if ctx == nil {
		return nil, ErrNoRun
	}
	if r, ok := ctx.Value(runKey{}).(*run); ok {
		return r, nil
	}
	d := ctx.Done()
	if d == nil {
		return nil, ErrNoRun
	}
	reg.mu.Lock()
	list := reg.m[d]
	if len(list) <= 1 {
		defer reg.mu.Unlock()
		if len(list) == 0 {
			return nil, ErrNoRun
		}
		return list[0], nil
	}
	runs := append([]*run(nil), list...)
	reg.mu.Unlock()
	gid := goid()
	var mine *run
	for _, r := range runs {
		if r.gid == gid {
			if mine != nil {
				return nil, overlapError(runs)
			}
			mine = r
		}
	}
	if mine == nil {
		return nil, overlapError(runs)
	}
	return mine, nil
}

func overlapError(runs []*run) error {
	return fmt.Errorf("%w: %d runs of job %q are in flight and share gocron's job context, and none of them runs on this goroutine, "+
		"so the context cannot say which run it is: call schedlock.Context(ctx) in the task itself and pass "+
		"the context it returns on, or give the job gocron.WithSingletonMode so that its runs never overlap",
		errOverlap, len(runs), runs[0].job)
}

// goid returns the calling goroutine's ID, read from the first line of its
// stack trace ("goroutine 42 [running]:"). It costs about a microsecond;
// the registry reads it once per gocron run, and again only to tell
// overlapping runs apart.
func goid() uint64 {
	var buf [64]byte
	s := buf[:runtime.Stack(buf[:], false)]
	const prefix = "goroutine "
	if len(s) < len(prefix) {
		return 0
	}
	var id uint64
	for _, c := range s[len(prefix):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
