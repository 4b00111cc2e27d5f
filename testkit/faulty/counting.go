package faulty

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
)

// Counting is an in-memory store that counts the calls of its lease
// methods (backend.Store, Queue and Handover), by method name, whether
// they succeed or not: a test's proof that a path asks the store nothing.
// Every method is the in-memory store's.
type Counting struct {
	*membackend.Store
	mu    sync.Mutex
	calls map[string]int
}

// NewCounting wraps s.
func NewCounting(s *membackend.Store) *Counting {
	return &Counting{Store: s, calls: make(map[string]int)}
}

// Calls returns how many calls each method got so far, by name; methods
// never called are absent.
func (c *Counting) Calls() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.calls)
}

func (c *Counting) count(method string) {
	c.mu.Lock()
	c.calls[method]++
	c.mu.Unlock()
}

// Acquire implements backend.Store.
func (c *Counting) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	c.count("Acquire")
	return c.Store.Acquire(ctx, key, owner, ttl, floor)
}

// Renew implements backend.Store.
func (c *Counting) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	c.count("Renew")
	return c.Store.Renew(ctx, key, owner, ttl)
}

// Release implements backend.Store.
func (c *Counting) Release(ctx context.Context, key, owner string, keepFor time.Duration) error {
	c.count("Release")
	return c.Store.Release(ctx, key, owner, keepFor)
}

// Get implements backend.Store.
func (c *Counting) Get(ctx context.Context, key string) (backend.Lease, error) {
	c.count("Get")
	return c.Store.Get(ctx, key)
}

// Watch implements backend.Store.
func (c *Counting) Watch(ctx context.Context, key string) (backend.Watch, error) {
	c.count("Watch")
	return c.Store.Watch(ctx, key)
}

// AcquireQueued implements backend.Queue.
func (c *Counting) AcquireQueued(ctx context.Context, key, owner string, ttl time.Duration, floor uint64, patience time.Duration) (backend.Lease, error) {
	c.count("AcquireQueued")
	return c.Store.AcquireQueued(ctx, key, owner, ttl, floor, patience)
}

// Dequeue implements backend.Queue.
func (c *Counting) Dequeue(ctx context.Context, key, owner string) error {
	c.count("Dequeue")
	return c.Store.Dequeue(ctx, key, owner)
}

// AwaitHandover implements backend.Handover.
func (c *Counting) AwaitHandover(ctx context.Context, key, owner string, max time.Duration) (backend.Lease, bool, error) {
	c.count("AwaitHandover")
	return c.Store.AwaitHandover(ctx, key, owner, max)
}
