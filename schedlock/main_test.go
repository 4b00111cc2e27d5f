package schedlock_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/testkit/storetest"
	"github.com/baton-go/baton/testkit/testenv"
)

// server is the package's private redis-server; every test uses its own
// app name, so keys never collide.
var server *testenv.Redis

func TestMain(m *testing.M) { testenv.MainWithRedis(m, &server) }

const patience = 15 * time.Second

var (
	discard    = slog.New(slog.DiscardHandler)
	quiet      = schedlock.WithLogger(discard)
	quietRole  = role.WithLogger(discard)
	appCounter atomic.Int64
)

// fastRole elects within milliseconds, and a stopped master hands the role
// over at once (its release wakes the slaves). The long TTL gives each
// renewal seconds to land, so that on a busy machine a master keeps the
// role until the test stops it: the tests here never wait for a key to
// expire.
var fastRole = role.Config{HeartbeatInterval: 100 * time.Millisecond, HeartbeatExpiration: 10 * time.Second}

// storeKinds are the stores every behavioural test runs on: the shared
// in-memory store and the package's redis-server, and a Consul agent of
// the fleet's own (testkit/storetest).
var storeKinds = []string{"mem", "redis", "consul"}

func forEachStore(t *testing.T, f func(t *testing.T, kind string)) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			storetest.SkipUnlinked(t, kind)
			f(t, kind)
		})
	}
}

// fleet is n instances of one fresh app: a store each (one shared
// in-memory store, or a Redis client each, as separate processes have)
// and an elector each, not started.
type fleet struct {
	ids    []instanceid.ID
	stores []backend.Store
	els    []*role.Elector
}

func newFleet(t *testing.T, kind string, n int, cfg role.Config) *fleet {
	t.Helper()
	app := fmt.Sprintf("app%d", appCounter.Add(1))
	f := &fleet{}
	var mem *membackend.Store
	var consul storetest.Factory
	for i := range n {
		id, err := instanceid.New("127.0.0.1", "acme", app, 8081+i)
		if err != nil {
			t.Fatal(err)
		}
		var st backend.Store
		switch kind {
		case "mem":
			if mem == nil {
				mem = membackend.New()
				t.Cleanup(func() { mem.Close() })
			}
			st = mem
		case "redis":
			rs, err := redisbackend.New(server.Client(t), redisbackend.WithoutRestartGuard()) // a server started for the tests
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rs.Close() })
			st = rs
		case "consul":
			if consul == nil {
				consul = storetest.ByName(t, "consul").Open(t)
			}
			st = consul(t)
		default:
			t.Fatalf("unknown store kind %q", kind)
		}
		el, err := role.NewElector(st, id, cfg, quietRole)
		if err != nil {
			t.Fatal(err)
		}
		f.ids = append(f.ids, id)
		f.stores = append(f.stores, st)
		f.els = append(f.els, el)
	}
	return f
}

// start starts every elector and stops them when the test ends.
func (f *fleet) start(t *testing.T) {
	t.Helper()
	for _, el := range f.els {
		testenv.Start(el, el.Run)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		for _, el := range f.els {
			if err := testenv.Stop(ctx, el); err != nil {
				t.Error(err)
			}
		}
	})
}

// master waits until exactly one elector is master and every running one
// has seen it, and returns its index.
func (f *fleet) master(t *testing.T, except int) int {
	t.Helper()
	m := -1
	waitFor(t, "one master that every running elector has seen", func() bool {
		m = -1
		for i, el := range f.els {
			if i != except && el.IsMaster() {
				if m >= 0 {
					return false
				}
				m = i
			}
		}
		if m < 0 {
			return false
		}
		for i, el := range f.els {
			if i != except && el.Status().Master != f.ids[m].String() {
				return false
			}
		}
		return true
	})
	return m
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

func newScheduler(t *testing.T, opts ...gocron.SchedulerOption) gocron.Scheduler {
	t.Helper()
	s, err := gocron.NewScheduler(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown() })
	return s
}

// journal records what gates decided, per instance.
type journal struct {
	mu     sync.Mutex
	events []entry
}

