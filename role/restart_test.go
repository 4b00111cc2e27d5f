package role_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/testkit/testenv"
)

// processStore returns a store as a separate process would have it: its
// own go-redis client and the default restart guard (the ttl asked for).
func processStore(t testing.TB, r *testenv.Redis) *redisbackend.Store {
	t.Helper()
	s, err := redisbackend.New(r.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fencedResource accepts a write only with an epoch at least as large as
// the last one it accepted, as a resource guarded by fencing tokens does.
type fencedResource struct {
	last     uint64
	rejected []string
}

func (f *fencedResource) write(who string, epoch uint64, at time.Duration) bool {
	if epoch < f.last {
		if len(f.rejected) < 20 {
			f.rejected = append(f.rejected, fmt.Sprintf("%v: %s's write with epoch %d rejected (last accepted %d)", at, who, epoch, f.last))
		}
		return false
	}
	f.last = epoch
	return true
}

// tenure is one tenure as the sampler saw it first.
type tenure struct {
	who   string
	epoch uint64
	at    time.Duration // since the test began, on the monotonic clock
}

// sampler reads IsMaster of every elector once a millisecond on one
// goroutine: two true in one pass are two masters at the same instant.
// The master it sees writes its tenure's epoch to a fenced resource.
type sampler struct {
	els   []*role.Elector
	names []string
	start time.Time

	stop   chan struct{}
	done   chan struct{}
	writes []atomic.Int64 // by elector: writes the resource accepted

	// written by the sampler's goroutine, read after done is closed
	overlaps []string
	seen     []tenure // in the order first seen
	known    map[tenure]bool
	res      fencedResource
}

func newSampler(start time.Time, els []*role.Elector, names []string) *sampler {
	return &sampler{els: els, names: names, start: start, stop: make(chan struct{}), done: make(chan struct{}),
		writes: make([]atomic.Int64, len(els)), known: make(map[tenure]bool)}
}

func (s *sampler) run() {
	defer close(s.done)
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	masters := make([]int, 0, len(s.els))
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		masters = masters[:0]
		for i, el := range s.els {
			if el.IsMaster() {
				masters = append(masters, i)
			}
		}
		at := time.Since(s.start)
		if len(masters) > 1 && len(s.overlaps) < 20 {
			var who []string
			for _, i := range masters {
				who = append(who, s.names[i])
			}
			s.overlaps = append(s.overlaps, fmt.Sprintf("%v: %v all read IsMaster true", at, who))
		}
		for _, i := range masters {
			_, ep, ok := s.els[i].Tenure()
			if !ok {
				continue // the tenure ended since IsMaster was read
			}
			if k := (tenure{who: s.names[i], epoch: ep}); !s.known[k] {
				s.known[k] = true
				s.seen = append(s.seen, tenure{who: s.names[i], epoch: ep, at: at})
			}
			if s.res.write(s.names[i], ep, at) {
				s.writes[i].Add(1)
			}
		}
	}
}

// halt stops the sampler and waits for it.
func (s *sampler) halt() {
	close(s.stop)
	<-s.done
}

// elections records OnElected calls in the order they ran.
type elections struct {
	mu   sync.Mutex
	list []tenure
}

func (e *elections) option(start time.Time, who string) role.Option {
	return role.OnElected(func(ctx context.Context) {
		ep, _ := role.EpochFromContext(ctx)
		e.mu.Lock()
		defer e.mu.Unlock()
		e.list = append(e.list, tenure{who: who, epoch: ep, at: time.Since(start)})
	})
}

// has reports whether OnElected ran for a tenure with epoch.
func (e *elections) has(epoch uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, tn := range e.list {
		if tn.epoch == epoch {
			return true
		}
	}
	return false
}

func (e *elections) snapshot() []tenure {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]tenure(nil), e.list...)
}

// increasing reports the places where an epoch does not exceed the one
// before it.
func increasing(what string, ts []tenure) []string {
	var bad []string
	for i := 1; i < len(ts); i++ {
		if ts[i].epoch <= ts[i-1].epoch {
			bad = append(bad, fmt.Sprintf("%s: %s's epoch %d at %v after %s's %d at %v",
				what, ts[i].who, ts[i].epoch, ts[i].at, ts[i-1].who, ts[i-1].epoch, ts[i-1].at))
		}
	}
	return bad
}

