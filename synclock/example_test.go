package synclock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/synclock"
)

// Two instances of one service share a lock key: their sections never run
// at the same time, and every holding gets a larger fencing token.
func ExampleLocker_DoKey() {
	store := membackend.New() // redisbackend.New(client) in production
	defer store.Close()
	quiet := synclock.WithLogger(slog.New(slog.DiscardHandler))
	idA, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	idB, _ := instanceid.New("10.0.0.8", "acme", "billing", 8080)
	a, _ := synclock.NewLocker(store, idA, synclock.Config{}, quiet)
	b, _ := synclock.NewLocker(store, idB, synclock.Config{}, quiet)

	var last uint64 // what a fenced resource remembers
	for i, lk := range []*synclock.Locker{a, b} {
		lk.DoKey(context.Background(), "invoice:42", func(ctx context.Context) error {
			// Tokens come from the store's clock: large numbers that
			// only increase.
			token, _ := synclock.Token(ctx)
			fmt.Printf("%s closes invoice 42 with a token above the last: %v\n", []instanceid.ID{idA, idB}[i], token > last)
			last = token
			return nil
		})
	}
	// Output:
	// 10.0.0.7:acme:billing:8080 closes invoice 42 with a token above the last: true
	// 10.0.0.8:acme:billing:8080 closes invoice 42 with a token above the last: true
}

// Code that cannot use a closure locks a Mutex.
func ExampleMutex() {
	store := membackend.New()
	defer store.Close()
	id, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	lk, _ := synclock.NewLocker(store, id, synclock.Config{}, synclock.WithLogger(slog.New(slog.DiscardHandler)))
	m := lk.Mutex("ledger")
	ctx := context.Background()
	if err := m.Lock(ctx); err != nil {
		return
	}
	token, ok := synclock.Token(m.Context())
	fmt.Println("holding the ledger lock, with a token:", ok && token > 0)
	fmt.Println("unlock:", m.Unlock(ctx))
	// Output:
	// holding the ledger lock, with a token: true
	// unlock: <nil>
}

// An observer feeds metrics: here it prints each step of a lock that a
// TryLock finds taken.
func ExampleWithObserver() {
	store := membackend.New()
	defer store.Close()
	id, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	observe := synclock.WithObserver(func(e synclock.Event) {
		// In production: count e.Kind by e.Key, observe e.Wait and e.Held.
		fmt.Printf("%s %s tries=%d err=%v\n", e.Kind, e.Key, e.Tries, e.Err != nil)
	})
	lk, _ := synclock.NewLocker(store, id, synclock.Config{}, observe)

	lk.DoKey(context.Background(), "report", func(ctx context.Context) error {
		// Another instance tries the lock this section holds.
		idB, _ := instanceid.New("10.0.0.8", "acme", "billing", 8080)
		other, _ := synclock.NewLocker(store, idB, synclock.Config{}, observe)
		return other.Mutex("report").TryLock(context.Background())
	})
	// Output:
	// acquired report tries=1 err=false
	// refused report tries=1 err=true
	// released report tries=0 err=false
}

// TryLock does not wait: while another instance holds the lock it fails at
// once, and the error names the holder.
func ExampleLockedError() {
	store := membackend.New()
	defer store.Close()
	quiet := synclock.WithLogger(slog.New(slog.DiscardHandler))
	idA, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	idB, _ := instanceid.New("10.0.0.8", "acme", "billing", 8080)
	a, _ := synclock.NewLocker(store, idA, synclock.Config{}, quiet)
	b, _ := synclock.NewLocker(store, idB, synclock.Config{}, quiet)

	a.DoKey(context.Background(), "nightly-close", func(ctx context.Context) error {
		err := b.Mutex("nightly-close").TryLock(context.Background())
		var locked *synclock.LockedError
		if errors.As(err, &locked) {
			holder, _, _ := strings.Cut(locked.Holder.Owner, "#")
			fmt.Printf("%q is held by %s; errors.Is ErrLocked: %v\n", locked.Key, holder, errors.Is(err, synclock.ErrLocked))
		}
		return nil
	})
	// Output:
	// "nightly-close" is held by 10.0.0.7:acme:billing:8080; errors.Is ErrLocked: true
}

// Do names the lock after the code it runs: fn's own name when fn is a
// named function or method value, else the named function Do is called
// in, also from a closure such as an HTTP handler or a goroutine.
func ExampleDo() {
	store := membackend.New()
	defer store.Close()
	id, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	lk, _ := synclock.NewLocker(store, id, synclock.Config{}, synclock.WithLogger(slog.New(slog.DiscardHandler)),
		synclock.WithObserver(func(ev synclock.Event) {
			if ev.Kind == synclock.EventAcquired {
				fmt.Println(ev.Key)
			}
		}))
	synclock.SetDefault(lk)
	defer synclock.SetDefault(nil)

	// A named function is the lock's name.
	_ = synclock.Do(context.Background(), closeInvoices)
	// A literal, here in a goroutine, takes the enclosing function's.
	done := make(chan error)
	go func() { done <- synclock.Do(context.Background(), func(ctx context.Context) error { return nil }) }()
	fmt.Println(<-done)
	// Output:
	// github.com/baton-go/baton/synclock_test.closeInvoices
	// github.com/baton-go/baton/synclock_test.ExampleDo
	// <nil>
}

func closeInvoices(ctx context.Context) error { return nil }
