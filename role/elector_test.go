package role

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/instanceid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const patience = 10 * time.Second // generous deadline for events

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mustID(t testing.TB, port int) instanceid.ID {
	t.Helper()
	id, err := instanceid.New("10.0.0.1", "acme", "billing", port)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// eventually polls cond until it holds or the patience runs out.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// flaky wraps a store and fails every call while down is set, as a store
// behind a cut network would.
type flaky struct {
	backend.Store
	down atomic.Bool
}

var errDown = errors.New("store unreachable (test)")

// Cut cuts the store off (down) or reconnects it.
func (f *flaky) Cut(down bool) { f.down.Store(down) }

func (f *flaky) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	if f.down.Load() {
		return backend.Lease{}, errDown
	}
	return f.Store.Acquire(ctx, key, owner, ttl, floor)
}

func (f *flaky) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	if f.down.Load() {
		return backend.Lease{}, errDown
	}
	return f.Store.Renew(ctx, key, owner, ttl)
}

func (f *flaky) Release(ctx context.Context, key, owner string, keepFor time.Duration) error {
	if f.down.Load() {
		return errDown
	}
	return f.Store.Release(ctx, key, owner, keepFor)
}

func (f *flaky) Watch(ctx context.Context, key string) (backend.Watch, error) {
	if f.down.Load() {
		return nil, errDown
	}
	return f.Store.Watch(ctx, key)
}

// quiet keeps the elector's log out of the test output.
var quiet = WithLogger(slog.New(slog.DiscardHandler))

// leaseOnly hides a store's member list, so that fake-clock tests count
// only the timers of the election itself.
type leaseOnly struct{ backend.Store }

var fast = Config{HeartbeatInterval: time.Second, HeartbeatExpiration: 3 * time.Second, SafetyMargin: 200 * time.Millisecond}

// newStore returns an in-memory store closed after the test's electors
// stopped (cleanups run last-registered first).
func newStore(t *testing.T, opts ...membackend.Option) *membackend.Store {
	s := membackend.New(opts...)
	t.Cleanup(func() { s.Close() })
	return s
}

func newStoreB(b *testing.B) *membackend.Store {
	s := membackend.New()
	b.Cleanup(func() { s.Close() })
	return s
}

func start(t *testing.T, el *Elector) {
	t.Helper()
	if err := el.Launch(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		if err := el.Halt(ctx); err != nil {
			t.Error(err)
		}
	})
}