// Redis restarts without its data while a brand-new instance starts (its
// own store and client, no epoch seen: floor 0), beside three instances
// that ran before, one of them master; every store keeps the default
// restart guard, as processes in production would. Sampled once a
// millisecond, no two instances ever read IsMaster true at once (the old
// master stops at its deadline or when its renewal finds the key gone;
// nobody is granted the role before the old lease could have ended by its
// holder's clock), the epochs of successive tenures strictly increase —
// the new instance's too, which the test makes master in the end — and a
// resource fenced on epochs never rejects the master's write.
func TestRestartEmptyWithNewInstance(t *testing.T) {
	r := testenv.NewRedis(t)
	cfg := role.Config{HeartbeatInterval: 500 * time.Millisecond, HeartbeatExpiration: 2 * time.Second}
	start := time.Now()
	var ev elections
	names := []string{"old-1", "old-2", "old-3", "new"}
	els := make([]*role.Elector, len(names))
	for i, name := range names {
		el, err := role.NewElector(processStore(t, r), id(t, 7500+i), cfg, quiet, ev.option(start, name))
		if err != nil {
			t.Fatal(err)
		}
		els[i] = el
	}
	smp := newSampler(start, els, names)
	go smp.run()
	stopped := false
	halt := func() {
		if !stopped {
			stopped = true
			stopAll(t, els...)
			smp.halt()
		}
	}
	defer halt()

	old := els[:3]
	for _, el := range old {
		if err := el.Launch(); err != nil {
			t.Fatal(err)
		}
	}
	// A fresh server looks like one restarted empty: the first grant
	// waits out the guard too.
	var m *role.Elector
	waitFor(t, "a first master", func() bool { m = master(old); return m != nil })
	// Two graceful handovers, so that epochs have moved on. The stopped
	// master rejoins at once and may win again: what counts is a new
	// tenure. Each master is stopped only once its OnElected has run, so
	// that the callbacks run in the order of the tenures.
	for range 2 {
		waitFor(t, "OnElected of the master", func() bool { return ev.has(m.Status().Epoch) })
		// The ended tenure's epoch, read before the restart: once
		// started, m may win again before a later read.
		prev := m.Status().Epoch
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		err := m.Halt(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Launch(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "a master after a handover", func() bool { m = master(old); return m != nil && m.Status().Epoch > prev }, old...)
	}
	before := m.Status().Epoch

	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := els[3].Launch(); err != nil {
		t.Fatal(err)
	}
	// From here on a timeout is reported with what the sampler saw.
	var bad []string
	if !eventually(func() bool { m = master(els); return m != nil && m.Status().Epoch > before }) {
		bad = append(bad, fmt.Sprintf("no master with an epoch above %d, the last before the restart, within %v", before, patience))
	}
	// Hand the role on until the new instance has it: stop each old
	// master in turn (at most three).
	for len(bad) == 0 && m != els[3] {
		if ep := m.Status().Epoch; !eventually(func() bool { return ev.has(ep) }) {
			bad = append(bad, fmt.Sprintf("OnElected never ran for %v's tenure with epoch %d", m.Status().Instance, ep))
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		err := m.Halt(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		prev := m
		if !eventually(func() bool { m = master(els); return m != nil && m != prev }) {
			bad = append(bad, fmt.Sprintf("no master after %v stopped, within %v", prev.Status().Instance, patience))
		}
	}
	if len(bad) == 0 && !eventually(func() bool { return smp.writes[3].Load() > 0 }) {
		bad = append(bad, "the sampler never saw the new instance as master")
	}
	newEpoch := els[3].Status().Epoch
	halt()

	bad = append(bad, smp.overlaps...)
	bad = append(bad, smp.res.rejected...)
	bad = append(bad, increasing("sampled tenures", smp.seen)...)
	elected := ev.snapshot()
	bad = append(bad, increasing("OnElected", elected)...)
	if newEpoch <= before {
		bad = append(bad, fmt.Sprintf("the new instance's epoch is %d, not above %d, the last before the restart", newEpoch, before))
	}
	if len(bad) > 0 {
		for _, tn := range smp.seen {
			t.Logf("sampled: %v %s epoch %d", tn.at, tn.who, tn.epoch)
		}
		for _, tn := range elected {
			t.Logf("OnElected: %v %s epoch %d", tn.at, tn.who, tn.epoch)
		}
		t.Fatalf("after an empty restart with a new instance:\n%s", joinLines(bad))
	}
}

// eventually is waitFor that reports a timeout instead of failing the
// test.
func eventually(cond func() bool) bool {
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func joinLines(lines []string) string {
	s := ""
	for _, l := range lines {
		s += l + "\n"
	}
	return s
}

// recoveringOnce refuses its first claim as a store does after a data
// loss (Recovering, nobody named) for refusal, as a fresh server's
// restart guard may refuse one newcomer longer than another whose claim
// came a second of uptime later.
type recoveringOnce struct {
	backend.Store
	refusal time.Duration
	done    atomic.Bool
}

func (s *recoveringOnce) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	if s.done.CompareAndSwap(false, true) {
		return backend.Lease{}, &backend.HeldError{Recovering: true, Holder: backend.Lease{Key: key, TTL: s.refusal}}
	}
	return s.Store.Acquire(ctx, key, owner, ttl, floor)
}

// A slave that waits out a refusal of the restart guard while another
// instance is elected and renews learns who the master is: the
// announced renewals of a master it has never identified send it to look,
// instead of extending a wait that began with no master named (the
// cluster demo's slave saw master "" for a whole tenure).
func TestSlaveWaitingOutGuardLearnsMaster(t *testing.T) {
	mem := membackend.New()
	t.Cleanup(func() { mem.Close() })
	cfg := role.Config{HeartbeatInterval: 100 * time.Millisecond, HeartbeatExpiration: 600 * time.Millisecond}
	m := startElector(t, mem, 7521, cfg, nil)
	defer stopAll(t, m)
	waitFor(t, "a master", m.IsMaster, m)
	s := startElector(t, &recoveringOnce{Store: mem, refusal: time.Second}, 7522, cfg, nil)
	defer stopAll(t, s)
	waitFor(t, "the slave names the master", func() bool { return s.Status().Master == m.Status().Instance }, m, s)
}