type entry struct {
	instance int
	ev       schedlock.Event
}

func (j *journal) observer(instance int) schedlock.Option {
	return schedlock.WithObserver(func(ev schedlock.Event) {
		j.mu.Lock()
		j.events = append(j.events, entry{instance, ev})
		j.mu.Unlock()
	})
}

// count returns how many events of kind instance saw, optionally only
// those with skip reason label.
func (j *journal) count(instance int, kind schedlock.EventKind, reason string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, e := range j.events {
		if e.instance == instance && e.ev.Kind == kind && (reason == "" || e.ev.Reason == reason) {
			n++
		}
	}
	return n
}

// attempt is one call of a gate's Lock as the test saw it: when the call
// began and returned and, for an admitted run, when its Unlock began and
// returned. The gate decides somewhere between start and end, and the
// store acts somewhere between the bounds of each call, so a check stated
// for every instant in those intervals holds however late the machine
// runs the goroutines.
type attempt struct {
	instance   int
	start, end time.Time
	err        error
	token      uint64 // the admitted run's job-lock token
	holder     uint64 // the token of the holder an ErrLocked skip names
	// when the admitted run's Unlock began and returned; zero until then
	unlockStart, unlockEnd time.Time
}

// attempts records the Lock calls of gates.
type attempts struct {
	mu   sync.Mutex
	list []*attempt
}

// lock calls g.Lock for instance and records the call; the returned lock
// records its Unlock.
func (l *attempts) lock(ctx context.Context, instance int, g *schedlock.Gate, job string) (gocron.Lock, error) {
	a := &attempt{instance: instance, start: time.Now()}
	lk, err := g.Lock(ctx, job)
	a.end = time.Now()
	a.err = err
	var skip *schedlock.SkipError
	if errors.As(err, &skip) {
		a.holder = skip.Holder.Token
	}
	if err == nil {
		a.token, _ = schedlock.Token(ctx)
	}
	l.mu.Lock()
	l.list = append(l.list, a)
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return &recordedLock{Lock: lk, a: a, l: l}, nil
}

// locker returns a gocron.Locker that is g, recording as lock does. A job
// gets it with gocron.WithDistributedJobLocker.
func (l *attempts) locker(instance int, g *schedlock.Gate) gocron.Locker {
	return recordingLocker{l: l, instance: instance, g: g}
}

type recordingLocker struct {
	l        *attempts
	instance int
	g        *schedlock.Gate
}

func (r recordingLocker) Lock(ctx context.Context, job string) (gocron.Lock, error) {
	return r.l.lock(ctx, r.instance, r.g, job)
}

type recordedLock struct {
	gocron.Lock
	a *attempt
	l *attempts
}

func (r *recordedLock) Unlock(ctx context.Context) error {
	start := time.Now()
	err := r.Lock.Unlock(ctx)
	end := time.Now()
	r.l.mu.Lock()
	r.a.unlockStart, r.a.unlockEnd = start, end
	r.l.mu.Unlock()
	return err
}

// snapshot returns copies of the attempts recorded so far.
func (l *attempts) snapshot() []attempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]attempt, len(l.list))
	for i, a := range l.list {
		out[i] = *a
	}
	return out
}

// of returns instance's attempts that began at or after since.
func (l *attempts) of(instance int, since time.Time) []attempt {
	var out []attempt
	for _, a := range l.snapshot() {
		if a.instance == instance && !a.start.Before(since) {
			out = append(out, a)
		}
	}
	return out
}

// admitted returns how many of instance's attempts were admitted.
func (l *attempts) admitted(instance int) int {
	n := 0
	for _, a := range l.of(instance, time.Time{}) {
		if a.err == nil {
			n++
		}
	}
	return n
}

// unlocked reports whether every admitted run has returned from Unlock.
func (l *attempts) unlocked() bool {
	for _, a := range l.snapshot() {
		if a.err == nil && a.unlockEnd.IsZero() {
			return false
		}
	}
	return true
}

