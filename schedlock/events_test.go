package schedlock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/testenv"
)

// Callback and observer options add up: metrics and a status page can
// both watch one elector, locker and gate. Each of two registrations of
// every kind is called.
func TestCallbackOptionsAddUp(t *testing.T) {
	store := membackend.New()
	defer store.Close()
	f := newFleet(t, "mem", 1, fastRole)
	id := f.ids[0]
	var elected, observedRole, observedLock, observedJob [2]atomic.Int32
	el, err := role.NewElector(store, id, fastRole, quietRole,
		role.OnElected(func(context.Context) { elected[0].Add(1) }),
		role.OnElected(func(context.Context) { elected[1].Add(1) }),
		role.WithObserver(func(e role.Event) {
			if e.Kind == role.EventElected {
				observedRole[0].Add(1)
			}
		}),
		role.WithObserver(func(e role.Event) {
			if e.Kind == role.EventElected {
				observedRole[1].Add(1)
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	testenv.Start(el, el.Run)
	defer testenv.Stop(context.Background(), el)
	waitFor(t, "both OnElected and both observers", func() bool {
		return elected[0].Load() == 1 && elected[1].Load() == 1 && observedRole[0].Load() == 1 && observedRole[1].Load() == 1
	})

	lk, err := synclock.NewLocker(store, id, synclock.Config{},
		synclock.WithObserver(func(synclock.Event) { observedLock[0].Add(1) }),
		synclock.WithObserver(func(synclock.Event) { observedLock[1].Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := lk.DoKey(context.Background(), "k", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if a, b := observedLock[0].Load(), observedLock[1].Load(); a == 0 || a != b {
		t.Errorf("lock observers saw %d and %d events; want the same, more than 0", a, b)
	}

	g, err := schedlock.NewGate(schedlock.Slave, el, quiet,
		schedlock.WithObserver(func(schedlock.Event) { observedJob[0].Add(1) }),
		schedlock.WithObserver(func(schedlock.Event) { observedJob[1].Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := schedlock.Run(context.Background(), g.Job(), time.Time{}, func(context.Context) error { return nil }); !errors.Is(err, schedlock.ErrSkipped) {
		t.Fatalf("a slave-only run on the master: %v; want it skipped", err)
	}
	if a, b := observedJob[0].Load(), observedJob[1].Load(); a != 1 || b != 1 {
		t.Errorf("job observers saw %d and %d events; want 1 each", a, b)
	}
}
