package backendtest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/backendtest"
	"github.com/baton-go/baton/backend/membackend"
)

// A suite that cannot fail proves nothing. Each mutant below is the
// in-memory store with one documented guarantee broken, and the suite run
// on it must fail the subtest that checks that guarantee. The suite runs
// in a child process (this test binary, re-run with mutantEnv set), since
// a failing subtest would fail the parent too.

const mutantEnv = "BACKENDTEST_MUTANT"

// mutants maps each mutant to the subtest that must catch it.
var mutants = map[string]struct {
	subtest string
	wrap    func(*membackend.Store) backend.Store
	opts    []membackend.Option // of the store wrap gets
}{
	"steals held keys": {"OneWinner", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, acquire: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
			l, err := s.Acquire(ctx, key, owner, ttl, floor)
			var he *backend.HeldError
			if errors.As(err, &he) && he.Holder.Owner != owner {
				s.Release(ctx, key, he.Holder.Owner, 0)
				return s.Acquire(ctx, key, owner, ttl, floor)
			}
			return l, err
		}}
	}, nil},
	"releases for anyone": {"NonOwnerCannotRenewOrRelease", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, release: func(ctx context.Context, key, owner string, keepFor time.Duration) error {
			if l, err := s.Get(ctx, key); err == nil {
				owner = l.Owner
			}
			return s.Release(ctx, key, owner, keepFor)
		}}
	}, nil},
	"breaks whoever holds the key": {"BreakChanged", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, brk: func(ctx context.Context, key, owner string, token uint64) (backend.Lease, error) {
			if l, err := s.Get(ctx, key); err == nil {
				owner, token = l.Owner, l.Token
			}
			return s.Break(ctx, key, owner, token)
		}}
	}, nil},
	"renews for anyone": {"StaleOwnerAfterTakeover", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, renew: func(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
			if l, err := s.Get(ctx, key); err == nil {
				owner = l.Owner
			}
			return s.Renew(ctx, key, owner, ttl)
		}}
	}, nil},
	"renew does not extend": {"RenewExtends", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, renew: func(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
			l, err := s.Get(ctx, key)
			if err != nil || l.Owner != owner {
				return s.Renew(ctx, key, owner, ttl)
			}
			return l, nil
		}}
	}, nil},
	"ignores keepFor": {"ReleaseKeepFor", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, release: func(ctx context.Context, key, owner string, keepFor time.Duration) error {
			return s.Release(ctx, key, owner, 0)
		}}
	}, nil},
	"expires early": {"ExpiryByStoreClock", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, acquire: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
			l, err := s.Acquire(ctx, key, owner, ttl*3/4, floor)
			l.TTL = ttl
			return l, err
		}}
	}, nil},
	"reuses tokens": {"TokensIncrease", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, acquire: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
			l, err := s.Acquire(ctx, key, owner, ttl, floor)
			if err == nil && l.Token > 3 {
				l.Token = 3
			}
			return l, err
		}}
	}, nil},
	"ignores the floor": {"TokenFloor", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, acquire: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
			return s.Acquire(ctx, key, owner, ttl, 0)
		}}
	}, nil},
	"takes floors far ahead of the clock": {"FloorAhead", func(s *membackend.Store) backend.Store {
		// Caps the floor just below the limit instead of refusing it, as
		// a store that trusted a forged floor would: the counter jumps.
		return &mutant{Store: s, acquire: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
			return s.Acquire(ctx, key, owner, ttl, min(floor, backend.TokenLimit(time.Now().UnixMicro())-1))
		}}
	}, nil},
	"counts tokens without the clock": {"FloorAfterWipe", func(s *membackend.Store) backend.Store {
		// Tokens from a counter alone, max(counter, floor) + 1, which a
		// wipe resets: the formula before tokens came from the clock.
		var mu sync.Mutex
		counters := map[string]uint64{}
		return &mutant{Store: s, acquire: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
			l, err := s.Acquire(ctx, key, owner, ttl, floor)
			if err == nil {
				mu.Lock()
				defer mu.Unlock()
				l.Token = max(counters[key], floor) + 1
				counters[key] = l.Token
			}
			return l, err
		}, reset: func() {
			mu.Lock()
			defer mu.Unlock()
			clear(counters)
			s.Reset()
		}}
	}, nil},
	"grants while recovering": {"Restart", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, restart: s.Reset}
	}, nil},
	"forgets the floor after a wipe": {"FloorAfterWipe", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, acquire: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
			if floor > 100 {
				floor = 100
			}
			return s.Acquire(ctx, key, owner, ttl, floor)
		}}
	}, nil},
	"watch never signals": {"WatchSeesRelease", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, watch: func(ctx context.Context, key string) (backend.Watch, error) {
			if err := backend.ValidateKey(key); err != nil {
				return nil, err
			}
			return silentWatch{}, nil
		}}
	}, nil},
	"reports releases as renewals": {"WatchSeesRelease", func(s *membackend.Store) backend.Store {
		return mapEvents(s, func(ev backend.Event) backend.Event {
			return backend.Event{Kind: backend.EventRenewed, TTL: time.Minute}
		})
	}, nil},
	"inflates renewal TTLs": {"RenewalEvents", func(s *membackend.Store) backend.Store {
		return mapEvents(s, func(ev backend.Event) backend.Event {
			if ev.Kind == backend.EventRenewed {
				ev.TTL *= 2
			}
			return ev
		})
	}, nil},
	"reports expiry as a release": {"ExpiryByStoreClock", func(s *membackend.Store) backend.Store {
		return mapEvents(s, func(ev backend.Event) backend.Event {
			if ev.Kind == backend.EventMaybeFree {
				ev.Kind = backend.EventReleased
			}
			return ev
		})
	}, nil},
	"reports a wipe as a release": {"FloorAfterWipe", func(s *membackend.Store) backend.Store {
		return mapEvents(s, func(ev backend.Event) backend.Event {
			if ev.Kind == backend.EventMaybeFree {
				ev.Kind = backend.EventReleased
			}
			return ev
		})
	}, nil},
	"clamps bad TTLs": {"InvalidArguments", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, renew: func(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
			return s.Renew(ctx, key, owner, max(ttl, time.Millisecond))
		}}
	}, nil},
	"ignores contexts": {"EndedContext", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, acquire: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
			return s.Acquire(context.WithoutCancel(ctx), key, owner, ttl, floor)
		}}
	}, nil},
	"grants overlapping leases": {"Stress", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, acquire: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
			l, err := s.Acquire(ctx, key, owner, ttl, floor)
			var he *backend.HeldError
			if errors.As(err, &he) && he.Holder.TTL > ttl-5*time.Millisecond {
				// Held for a moment only: pretend it was granted.
				return backend.Lease{Key: key, Owner: owner, Token: he.Holder.Token + 1, TTL: ttl}, nil
			}
			return l, err
		}, release: func(ctx context.Context, key, owner string, keepFor time.Duration) error {
			err := s.Release(ctx, key, owner, keepFor)
			if errors.Is(err, backend.ErrNotHeld) {
				return nil
			}
			return err
		}}
	}, nil},
	"queue ignores order": {"QueueOrder", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, acquireQueued: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
			if l, err := s.Acquire(ctx, key, owner, ttl, floor); err == nil {
				return l, s.Dequeue(ctx, key, owner)
			}
			return s.AcquireQueued(ctx, key, owner, ttl, floor, patience)
		}}
	}, []membackend.Option{membackend.WithoutHandover()}},
	"sends a returning waiter to the back": {"QueueOrder", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, acquireQueued: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
			if err := s.Dequeue(ctx, key, owner); err != nil {
				return backend.Lease{}, err
			}
			return s.AcquireQueued(ctx, key, owner, ttl, floor, patience)
		}}
	}, nil},
	"release names nobody": {"QueueOrder", func(s *membackend.Store) backend.Store {
		return mapEvents(s, func(ev backend.Event) backend.Event {
			ev.Next = ""
			return ev
		})
	}, []membackend.Option{membackend.WithoutHandover()}},
	"place never lapses": {"QueuePatience", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, acquireQueued: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
			if patience > 0 {
				patience = time.Hour
			}
			return s.AcquireQueued(ctx, key, owner, ttl, floor, patience)
		}}
	}, nil},
	"calling again does not extend a place": {"QueuePatience", func(s *membackend.Store) backend.Store {
		var mu sync.Mutex
		lapses := make(map[[2]string]time.Time) // key and owner -> when the first call's place ends
		return &mutant{Store: s, acquireQueued: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
			mu.Lock()
			defer mu.Unlock()
			place := [2]string{key, owner}
			if end, ok := lapses[place]; ok && patience > 0 && time.Now().Before(end) {
				patience = time.Until(end)
			} else if patience > 0 {
				lapses[place] = time.Now().Add(patience)
			}
			return s.AcquireQueued(ctx, key, owner, ttl, floor, patience)
		}}
	}, nil},
	"dequeue keeps the place": {"QueueDequeue", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, dequeue: func(ctx context.Context, key, owner string) error {
			return errors.Join(backend.ValidateKey(key), backend.ValidateOwner(owner))
		}}
	}, nil},
	"patience 0 joins the line": {"QueueZeroPatience", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, acquireQueued: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
			if patience == 0 {
				patience = time.Minute
			}
			return s.AcquireQueued(ctx, key, owner, ttl, floor, patience)
		}}
	}, nil},
	"a try names nobody first in line": {"QueueZeroPatience", func(s *membackend.Store) backend.Store {
		// A join of a held key may name nobody (backend.Queue); a try may not.
		return &mutant{Store: s, acquireQueued: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
			l, err := s.AcquireQueued(ctx, key, owner, ttl, floor, patience)
			var he *backend.HeldError
			if errors.As(err, &he) && he.Holder.Owner != "" {
				he.Next = ""
			}
			return l, err
		}}
	}, nil},
	"queue ignores the floor": {"QueueFencing", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, acquireQueued: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
			return s.AcquireQueued(ctx, key, owner, ttl, 0, patience)
		}}
	}, nil},
	"queue accepts negative patience": {"QueueInvalidArguments", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, acquireQueued: func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
			return s.AcquireQueued(ctx, key, owner, ttl, floor, max(patience, 0))
		}}
	}, nil},
	"claims to hand over but frees keys": {"QueueOrder", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, awaitHandover: func(ctx context.Context, key, owner string, max time.Duration) (backend.Lease, bool, error) {
			time.Sleep(max)
			return backend.Lease{}, false, nil
		}}
	}, []membackend.Option{membackend.WithoutHandover()}},
	"hands over with the holder's ttl": {"Handover", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, awaitHandover: func(ctx context.Context, key, owner string, max time.Duration) (backend.Lease, bool, error) {
			l, ok, err := s.AwaitHandover(ctx, key, owner, max)
			if ok {
				l.TTL = 30 * time.Second
			}
			return l, ok, err
		}}
	}, nil},
	"await handover ignores contexts": {"Handover", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, awaitHandover: func(ctx context.Context, key, owner string, max time.Duration) (backend.Lease, bool, error) {
			return s.AwaitHandover(context.WithoutCancel(ctx), key, owner, min(max, 20*time.Second))
		}}
	}, nil},
	"rejoin says nobody joined": {"Rejoin", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, releaseAndJoin: func(ctx context.Context, key, owner, next string, ttl time.Duration, floor uint64, patience time.Duration) (bool, error) {
			_, err := s.ReleaseAndJoin(ctx, key, owner, next, ttl, floor, patience)
			return false, err
		}}
	}, nil},
	"rejoin joins when nothing was handed over": {"Rejoin", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, releaseAndJoin: func(ctx context.Context, key, owner, next string, ttl time.Duration, floor uint64, patience time.Duration) (bool, error) {
			joined, err := s.ReleaseAndJoin(ctx, key, owner, next, ttl, floor, patience)
			if err == nil && !joined {
				_, _ = s.AcquireQueued(ctx, key, next, ttl, floor, patience)
			}
			return joined, err
		}}
	}, nil},
	"dequeue ignores contexts": {"QueueEndedContext", func(s *membackend.Store) backend.Store {
		return &mutant{Store: s, dequeue: func(ctx context.Context, key, owner string) error {
			return s.Dequeue(context.WithoutCancel(ctx), key, owner)
		}}
	}, nil},
}

