package synclock

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/internal/lease"
)

// Locker hands out the cross-instance locks of one instance on one store.
// Create it with NewLocker; it starts no goroutine until a lock is used
// and is safe for concurrent use.
type Locker struct {
	store  backend.Store
	id     instanceid.ID
	idText string
	cfg    Config
	clock  clock.Clock
	logger *slog.Logger

	parkLimit int         // most idle watches kept (maxParked; tests lower it)
	terms     lease.Terms // of every holding

	noHandover atomic.Bool // the store refused AwaitHandover (errors.ErrUnsupported)
	observer   func(Event)

	mu     sync.Mutex
	queues map[string]*queue       // store key -> local waiters
	parked map[string]*parkedWatch // store key -> idle watch (watches.go)
	floors map[string]*lease.Floor // store key -> highest token seen (bounded)
}

const maxFloors = 4096 // fencing floors a Locker remembers (floors)

// Option configures a Locker.
type Option func(*Locker)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(lk *Locker) {
		if l != nil {
			lk.logger = l
		}
	}
}

func withClock(c clock.Clock) Option {
	return func(lk *Locker) { lk.clock = c }
}

// NewLocker returns the locker of instance id on store.
func NewLocker(store backend.Store, id instanceid.ID, cfg Config, opts ...Option) (*Locker, error) {
	if store == nil {
		return nil, errors.New("synclock: nil store: pass a backend such as redisbackend.New(client)")
	}
	if err := id.Validate(); err != nil {
		return nil, fmt.Errorf("synclock: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	lk := &Locker{
		store:     store,
		id:        id,
		idText:    id.String(),
		cfg:       cfg.WithDefaults(),
		clock:     clock.Real,
		logger:    slog.Default(),
		queues:    make(map[string]*queue),
		parked:    make(map[string]*parkedWatch),
		floors:    make(map[string]*lease.Floor),
		parkLimit: maxParked,
	}
	for _, o := range opts {
		o(lk)
	}
	lk.terms = lease.Terms{Store: store, Alarm: lease.NewAlarm(lk.clock), Margin: lease.Margin(lk.cfg.ClaimWindow), OpTimeout: lk.cfg.OperationTimeout}
	lk.logger = lk.logger.With("app", id.App, "tenant", id.Tenant, "instance", lk.idText, "backend", backend.StoreName(store))
	return lk, nil
}

// lockKey is a lock key with its store key (sk), or the reason it has none.
type lockKey struct {
	key, sk string
	err     error
}

// lockKey works out the store key of key; a Mutex does it once.
func (lk *Locker) lockKey(key string) lockKey {
	if key == "" {
		return lockKey{err: fmt.Errorf("synclock: %w: lock key is empty", backend.ErrInvalidArgument)}
	}
	sk := backend.AppKey(lk.id.Tenant, lk.id.App, "lock", key)
	if err := backend.ValidateKey(sk); err != nil {
		return lockKey{key: key, err: fmt.Errorf("synclock: lock key %q: %w", key, err)}
	}
	return lockKey{key: key, sk: sk}
}

// floor returns the floor (lease.Floor) of sk, remembering at most
// maxFloors keys: past that it forgets one at random.
func (lk *Locker) floor(sk string) *lease.Floor {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	f := lk.floors[sk]
	if f == nil {
		if len(lk.floors) >= maxFloors {
			for k := range lk.floors {
				delete(lk.floors, k)
				break
			}
		}
		f = new(lease.Floor)
		lk.floors[sk] = f
	}
	return f
}

// acquire waits for key (local queue, then the store) and returns the
// grant; wait=false tries once. gate is a Mutex's (nil for DoKey): locked
// first, until Unlock, and the holding then outlives ctx.
func (lk *Locker) acquire(ctx context.Context, k lockKey, wait bool, gate chan struct{}) (g *grant, err error) {
	start, tries := lk.clock.Now(), 0
	defer func() {
		e := Event{Kind: EventRefused, Key: k.key, Wait: lk.clock.Since(start), Tries: tries, Err: err}
		if err == nil {
			e.Kind, e.Token, e.Handed = EventAcquired, g.Token(), g.handed
		}
		lk.report(e)
	}()
	if lk.cfg.Disabled {
		return nil, ErrDisabled
	}
	if k.err != nil {
		return nil, k.err
	}
	if err := lk.mayWait(ctx, k, wait); err != nil {
		return nil, err
	}
	w := localWait{lk: lk, ctx: ctx, start: start}
	if gate != nil {
		if err := w.lockGate(gate, wait); err != nil {
			w.stop()
			return nil, lk.localError(k.key, "is a Mutex locked by another goroutine of this instance (it stays locked until its Unlock, even after its lease lapsed)", err, start)
		}
	}
	q, err := lk.enter(&w, k.sk, wait)
	w.stop()
	if err != nil {
		unlockGate(gate)
		return nil, lk.localError(k.key, "is held by another goroutine of this instance", err, start)
	}
	t := lk.takeTicket(q)
	if err = ctx.Err(); err != nil {
		err = endedBefore(ctx, k.key) // the local turn came as ctx ended: ask the store nothing
		if t != nil {
			lk.dequeue(ctx, k.key, k.sk, t.owner) // nor keep the place taken for it
		}
	} else {
		g, tries, err = lk.claim(ctx, k.key, k.sk, q, wait, w.retries(), gate != nil, t)
	}
	if err != nil {
		lk.exit(k.sk, q, nil)
		unlockGate(gate)
		return nil, err
	}
	return g, nil
}

// mayWait refuses an acquisition whose ctx has ended, and a wait for a key
// that ctx's call chain holds on this store.
func (lk *Locker) mayWait(ctx context.Context, k lockKey, wait bool) error {
	if ctx.Err() != nil {
		return endedBefore(ctx, k.key)
	}
	if !wait {
		return nil
	}
	if g := heldBy(ctx, lk, k.sk); g != nil {
		return fmt.Errorf("synclock: lock %q: %w: the context comes from the section of its holding (token %d) on the same store, through another Locker or a Mutex, so this wait could end only when that holding does; "+
			"nest the call through the Locker that holds the key (it runs the section directly), or run it after the section",
			k.key, ErrReentrant, g.Token())
	}
	return nil
}

// endedBefore is the error of an acquisition that asked the store nothing.
func endedBefore(ctx context.Context, key string) error {
	return errors.Join(fmt.Errorf("synclock: lock %q: the caller's context ended before the store was asked; nothing was sent to it", key), backend.ContextError(ctx))
}

func unlockGate(gate chan struct{}) {
	if gate != nil {
		gate <- struct{}{}
	}
}

// localError is the error of giving up, because of err, waiting behind
// other goroutines of this process (why).
func (lk *Locker) localError(key, why string, err error, start time.Time) error {
	switch {
	case errors.Is(err, ErrLocked):
		return fmt.Errorf("synclock: lock %q %s: %w", key, why, err)
	case err == errLocalBudget:
		return fmt.Errorf("synclock: lock %q %s; gave up after waiting %v behind it (MaxRetries %d x RetryInterval %v): %w",
			key, why, lk.clock.Since(start).Round(time.Millisecond), lk.cfg.MaxRetries, lk.cfg.RetryInterval, ErrLocked)
	}
	return errors.Join(fmt.Errorf("synclock: lock %q %s; the caller's context ended while it waited: %w", key, why, ErrLocked), err)
}

// uncancelled returns ctx without its cancellation, saving an allocation
// when it has none.
func uncancelled(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// newOwner returns "<id>#<16 hex digits>", a nonce per acquisition, in
// one allocation.
func (lk *Locker) newOwner() string {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], rand.Uint64())
	var h [16]byte
	hex.Encode(h[:], n[:])
	return lk.idText + "#" + string(h[:])
}
