package schedlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/testkit/faulty"
)

// An extension whose reply lands after the lease's deadline never revives
// the run: Extend fails with ErrLost, the run's context stays cancelled,
// the loss is reported once, and Assert and Token no longer claim the
// lock. The lease is a second long: the extension must reach the store
// before its deadline, also on a busy machine.
func TestLateExtensionIsVoid(t *testing.T) {
	st := faulty.NewLateRenew(membackend.New())
	defer st.Close()
	defer st.Proceed()
	id, err := instanceid.New("127.0.0.1", "acme", "late", 8081)
	if err != nil {
		t.Fatal(err)
	}
	var j journal
	g, err := schedlock.NewGate(schedlock.Any, nil, quiet, j.observer(0), schedlock.WithInstance(id),
		schedlock.WithLock(st, "late", time.Second, 0))
	if err != nil {
		t.Fatal(err)
	}
	extended := make(chan error, 1)
	err = schedlock.Run(ctxT(t), g, func(ctx context.Context) error {
		go func() { extended <- schedlock.Extend(ctx, time.Minute) }()
		select {
		case <-st.Entered():
		case <-time.After(patience):
			t.Error("the extension never reached the store")
			return nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(patience):
			t.Error("the run was not lost at its deadline while the extension hung")
			return nil
		}
		st.Proceed()
		if err := <-extended; !errors.Is(err, schedlock.ErrLost) {
			t.Errorf("Extend whose reply came after the deadline: %v, want ErrLost", err)
		}
		if cause := context.Cause(ctx); !errors.Is(cause, schedlock.ErrLost) {
			t.Errorf("the run's context ended with %v, want ErrLost", cause)
		}
		if err := schedlock.Assert(ctx); !errors.Is(err, schedlock.ErrLost) {
			t.Errorf("Assert after a late extension: %v, want ErrLost", err)
		}
		if _, ok := schedlock.Token(ctx); ok {
			t.Error("Token still claims the lock after a late extension")
		}
		return nil
	})
	if !errors.Is(err, schedlock.ErrLost) {
		t.Errorf("Run: %v, want ErrLost", err)
	}
	if n := j.count(0, schedlock.EventLost, ""); n != 1 {
		t.Fatalf("%d lost events, want 1", n)
	}
}