// mutant is a store with some methods replaced. It keeps waiting lines
// (backend.Queue) as the in-memory store does.
type mutant struct {
	*membackend.Store
	acquire        func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error)
	renew          func(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error)
	release        func(ctx context.Context, key, owner string, keepFor time.Duration) error
	watch          func(ctx context.Context, key string) (backend.Watch, error)
	acquireQueued  func(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error)
	dequeue        func(ctx context.Context, key, owner string) error
	awaitHandover  func(ctx context.Context, key, owner string, max time.Duration) (backend.Lease, bool, error)
	releaseAndJoin func(ctx context.Context, key, owner, next string, ttl time.Duration, floor uint64, patience time.Duration) (bool, error)
	brk            func(ctx context.Context, key, owner string, token uint64) (backend.Lease, error)
	reset          func() // the harness's Wipe
	restart        func() // the harness's Restart
}

func (m *mutant) Reset() {
	if m.reset != nil {
		m.reset()
		return
	}
	m.Store.Reset()
}

func (m *mutant) Restart() {
	if m.restart != nil {
		m.restart()
		return
	}
	m.Store.Restart()
}

var _ backend.Handover = (*mutant)(nil)

var _ backend.Breaker = (*mutant)(nil)

func (m *mutant) Break(ctx context.Context, key, owner string, token uint64) (backend.Lease, error) {
	if m.brk != nil {
		return m.brk(ctx, key, owner, token)
	}
	return m.Store.Break(ctx, key, owner, token)
}