func TestFirstElectorBecomesMaster(t *testing.T) {
	store := newStore(t)
	var elected atomic.Uint64
	el, err := NewElector(store, mustID(t, 8080), fast, quiet, OnElected(func(ctx context.Context) {
		ep, _ := EpochFromContext(ctx)
		elected.Store(ep)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if el.IsMaster() {
		t.Fatal("master before Start")
	}
	start(t, el)
	eventually(t, "elected", el.IsMaster)
	eventually(t, "OnElected called", func() bool { return elected.Load() != 0 })
	if el.Status().Epoch != elected.Load() || el.Status().Master != "10.0.0.1:acme:billing:8080" {
		t.Fatalf("epoch %d master %q; want OnElected's epoch %d and own ID", el.Status().Epoch, el.Status().Master, elected.Load())
	}
	l, err := store.Get(context.Background(), "{acme:billing}:role")
	if err != nil || !strings.HasPrefix(l.Owner, "10.0.0.1:acme:billing:8080#") {
		t.Fatalf("role key = %+v, %v; want owned by the instance ID plus nonce", l, err)
	}
	if ok, err := el.IsMasterOf(context.Background(), "billing", "10.0.0.1:acme:billing:8080"); !ok || err != nil {
		t.Fatalf("IsMasterOf(self) = %v, %v", ok, err)
	}
	if ok, err := el.IsMasterOf(context.Background(), "billing", "10.0.0.2:acme:billing:8080"); ok || err != nil {
		t.Fatalf("IsMasterOf(other) = %v, %v", ok, err)
	}
	if ok, err := el.IsMasterOf(context.Background(), "other-app", "10.0.0.1:acme:billing:8080"); ok || err != nil {
		t.Fatalf("IsMasterOf(other app) = %v, %v", ok, err)
	}
}

// Many electors over many graceful handovers: when a tenure begins, the
// context of every earlier tenure is already cancelled (the old master
// gave up before the new one was granted), and every tenure has its own
// epoch.
func TestOneMasterAcrossHandovers(t *testing.T) {
	store := newStore(t)
	const n = 5
	var (
		mu       sync.Mutex
		tenures  []context.Context
		epochs   []uint64
		overlaps []string
		electors []*Elector
	)
	for i := range n {
		el, err := NewElector(store, mustID(t, 8000+i), fast, quiet,
			OnElected(func(ctx context.Context) {
				ep, _ := EpochFromContext(ctx)
				mu.Lock()
				defer mu.Unlock()
				for j, old := range tenures {
					// Callbacks of different electors run on different
					// goroutines, so an earlier tenure's may come later:
					// compare by epoch.
					if epochs[j] < ep && old.Err() == nil {
						overlaps = append(overlaps, fmt.Sprintf("tenure %d (epoch %d) began while tenure %d (epoch %d) was live", len(tenures), ep, j, epochs[j]))
					}
				}
				tenures = append(tenures, ctx)
				epochs = append(epochs, ep)
			}))
		if err != nil {
			t.Fatal(err)
		}
		electors = append(electors, el)
		if err := el.Launch(); err != nil {
			t.Fatal(err)
		}
	}
	current := func() []*Elector {
		var ms []*Elector
		for _, el := range electors {
			if el.IsMaster() {
				ms = append(ms, el)
			}
		}
		return ms
	}
	for round := range n {
		eventually(t, fmt.Sprintf("a master in round %d", round), func() bool { return len(current()) == 1 })
		ms := current()
		if len(ms) != 1 {
			t.Fatalf("round %d: %d masters", round, len(ms))
		}
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		if err := ms[0].Halt(ctx); err != nil {
			t.Fatal(err)
		}
		cancel()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(overlaps) > 0 {
		t.Fatal(overlaps)
	}
	if len(epochs) != n {
		t.Fatalf("%d tenures, want %d", len(epochs), n)
	}
	// Callbacks of different electors may run out of order; the epochs
	// themselves must be distinct: one per tenure.
	slices.Sort(epochs)
	for i := 1; i < len(epochs); i++ {
		if epochs[i] <= epochs[i-1] {
			t.Fatalf("two tenures share an epoch: %v", epochs)
		}
	}
}

// A stopped master releases the role and a waiting slave is woken by the
// release, not by a timer: the fake clock never moves in this test.
func TestGracefulHandoverWakesSlave(t *testing.T) {
	clk := clock.NewFake(t0)
	store := newStore(t, membackend.WithClock(clk))
	a, _ := NewElector(store, mustID(t, 1), fast, quiet, withClock(clk))
	b, _ := NewElector(store, mustID(t, 2), fast, quiet, withClock(clk))
	start(t, a)
	eventually(t, "a elected", a.IsMaster)
	start(t, b)
	eventually(t, "b sees a as master", func() bool { return b.Status().Master == a.Status().Instance })
	aEpoch := a.Status().Epoch
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := a.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	if a.IsMaster() {
		t.Fatal("a still master after Stop")
	}
	eventually(t, "b elected without the clock moving", b.IsMaster)
	if b.Status().Epoch <= aEpoch {
		t.Fatalf("b's epoch = %d, want one above a's %d", b.Status().Epoch, aEpoch)
	}
}

// A master cut off from the store stops calling itself master at
// sent + TTL - margin, before the store can expire its key, and a slave
// claims the role once the key expired.
func TestStepDownBeforeExpiryAndFailover(t *testing.T) {
	clk := clock.NewFake(t0)
	store := newStore(t, membackend.WithClock(clk))
	cut := &flaky{Store: store}
	var tenureEnded atomic.Bool
	a, _ := NewElector(leaseOnly{cut}, mustID(t, 1), fast, quiet, withClock(clk), OnElected(func(ctx context.Context) {
		<-ctx.Done()
		tenureEnded.Store(true)
	}))
	b, _ := NewElector(leaseOnly{store}, mustID(t, 2), fast, quiet, withClock(clk))
	start(t, a)
	eventually(t, "a elected", a.IsMaster)
	start(t, b)
	eventually(t, "b sees a", func() bool { return b.Status().Master == a.Status().Instance })
	// a: heartbeat sleep + deadline timer; store: expiry timer; b: wait.
	clk.AwaitTimers(t, 4)

	cut.down.Store(true)
	deadline := fast.HeartbeatExpiration - fast.SafetyMargin
	clk.Advance(deadline - time.Millisecond)
	if !a.IsMaster() {
		t.Fatal("a stepped down before its deadline")
	}
	clk.Advance(time.Millisecond)
	if a.IsMaster() {
		t.Fatal("a still master at its deadline")
	}
	eventually(t, "a's tenure context cancelled", tenureEnded.Load)
	if _, err := store.Get(context.Background(), a.Status().Key); err != nil {
		t.Fatalf("the key should still be held on the store when a steps down: %v", err)
	}
	if b.IsMaster() {
		t.Fatal("b master while a's key is live")
	}
	// The key expires at TTL; b's next claim is scheduled at its PTTL plus
	// at most 20 ms of jitter.
	clk.Advance(fast.SafetyMargin + 30*time.Millisecond)
	eventually(t, "b elected after the key expired", b.IsMaster)
	if b.Status().Epoch <= a.Status().Epoch {
		t.Fatalf("b's epoch = %d, want one above a's %d", b.Status().Epoch, a.Status().Epoch)
	}
	// The stale master comes back: it cannot renew, release or shorten b's
	// lease, and it does not become master again.
	l, err := store.Get(context.Background(), a.Status().Key)
	if err != nil {
		t.Fatal(err)
	}
	cut.Cut(false)
	if _, err := store.Renew(context.Background(), a.Status().Key, a.owner, time.Millisecond); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("the stale master's renewal: %v, want ErrNotHeld", err)
	}
	if err := store.Release(context.Background(), a.Status().Key, a.owner, 0); !errors.Is(err, backend.ErrNotHeld) {
		t.Errorf("the stale master's release: %v, want ErrNotHeld", err)
	}
	if after, err := store.Get(context.Background(), a.Status().Key); err != nil || after != l {
		t.Errorf("b's lease changed: %+v -> %+v, %v", l, after, err)
	}
	// a, back in reach, finds b's lease at its next try (its back-off is
	// at most a heartbeat interval) and follows it.
	clk.AwaitTimers(t, 4) // a: back-off; b: heartbeat, deadline; store: expiry
	clk.Advance(fast.HeartbeatInterval)
	eventually(t, "a sees b as master", func() bool { return a.Status().Master == b.Status().Instance })
	if a.IsMaster() || !b.IsMaster() {
		t.Fatalf("after the stale master came back: a %v, b %v", a.IsMaster(), b.IsMaster())
	}
}

// A store that loses its data (a Redis restarted empty) costs the master
// its tenure, and the next tenure's epoch is still larger.
func TestStoreLosesDataEpochStillIncreases(t *testing.T) {
	clk := clock.NewFake(t0)
	store := newStore(t, membackend.WithClock(clk))
	a, _ := NewElector(leaseOnly{store}, mustID(t, 1), fast, quiet, withClock(clk))
	start(t, a)
	eventually(t, "a elected", a.IsMaster)
	first := a.Status().Epoch
	for range 3 { // raise the epoch a little with extra tenures
		clk.AwaitTimers(t, 3)
		ep := a.Status().Epoch
		store.Reset()
		clk.Advance(fast.HeartbeatInterval)
		eventually(t, "re-elected with a larger epoch", func() bool { return a.IsMaster() && a.Status().Epoch > ep })
	}
	if a.Status().Epoch <= first {
		t.Fatalf("epoch after three data losses = %d, want one above the first tenure's %d", a.Status().Epoch, first)
	}
}

func TestRenewalsKeepMastership(t *testing.T) {
	clk := clock.NewFake(t0)
	store := newStore(t, membackend.WithClock(clk))
	a, _ := NewElector(leaseOnly{store}, mustID(t, 1), fast, quiet, withClock(clk))
	start(t, a)
	eventually(t, "a elected", a.IsMaster)
	epoch := a.Status().Epoch
	for i := range 20 {
		clk.AwaitTimers(t, 3)
		clk.Advance(fast.HeartbeatInterval)
		if !a.IsMaster() {
			t.Fatalf("lost mastership after %d heartbeats", i+1)
		}
	}
	if a.Status().Epoch != epoch {
		t.Fatalf("epoch changed by renewals: %d, was %d", a.Status().Epoch, epoch)
	}
}

func TestCallbacksInOrder(t *testing.T) {
	store := newStore(t)
	var mu sync.Mutex
	var got []string
	rec := func(s string) {
		mu.Lock()
		got = append(got, s)
		mu.Unlock()
	}
	id := mustID(t, 1)
	a, _ := NewElector(store, id, fast, quiet,
		OnElected(func(context.Context) { time.Sleep(20 * time.Millisecond); rec("elected") }),
		OnMasterChange(func(m string) { rec("master=" + m) }),
		OnDemoted(func() { rec("demoted") }))
	if err := a.Launch(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "elected", a.IsMaster)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := a.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"elected", "master=" + id.String(), "demoted"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("callbacks %v, want %v", got, want)
	}
}

func TestDuplicateInstanceIDIsReported(t *testing.T) {
	store := newStore(t)
	id := mustID(t, 1)
	a, _ := NewElector(store, id, fast, quiet)
	b, _ := NewElector(store, id, fast, quiet)
	start(t, a)
	eventually(t, "a elected", a.IsMaster)
	start(t, b)
	eventually(t, "b reports the duplicate", func() bool { return b.Status().Duplicate != "" })
	if b.IsMaster() {
		t.Fatal("two processes with one ID are both master")
	}
}

// A duplicate is reported while the other process lives and for a while
// after, not until this one restarts: once the other has been gone for the
// role TTL and two heartbeat intervals, Status no longer names it, and a
// new one with the same ID is reported again.
func TestDuplicateReportEndsWhenTheOtherStops(t *testing.T) {
	store := newStore(t)
	id := mustID(t, 1)
	var reports atomic.Int32
	a, _ := NewElector(store, id, fast, quiet)
	b, _ := NewElector(store, id, fast, quiet, OnDuplicateID(func(string) { reports.Add(1) }))
	if err := a.Launch(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a elected", a.IsMaster)
	start(t, b)
	eventually(t, "b reports the duplicate", func() bool { return b.Status().Duplicate != "" })
	if seen := b.Status().DuplicateSeen; seen.IsZero() {
		t.Fatal("Status names a duplicate but not when it was seen")
	}

	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := a.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	eventually(t, "b's report of a ends", func() bool { return b.Status().Duplicate == "" })
	if gone := time.Since(stopped); gone < fast.HeartbeatExpiration {
		t.Errorf("the report ended %v after the other process stopped; want it kept for at least the role TTL (%v)", gone, fast.HeartbeatExpiration)
	}
	if st := b.Status(); !st.DuplicateSeen.IsZero() {
		t.Errorf("Status names no duplicate but says one was seen at %v", st.DuplicateSeen)
	}
	if n := reports.Load(); n != 1 {
		t.Errorf("OnDuplicateID ran %d times for one other process; want once", n)
	}

	c, _ := NewElector(store, id, fast, quiet)
	start(t, c)
	eventually(t, "b reports the new duplicate", func() bool { return b.Status().Duplicate != "" && reports.Load() == 2 })
}

func TestDisabledWritesNothing(t *testing.T) {
	store := newStore(t)
	cfg := fast
	cfg.Disabled = true
	a, err := NewElector(store, mustID(t, 1), cfg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	eventually(t, "running", func() bool { return a.Status().Running })
	if a.IsMaster() {
		t.Fatal("disabled elector is master")
	}
	if _, err := store.Get(context.Background(), a.Status().Key); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("disabled elector wrote the role key: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestRunTwiceFails(t *testing.T) {
	store := newStore(t)
	a, _ := NewElector(store, mustID(t, 1), fast, quiet)
	start(t, a)
	if err := a.Run(context.Background()); !errors.Is(err, errRunning) {
		t.Fatalf("second Run: %v, want errRunning", err)
	}
}

func TestNewElectorRejectsBadInput(t *testing.T) {
	store := newStore(t)
	tests := []struct {
		name  string
		store backend.Store
		id    instanceid.ID
		cfg   Config
		want  string
	}{
		{"nil store", nil, mustID(t, 1), Config{}, "nil store"},
		{"zero ID", store, instanceid.ID{}, Config{}, "instanceid"},
		{"interval too long", store, mustID(t, 1), Config{HeartbeatInterval: 30 * time.Second}, "less than half"},
		{"margin too long", store, mustID(t, 1), Config{SafetyMargin: 20 * time.Second}, "SafetyMargin"},
		{"negative TTL", store, mustID(t, 1), Config{HeartbeatExpiration: -time.Second}, "HeartbeatExpiration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewElector(tt.store, tt.id, tt.cfg, quiet)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one mentioning %q", err, tt.want)
			}
		})
	}
}

func TestPackageDefault(t *testing.T) {
	t.Cleanup(func() { SetDefault(nil) })
	if IsMaster() {
		t.Fatal("IsMaster true without a default")
	}
	store := newStore(t)
	a, _ := NewElector(store, mustID(t, 1), fast, quiet)
	SetDefault(a)
	start(t, a)
	eventually(t, "default elector elected", IsMaster)
}

func TestMembersListsLiveInstances(t *testing.T) {
	store := newStore(t)
	var els []*Elector
	for i := range 3 {
		el, err := NewElector(store, mustID(t, 9000+i), fast, quiet)
		if err != nil {
			t.Fatal(err)
		}
		start(t, el)
		els = append(els, el)
	}
	eventually(t, "a master", func() bool { return slices.ContainsFunc(els, (*Elector).IsMaster) })
	var ms []Member
	eventually(t, "three members", func() bool {
		var err error
		ms, err = els[0].Members(context.Background())
		return err == nil && len(ms) == 3
	})
	masters, selves := 0, 0
	for i, m := range ms {
		if m.ID != mustID(t, 9000+i).String() || !strings.HasPrefix(m.Owner, m.ID+"#") {
			t.Errorf("member %d = %+v", i, m)
		}
		if m.StartedAt.IsZero() {
			t.Errorf("member %d has no start time", i)
		}
		if m.Master {
			masters++
		}
		if m.Self {
			selves++
		}
	}
	if masters != 1 || selves != 1 {
		t.Fatalf("members %+v: %d masters and %d selves, want 1 and 1", ms, masters, selves)
	}
	// A stopped instance leaves the list at once.
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := els[2].Halt(ctx); err != nil {
		t.Fatal(err)
	}
	ms, err := els[0].Members(ctx)
	if err != nil || len(ms) != 2 {
		t.Fatalf("after a Stop: %+v, %v; want 2 members", ms, err)
	}
}

// Member data is informational and may come from anyone: an entry whose
// data does not decode has no start time, even when its first field did.
func TestMembersForeignDataHasNoStartTime(t *testing.T) {
	store := newStore(t)
	el, err := NewElector(store, mustID(t, 1), fast, quiet)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	for name, data := range map[string]string{
		"clean#1":   `{"started":"2026-04-12T07:30:00Z"}`,
		"foreign#1": `{"started":"2026-04-12T07:30:00Z","started":1}`,
	} {
		m := backend.Member{Name: name, Identity: mustID(t, 2).String(), Data: []byte(data)}
		if _, err := store.Heartbeat(ctx, backend.AppKey("acme", "billing", "members"), m, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := el.Members(ctx)
	if err != nil || len(ms) != 2 {
		t.Fatalf("Members = %+v, %v; want the two entries", ms, err)
	}
	if want := time.Date(2026, 4, 12, 7, 30, 0, 0, time.UTC); ms[0].Owner != "clean#1" || !ms[0].StartedAt.Equal(want) {
		t.Errorf("member %+v; want clean#1 started at %v", ms[0], want)
	}
	if ms[1].Owner != "foreign#1" || !ms[1].StartedAt.IsZero() {
		t.Errorf("member %+v; want foreign#1 without a start time", ms[1])
	}
}

// Members on a store that keeps no member list says so, with
// errors.ErrUnsupported, naming the store.
func TestMembersWithoutRegistry(t *testing.T) {
	a, _ := NewElector(leaseOnly{newStore(t)}, mustID(t, 1), fast, quiet)
	_, err := a.Members(context.Background())
	if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), "keeps no member list") {
		t.Fatalf("Members on a store without a registry: %v; want errors.ErrUnsupported", err)
	}
}

// Two slaves that share an instance ID find each other through the member
// list, even though neither is master.
func TestDuplicateSlavesAreReported(t *testing.T) {
	store := newStore(t)
	master, _ := NewElector(store, mustID(t, 1), fast, quiet)
	start(t, master)
	eventually(t, "master elected", master.IsMaster)
	var reported atomic.Int32
	hook := OnDuplicateID(func(string) { reported.Add(1) })
	a, _ := NewElector(store, mustID(t, 2), fast, quiet, hook)
	b, _ := NewElector(store, mustID(t, 2), fast, quiet, hook)
	start(t, a)
	eventually(t, "a heartbeated", func() bool {
		ms, _ := master.Members(context.Background())
		return len(ms) == 2
	})
	start(t, b)
	eventually(t, "b reports a", func() bool { return b.Status().Duplicate != "" })
	if got := b.Status().Duplicate; !strings.HasPrefix(got, mustID(t, 2).String()+"#") {
		t.Fatalf("duplicate = %q", got)
	}
	// OnDuplicateID runs on the callback goroutine, after Status names
	// the duplicate.
	eventually(t, "OnDuplicateID called", func() bool { return reported.Load() > 0 })
	if master.Status().Duplicate != "" {
		t.Fatalf("the master, whose ID is unique, reports a duplicate: %q", master.Status().Duplicate)
	}
}

// counting counts the calls an elector makes to its store.
type counting struct {
	backend.Store
	acquires, renews atomic.Int64
}

func (c *counting) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	c.acquires.Add(1)
	return c.Store.Acquire(ctx, key, owner, ttl, floor)
}

func (c *counting) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	c.renews.Add(1)
	return c.Store.Renew(ctx, key, owner, ttl)
}

