package role_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/role"
)

// startElectors starts n electors for instances basePort, basePort+1, ...
// each on a store of its own from newStore, records their tenures in ts,
// stops them when t ends, and waits for a master.
func startElectors(t *testing.T, n, basePort int, cfg role.Config, ts *tenures, newStore func() backend.Store) []*role.Elector {
	t.Helper()
	var els []*role.Elector
	for i := range n {
		els = append(els, startElector(t, newStore(), basePort+i, cfg, ts))
	}
	t.Cleanup(func() { stopAll(t, els...) })
	waitFor(t, "a master", func() bool { return master(els) != nil }, els...)
	return els
}

// grantLoop grants a lock on one key and releases it, over and over, on
// its own goroutine, noting when each grant came and any token that was
// not above the one before (tokens must never go back, faults or not).
type grantLoop struct {
	mu        sync.Mutex
	times     []time.Time
	lastToken uint64
	backwards []string

	stop context.CancelFunc
	done sync.WaitGroup
}

// startGrantLoop starts the loop on store's key; stopAndCheck ends it.
func startGrantLoop(ctx context.Context, store backend.Store, key string) *grantLoop {
	g := &grantLoop{}
	ctx, g.stop = context.WithCancel(ctx)
	g.done.Go(func() {
		for ctx.Err() == nil {
			// A call can hang on a server that just died: bound each.
			cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			l, err := store.Acquire(cctx, key, "loader", time.Second, g.last())
			if err == nil {
				g.granted(l.Token)
				_ = store.Release(cctx, key, "loader", 0)
			} else {
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
		}
	})
	return g
}

func (g *grantLoop) last() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lastToken
}

func (g *grantLoop) granted(token uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if token <= g.lastToken {
		g.backwards = append(g.backwards, fmt.Sprintf("token %d after %d", token, g.lastToken))
	}
	g.lastToken = token
	g.times = append(g.times, time.Now())
}

// count returns how many grants came.
func (g *grantLoop) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.times)
}

// since reports whether a grant came after from.
func (g *grantLoop) since(from time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.times) > 0 && g.times[len(g.times)-1].After(from)
}

// longestGapAfter returns the longest time between two grants that
// ended after from.
func (g *grantLoop) longestGapAfter(from time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	var gap time.Duration
	for i := 1; i < len(g.times); i++ {
		if g.times[i].After(from) {
			gap = max(gap, g.times[i].Sub(g.times[i-1]))
		}
	}
	return gap
}

// stopAndCheck ends the loop and fails t if no lock was granted or a
// token went back.
func (g *grantLoop) stopAndCheck(t *testing.T, what string) {
	t.Helper()
	g.stop()
	g.done.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.times) == 0 {
		t.Error("no lock was granted at all")
	}
	if len(g.backwards) > 0 {
		t.Errorf("lock tokens went back %s: %v", what, g.backwards)
	}
}

// masterSampler looks, every 2 ms, whether any of a set of electors is
// master, and notes each stretch of time without one.
type masterSampler struct {
	mu        sync.Mutex
	stretches [][2]time.Time // start and end of each stretch without a master
	lastSeen  time.Time      // when a sample last found a master

	stop context.CancelFunc
	done sync.WaitGroup
}

// startMasterSampler starts sampling els; close ends it.
func startMasterSampler(ctx context.Context, els []*role.Elector) *masterSampler {
	s := &masterSampler{}
	ctx, s.stop = context.WithCancel(ctx)
	s.done.Go(func() {
		var since time.Time // start of the current stretch without a master
		for ctx.Err() == nil {
			now := time.Now()
			has := false
			for _, el := range els {
				has = has || el.IsMaster()
			}
			s.mu.Lock()
			switch {
			case !has && since.IsZero():
				since = now
			case has && !since.IsZero():
				s.stretches = append(s.stretches, [2]time.Time{since, now})
				since = time.Time{}
			}
			if has {
				s.lastSeen = now
			}
			s.mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	})
	return s
}

// longestWithoutAfter returns the longest stretch without a master that
// ended after from. Call it once a master is back: it first waits for a
// sample that finds one, so that the stretch that just ended is noted.
func (s *masterSampler) longestWithoutAfter(t testing.TB, from time.Time) time.Duration {
	t.Helper()
	back := time.Now()
	waitFor(t, "the sampler to see the master", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.lastSeen.After(back)
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, g := range s.stretches {
		if g[1].After(from) {
			d = max(d, g[1].Sub(g[0]))
		}
	}
	return d
}

func (s *masterSampler) close() {
	s.stop()
	s.done.Wait()
}