func (m *mutant) AwaitHandover(ctx context.Context, key, owner string, max time.Duration) (backend.Lease, bool, error) {
	if m.awaitHandover != nil {
		return m.awaitHandover(ctx, key, owner, max)
	}
	return m.Store.AwaitHandover(ctx, key, owner, max)
}

func (m *mutant) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	if m.acquire != nil {
		return m.acquire(ctx, key, owner, ttl, floor)
	}
	return m.Store.Acquire(ctx, key, owner, ttl, floor)
}

func (m *mutant) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	if m.renew != nil {
		return m.renew(ctx, key, owner, ttl)
	}
	return m.Store.Renew(ctx, key, owner, ttl)
}

func (m *mutant) Release(ctx context.Context, key, owner string, keepFor time.Duration) error {
	if m.release != nil {
		return m.release(ctx, key, owner, keepFor)
	}
	return m.Store.Release(ctx, key, owner, keepFor)
}

func (m *mutant) Watch(ctx context.Context, key string) (backend.Watch, error) {
	if m.watch != nil {
		return m.watch(ctx, key)
	}
	return m.Store.Watch(ctx, key)
}

func (m *mutant) AcquireQueued(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
	if m.acquireQueued != nil {
		return m.acquireQueued(ctx, key, owner, ttl, floor, patience)
	}
	return m.Store.AcquireQueued(ctx, key, owner, ttl, floor, patience)
}