// checkJobLock checks the recorded history of one job lock (every attempt
// on it, every admitted run unlocked) against what the lock promises,
// stated on the instants the test saw so that it holds for any scheduling
// delay:
//
//   - each run was admitted only after the run granted before it (by
//     token) began its release, and no earlier than lockAtLeastFor after
//     that run's Lock call began (its grant came after that instant, and
//     the key was kept lockAtLeastFor past the grant);
//   - each ErrLocked skip names a recorded run, and began while that run
//     could still hold the key: before its Unlock returned or, with
//     lockAtLeastFor, before lockAtLeastFor after its Lock call returned
//     plus the time its release took (the key is kept for lockAtLeastFor
//     less the time since the grant, counted when the release starts, and
//     rounded up to the store's millisecond).
//
// Together they say that the lock is held from each grant until its
// release or lockAtLeastFor after the grant, whichever is later, and at
// no other time; lockAtLeastFor 0 means until the release.
func checkJobLock(t *testing.T, history []attempt, atLeast time.Duration) {
	t.Helper()
	byToken := make(map[uint64]attempt)
	var runs []attempt
	for _, a := range history {
		switch {
		case a.err == nil:
			if a.token == 0 || a.unlockEnd.IsZero() {
				t.Errorf("instance %d: an admitted run with token %d, unlocked at %v: want a token and an Unlock", a.instance, a.token, a.unlockEnd)
				continue
			}
			if b, dup := byToken[a.token]; dup {
				t.Errorf("instances %d and %d were both granted token %d", b.instance, a.instance, a.token)
			}
			byToken[a.token] = a
			runs = append(runs, a)
		case !errors.Is(a.err, schedlock.ErrLocked):
			t.Errorf("instance %d: Lock: %v; want a run or ErrLocked", a.instance, a.err)
		}
	}
	slices.SortFunc(runs, func(a, b attempt) int { return cmp.Compare(a.token, b.token) })
	for i := 1; i < len(runs); i++ {
		a, b := runs[i-1], runs[i]
		if b.end.Before(a.unlockStart) {
			t.Errorf("instance %d's run (token %d) was admitted %v before instance %d's run (token %d) began to release the lock",
				b.instance, b.token, a.unlockStart.Sub(b.end), a.instance, a.token)
		}
		if gap := b.end.Sub(a.start); gap < atLeast {
			t.Errorf("instance %d's run (token %d) was admitted %v after instance %d's run (token %d) began to lock, within lockAtLeastFor %v",
				b.instance, b.token, gap, a.instance, a.token, atLeast)
		}
	}
	for _, r := range history {
		if !errors.Is(r.err, schedlock.ErrLocked) {
			continue
		}
		a, ok := byToken[r.holder]
		if !ok {
			t.Errorf("instance %d was refused by holder token %d, which no recorded run had", r.instance, r.holder)
			continue
		}
		until := a.unlockEnd
		if kept := a.end.Add(atLeast + a.unlockEnd.Sub(a.unlockStart) + time.Millisecond); atLeast > 0 && kept.After(until) {
			until = kept
		}
		if !r.start.Before(until) {
			t.Errorf("instance %d was refused by instance %d's run (token %d) %v after that run's lock had ended (lockAtLeastFor %v)",
				r.instance, a.instance, a.token, r.start.Sub(until), atLeast)
		}
	}
}

// label is the Label of the *SkipError in err, "" without one.
func label(err error) string {
	if skip, ok := errors.AsType[*schedlock.SkipError](err); ok {
		return skip.Label()
	}
	return ""
}

// alreadyRan reports whether err skips a run because its fire has run.
func alreadyRan(err error) bool {
	return errors.Is(err, schedlock.ErrLocked) && label(err) == "already-ran"
}

// task is a gocron task that runs fn with the context of
// schedlock.Context, called in the task as the package doc says.
func task(fn func(ctx context.Context) error) gocron.Task {
	return gocron.NewTask(func(ctx context.Context) error {
		ctx, cancel := schedlock.Context(ctx)
		defer cancel()
		return fn(ctx)
	})
}
