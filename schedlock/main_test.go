package schedlock_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/internal/testenv"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
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

// fastRole elects within milliseconds and fails over within a second.
var fastRole = role.Config{HeartbeatInterval: 100 * time.Millisecond, HeartbeatExpiration: time.Second}

// storeKinds are the stores every behavioural test runs on.
var storeKinds = []string{"mem", "redis"}

func forEachStore(t *testing.T, f func(t *testing.T, kind string)) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) { f(t, kind) })
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
		if err := el.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		for _, el := range f.els {
			if err := el.Stop(ctx); err != nil {
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
			if i != except && el.Master() != f.ids[m].String() {
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

// journal records what gates decided, per instance, with the time.
type journal struct {
	mu     sync.Mutex
	events []entry
}

type entry struct {
	at       time.Time
	instance int
	ev       schedlock.Event
}

func (j *journal) observer(instance int) schedlock.Option {
	return schedlock.WithObserver(func(ev schedlock.Event) {
		j.mu.Lock()
		j.events = append(j.events, entry{time.Now(), instance, ev})
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
		if e.instance == instance && e.ev.Kind == kind && (reason == "" || e.ev.Reason() == reason) {
			n++
		}
	}
	return n
}

// admissions returns when instance's runs were admitted.
func (j *journal) admissions(instance int) []time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	var at []time.Time
	for _, e := range j.events {
		if e.instance == instance && e.ev.Kind == schedlock.EventAdmitted {
			at = append(at, e.at)
		}
	}
	return at
}
