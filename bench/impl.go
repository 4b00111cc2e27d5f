package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// HoldTTL is the lease every implementation asks for where it can choose
// one: the seed's hold-duration default. redsync keeps its own default.
const HoldTTL = 45 * time.Second

// Locker takes one lock key for one worker goroutine. It is not shared
// between goroutines.
type Locker interface {
	// Lock blocks until the lock is held or ctx ends and returns the
	// function that releases it. An implementation that gives up on its
	// own (a bounded retry count) is asked again until ctx ends, so Lock
	// fails only when ctx ends or Redis fails.
	Lock(ctx context.Context) (unlock func(context.Context) error, err error)
}

// Client is one implementation's state on one Redis client: whatever it
// keeps per process (a library client, a store, a locker) and from which
// it hands out lock objects.
type Client interface {
	// Locker returns a new lock object on key for one goroutine.
	Locker(key string) (Locker, error)
	// Close releases what Open created; it does not close the Redis client.
	Close() error
}

// Impl is one lock implementation under test.
type Impl struct {
	// Name is the name in flags and results.
	Name string
	// Setup says in a few words how it is configured.
	Setup string
	// Open builds the implementation's client on rdb. n numbers the
	// clients of one run from 1, for implementations that need a distinct
	// identity per client.
	Open func(rdb *redis.Client, n int) (Client, error)
}

// Impls returns every implementation, baton first.
func Impls() []Impl {
	return []Impl{batonImpl(), redsyncImpl(), redislockImpl(), fencedMinImpl(), pollerImpl(), seedSleepImpl()}
}

// ImplNames returns the names of Impls.
func ImplNames() []string {
	var names []string
	for _, im := range Impls() {
		names = append(names, im.Name)
	}
	return names
}

// Diagnostics returns the runs that are not compared with anything and
// run only when named: baton's store without synclock, and baton on its
// Redis functions.
func Diagnostics() []Impl { return []Impl{storeImpl(), batonFunctionsImpl()} }

// LookupImpl returns the implementation or diagnostic called name.
func LookupImpl(name string) (Impl, error) {
	var known []string
	for _, im := range append(Impls(), Diagnostics()...) {
		if im.Name == name {
			return im, nil
		}
		known = append(known, im.Name)
	}
	return Impl{}, fmt.Errorf("bench: unknown implementation %q (known: %s)", name, strings.Join(known, ", "))
}

// isPeer reports whether name is one of the implementations baton is
// compared with: the libraries and the references.
func isPeer(name string) bool { return name != BatonName && slices.Contains(ImplNames(), name) }

// ownerCheckedPeers are the libraries whose best uncontended rate baton's
// is judged against (DESIGN.md §5), beside the minimal fenced lock. The
// seed's bare SET NX + DEL is the round-trip reference, and the poller
// does per cycle what redislock does.
var ownerCheckedPeers = []string{RedsyncName, RedislockName}