var _ backend.Rejoin = (*mutant)(nil)

func (m *mutant) ReleaseAndJoin(ctx context.Context, key, owner, next string, ttl time.Duration, floor uint64, patience time.Duration) (bool, error) {
	if m.releaseAndJoin != nil {
		return m.releaseAndJoin(ctx, key, owner, next, ttl, floor, patience)
	}
	return m.Store.ReleaseAndJoin(ctx, key, owner, next, ttl, floor, patience)
}

func (m *mutant) Dequeue(ctx context.Context, key, owner string) error {
	if m.dequeue != nil {
		return m.dequeue(ctx, key, owner)
	}
	return m.Store.Dequeue(ctx, key, owner)
}

type silentWatch struct{}

func (silentWatch) C() <-chan backend.Event { return nil }
func (silentWatch) Close() error            { return nil }

// mappedWatch passes the events of another Watch through f.
type mappedWatch struct {
	inner backend.Watch
	ch    chan backend.Event
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

func mapWatch(inner backend.Watch, f func(backend.Event) backend.Event) backend.Watch {
	m := &mappedWatch{inner: inner, ch: make(chan backend.Event, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			select {
			case ev := <-inner.C():
				backend.Notify(m.ch, f(ev))
			case <-m.stop:
				return
			}
		}
	}()
	return m
}

func (m *mappedWatch) C() <-chan backend.Event { return m.ch }

func (m *mappedWatch) Close() error {
	m.once.Do(func() {
		close(m.stop)
		<-m.done
	})
	return m.inner.Close()
}

// mapEvents returns a store whose watches pass their events through f.
func mapEvents(s *membackend.Store, f func(backend.Event) backend.Event) backend.Store {
	return &mutant{Store: s, watch: func(ctx context.Context, key string) (backend.Watch, error) {
		w, err := s.Watch(ctx, key)
		if err != nil {
			return nil, err
		}
		return mapWatch(w, f), nil
	}}
}

// TestMutant runs the suite on the mutant named by mutantEnv; it is the
// child process of TestSuiteCatchesMutants.
func TestMutant(t *testing.T) {
	name := os.Getenv(mutantEnv)
	if name == "" {
		t.Skip("run by TestSuiteCatchesMutants")
	}
	m, ok := mutants[name]
	if !ok {
		t.Fatalf("no mutant %q", name)
	}
	s := membackend.New(m.opts...)
	t.Cleanup(func() { s.Close() })
	st := m.wrap(s)
	restarter, _ := st.(interface {
		Reset()
		Restart()
	})
	if restarter == nil {
		restarter = s
	}
	backendtest.Run(t, backendtest.Harness{
		NewStore: func(testing.TB) backend.Store { return st },
		Wipe:     func(testing.TB) { restarter.Reset() },
		Restart:  func(testing.TB) { restarter.Restart() },
	})
}

func TestSuiteCatchesMutants(t *testing.T) {
	if os.Getenv(mutantEnv) != "" {
		t.Skip("in a mutant's child process")
	}
	if testing.Short() {
		t.Skip("runs the suite once per mutant")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range mutants {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			group := "Parallel"
			if m.subtest == "FloorAfterWipe" || m.subtest == "Restart" {
				group = "Sequential"
			}
			cmd := exec.CommandContext(t.Context(), exe,
				"-test.run=^TestMutant$/^"+group+"$/^"+m.subtest+"$", "-test.v", "-test.count=1", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), mutantEnv+"="+name)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("the suite passed (or did not run: %v) on a store that %s; output:\n%s", err, name, out)
			}
			want := "--- FAIL: TestMutant/" + group + "/" + m.subtest + " "
			if !strings.Contains(string(out), want) {
				t.Fatalf("the suite failed on a store that %s, but not in %s; output:\n%s", name, m.subtest, out)
			}
			if strings.Contains(string(out), "panic:") {
				t.Fatalf("the suite panicked on a store that %s; output:\n%s", name, out)
			}
		})
	}
}
