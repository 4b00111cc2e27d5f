package synclock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/backend/springredis"
	"github.com/baton-go/baton/synclock"
)

// A mixed fleet: a Go locker on the Spring framework's layout
// (springredis) and a Java instance played with the framework's commands
// for a synchronized method — SET <signature> <instance ID> NX EX <hold>
// before it, DEL after — serialise the same section, both ways.
func TestSpringMixedFleetSyncLock(t *testing.T) {
	ctx := ctxT(t)
	rdb := server.Client(t)
	const sig, javaID = "com.acme.billing.InvoiceService.close(long)", "10.0.0.9:acme:billing:8080"
	st, err := springredis.New(server.Client(t), springredis.Layout{}, redisbackend.WithoutRestartGuard())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lk, err := synclock.NewLocker(st, idN(t, 1), synclock.Config{RetryInterval: 20 * time.Millisecond}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	section := func(context.Context) error { return nil }

	// The Java instance holds the lock: the Go try is refused, naming it.
	if ok, err := rdb.SetNX(ctx, sig, javaID, 45*time.Second).Result(); err != nil || !ok {
		t.Fatalf("the Java instance's SET NX: %v, %v", ok, err)
	}
	var locked *synclock.LockedError
	if err := tryDo(lk, ctx, sig, section); !errors.As(err, &locked) || locked.Holder.Owner != javaID {
		t.Fatalf("TryLock while the Java instance holds the lock: %v; want ErrLocked naming %s", err, javaID)
	}
	// A Go waiter runs once the Java instance's method returns (DEL).
	ran := make(chan error, 1)
	go func() { ran <- lk.DoKey(ctx, sig, section) }()
	time.Sleep(50 * time.Millisecond) // not an assertion: lets the waiter start waiting
	if err := rdb.Del(ctx, sig).Err(); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("the Go waiter after the Java instance released: %v", err)
	}

	// While a Go instance runs the section, the Java instance's SET NX
	// fails and it reads the Go instance's ID; after it, its SET NX
	// succeeds.
	err = lk.DoKey(ctx, sig, func(context.Context) error {
		if ok, err := rdb.SetNX(ctx, sig, javaID, 45*time.Second).Result(); err != nil || ok {
			t.Errorf("the Java instance's SET NX during the Go section: %v, %v; want refused", ok, err)
		}
		if v, err := rdb.Get(ctx, sig).Result(); err != nil || v != idN(t, 1).String() {
			t.Errorf("the Java instance reads %q, %v; want %s", v, err, idN(t, 1))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := rdb.SetNX(ctx, sig, javaID, 45*time.Second).Result(); err != nil || !ok {
		t.Fatalf("the Java instance's SET NX after the Go section: %v, %v; want granted", ok, err)
	}
}
