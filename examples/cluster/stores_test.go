package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/synclock"
)

// An instance's store is the store the demo runs on, with every optional
// capability it has and its own name (for logs), not a wrapper that hides
// them: a second instance's synclock waiter takes a place in the lock's
// waiting line (backend.Queue), where the listing of locks shows it. Once
// the instance crashes, its store fails every call.
func TestInstanceStoresKeepCapabilities(t *testing.T) {
	c, err := connectRedis("")
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	var crashedA, crashedB atomic.Bool
	a, closeA, err := c.open(&crashedA)
	if err != nil {
		t.Fatal(err)
	}
	defer closeA()
	b, closeB, err := c.open(&crashedB)
	if err != nil {
		t.Fatal(err)
	}
	defer closeB()
	checkCapabilities(t, a)
	checkWaiterInLine(t, a, b)

	crashedB.Store(true)
	if _, err := b.Get(context.Background(), backend.AppKey("acme", "billing", "role")); !errors.Is(err, errCrashed) {
		t.Errorf("Get on a crashed instance's store: %v; want errCrashed", err)
	}
}

// checkCapabilities checks that s has the capabilities of a redisbackend
// store and names it.
func checkCapabilities(t *testing.T, s backend.Store) {
	t.Helper()
	caps := map[string]bool{}
	_, caps["Queue"] = s.(backend.Queue)
	_, caps["Handover"] = s.(backend.Handover)
	_, caps["Registry"] = s.(backend.Registry)
	_, caps["MemberLister"] = s.(backend.MemberLister)
	_, caps["MemberLocator"] = s.(backend.MemberLocator)
	_, caps["Inspector"] = s.(backend.Inspector)
	_, caps["Breaker"] = s.(backend.Breaker)
	for name, ok := range caps {
		if !ok {
			t.Errorf("an instance's store (%T) is not a backend.%s", s, name)
		}
	}
	if name := backend.StoreName(s); name != "redis" {
		t.Errorf("an instance's store is named %q; want \"redis\", the Redis store's own name", name)
	}
}

// checkWaiterInLine holds a lock through a's synclock while b's waits for
// it, and checks that b's waiter is in the lock's line.
func checkWaiterInLine(t *testing.T, a, b backend.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lkA, lkB := locker(t, a, 8081), locker(t, b, 8082)
	held, release := make(chan struct{}), make(chan struct{})
	doneA, doneB := make(chan error, 1), make(chan error, 1)
	go func() {
		doneA <- lkA.DoKey(ctx, "invoice:42", func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	go func() { doneB <- lkB.DoKey(ctx, "invoice:42", func(context.Context) error { return nil }) }()
	inspector, _ := a.(backend.Inspector)
	if inspector == nil {
		t.Fatalf("an instance's store (%T) lists no locks", a)
	}
	for lined := false; !lined; {
		list, err := inspector.LeasesUpTo(ctx, backend.AppKey("acme", "billing", ""), 10, 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range list.Leases {
			lined = lined || slices.ContainsFunc(l.Waiters, func(w string) bool { return strings.HasPrefix(w, "127.0.0.1:acme:billing:8082") })
		}
		if ctx.Err() != nil {
			t.Fatal("instance 8082's waiter never took a place in the lock's line")
		}
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	if err := errors.Join(<-doneA, <-doneB); err != nil {
		t.Fatal(err)
	}
}

// locker returns a synclock locker of instance port on s.
func locker(t *testing.T, s backend.Store, port int) *synclock.Locker {
	t.Helper()
	id, err := instanceid.New("127.0.0.1", "acme", "billing", port)
	if err != nil {
		t.Fatal(err)
	}
	lk, err := synclock.NewLocker(s, id, synclock.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return lk
}