// While the master renews, a slave asks the store nothing: each renewal is
// announced with its TTL and the slave sleeps through it. On the fake
// clock, so that a busy machine cannot delay a renewal past the TTL.
func TestSlaveSleepsThroughRenewals(t *testing.T) {
	clk := clock.NewFake(t0)
	store := newStore(t, membackend.WithClock(clk))
	cfg := Config{HeartbeatInterval: 50 * time.Millisecond, HeartbeatExpiration: time.Second, SafetyMargin: 20 * time.Millisecond}
	ma, sl := &counting{Store: leaseOnly{store}}, &counting{Store: leaseOnly{store}}
	a, _ := NewElector(ma, mustID(t, 1), cfg, quiet, withClock(clk))
	b, _ := NewElector(sl, mustID(t, 2), cfg, quiet, withClock(clk))
	start(t, a)
	eventually(t, "a elected", a.IsMaster)
	start(t, b)
	eventually(t, "b sees a", func() bool { return b.Status().Master == a.Status().Instance })
	before, renewed := sl.acquires.Load(), ma.renews.Load()
	// 40 renewals span two TTLs: a slave that polled at the key's TTL
	// would have asked at least twice.
	for i := range 40 {
		clk.AwaitTimers(t, 4) // a: heartbeat, deadline; store: expiry; b: wait
		clk.Advance(cfg.HeartbeatInterval)
		eventually(t, fmt.Sprintf("renewal %d", i+1), func() bool { return ma.renews.Load() > renewed+int64(i) })
	}
	if got := sl.acquires.Load() - before; got != 0 {
		t.Fatalf("the slave made %d claims while the master renewed", got)
	}
	if !a.IsMaster() || b.IsMaster() {
		t.Fatal("roles changed")
	}
}

// When the store loses its data, a slave does not grab the role while the
// old master may still believe in its lease: the old master takes it back
// (with a new epoch) at its next heartbeat.
func TestDataLossDoesNotMakeTwoMasters(t *testing.T) {
	clk := clock.NewFake(t0)
	store := newStore(t, membackend.WithClock(clk))
	a, _ := NewElector(leaseOnly{store}, mustID(t, 1), fast, quiet, withClock(clk))
	b, _ := NewElector(leaseOnly{store}, mustID(t, 2), fast, quiet, withClock(clk))
	start(t, a)
	eventually(t, "a elected", a.IsMaster)
	start(t, b)
	eventually(t, "b sees a", func() bool { return b.Status().Master == a.Status().Instance })
	clk.AwaitTimers(t, 4) // a: heartbeat, deadline; store: expiry; b: wait
	before := a.Status().Epoch
	store.Reset()
	// b was told the key may be free; it must keep waiting.
	clk.Advance(fast.HeartbeatInterval)
	eventually(t, "a re-elected with a new epoch", func() bool { return a.IsMaster() && a.Status().Epoch > before })
	if b.IsMaster() {
		t.Fatal("the slave claimed the role while the old master's lease could still be believed")
	}
}

func TestTenureContext(t *testing.T) {
	store := newStore(t)
	a, _ := NewElector(store, mustID(t, 1), fast, quiet)
	if _, _, ok := a.Tenure(); ok {
		t.Fatal("a tenure before Start")
	}
	if err := a.Launch(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "elected", a.IsMaster)
	ctx, epoch, ok := a.Tenure()
	if !ok || epoch == 0 || epoch != a.Status().Epoch || ctx.Err() != nil {
		t.Fatalf("Tenure() = %v, %d, %v; want a live tenure of epoch %d", ctx, epoch, ok, a.Status().Epoch)
	}
	if ep, _ := EpochFromContext(ctx); ep != epoch {
		t.Fatalf("the tenure context carries epoch %d", ep)
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := a.Halt(stopCtx); err != nil {
		t.Fatal(err)
	}
	if ctx.Err() == nil {
		t.Fatal("the tenure context is live after Stop")
	}
	if _, _, ok := a.Tenure(); ok {
		t.Fatal("a tenure after Stop")
	}
}
