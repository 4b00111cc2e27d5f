// Package membackend is an in-process lease store for unit tests, examples
// and single-process programs. It implements backend.Store with the same
// guarantees as the networked stores — owner-checked renew and release,
// strictly increasing fencing tokens, expiry on the store's own clock,
// release notifications — so policy code tested on it behaves the same on
// Redis or Consul.
//
// Every user of one Store shares its data, as the clients of one server do.
// The store's clock is injectable (for baton's own tests), which lets
// policy tests move time instead of sleeping.
//
// Fencing tokens follow the backend.Store formula with the store's clock:
// max(counter, floor, clock in microseconds) + 1, where the store never
// reads the same microsecond twice (as a server never runs two grants in
// one), so tokens increase also on a fake clock that stands still. A
// key's counter lapses FenceLife, or the ttl of its last grant if that is
// longer, after that grant, unless a floor put it further than that ahead
// of the clock: then it never lapses. The tokens of a real-clock store are
// thus large numbers; those of a store on a fake clock follow that clock.
// A floor at or beyond backend.TokenLimit of the store's clock is refused
// with backend.ErrFloorAhead, as on every store.
// Reset plays a server wiped of its data (FLUSHALL), Restart one restarted
// without it, after which the restart guard applies (see Restart).
package membackend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
)

var (
	_ backend.Store    = (*Store)(nil)
	_ backend.Handover = (*Store)(nil)
)

// Store is an in-memory backend.Store. The zero value is not usable; call
// New.
type Store struct {
	clock      clock.Clock
	noHandover bool          // WithoutHandover
	guard      time.Duration // WithRestartGuard

	mu        sync.Mutex
	leases    map[string]*entry
	fences    map[string]fence
	sweepAt   int       // prune expired fences once there are this many
	restarted time.Time // when Restart was last called; zero if never
	lastUS    int64     // the clock reading of the last grant, in µs
	watchers  map[string]map[*watch]struct{}
	lines     map[string][]waiter            // key -> waiters in arrival order (Queue)
	mail      map[mailKey]chan backend.Lease // handed-over leases not yet collected (Handover)
	members   map[string]map[string]*member  // group -> name -> member
	closed    bool
}

// FenceLife is how long the store keeps a key's fencing counter after its
// last grant, unless that grant's ttl is longer (backend.CounterLife). A
// key idle for longer loses its counter, as on Redis, and its next token
// comes from the clock.
const FenceLife = backend.CounterKeep

// fence is a key's fencing counter: the last token granted and when the
// counter lapses (never, if zero).
type fence struct {
	token   uint64
	expires time.Time
}

type entry struct {
	owner    string
	token    uint64
	expires  time.Time
	released bool
	timer    clock.Timer // deletes the entry when it expires
}

// Option configures a Store.
type Option func(*Store)

// WithClock makes the store decide expiry on c instead of the real clock.
func WithClock(c clock.Clock) Option {
	return func(s *Store) { s.clock = c }
}

// WithRestartGuard makes the store, after Restart, refuse each key for at
// least d (instead of only the ttl asked for) until it is granted again; see
// Restart. Set it to the longest lease any holder of the store's keys
// keeps. d must not be negative.
func WithRestartGuard(d time.Duration) Option {
	return func(s *Store) { s.guard = max(d, 0) }
}

// WithoutHandover makes the store keep a released key free for the waiter
// first in line, naming it in EventReleased, instead of handing the key to
// it (backend.Handover); AwaitHandover then fails with
// errors.ErrUnsupported. This is how a Redis store made WithReplicaAck
// behaves, and lets code that must work both ways be tested both ways.
func WithoutHandover() Option {
	return func(s *Store) { s.noHandover = true }
}

// StoreName returns "memory": the kind of store, for logs
// (backend.StoreName).
func (s *Store) StoreName() string { return "memory" }

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{
		clock:    clock.Real,
		leases:   make(map[string]*entry),
		fences:   make(map[string]fence),
		watchers: make(map[string]map[*watch]struct{}),
		lines:    make(map[string][]waiter),
		mail:     make(map[mailKey]chan backend.Lease),
		members:  make(map[string]map[string]*member),
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Acquire implements backend.Store.
func (s *Store) Acquire(ctx context.Context, key, owner string, ttl time.Duration, floor uint64) (backend.Lease, error) {
	if err := s.check(ctx, "acquire", key); err != nil {
		return backend.Lease{}, err
	}
	if err := errors.Join(backend.ValidateArgs(key, owner, ttl), backend.ValidateFloor(floor)); err != nil {
		return backend.Lease{}, fmt.Errorf("membackend: acquire: %w", err)
	}
	ttl = backend.RoundUpMillis(ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return backend.Lease{}, err
	}
	now := s.clock.Now()
	if e := s.liveLocked(key, now); e != nil {
		return backend.Lease{}, &backend.HeldError{Holder: e.lease(key, now)}
	}
	if err := s.refusalLocked(key, ttl, floor, now); err != nil {
		return backend.Lease{}, err
	}
	return s.grantLocked(key, owner, ttl, floor, now), nil
}

// refusalLocked returns why a grant of key for ttl with floor must be
// refused at now, or nil. The fencing rule's refusals come first
// (backend.CheckFence: a floor at or above the store's TokenLimit, a key
// whose counter or floor is at MaxToken). After Restart, the restart guard
// refuses a key with no counter (not granted since) until max(ttl, guard)
// has passed since the restart, when every lease granted before has ended.
func (s *Store) refusalLocked(key string, ttl time.Duration, floor uint64, now time.Time) error {
	counter, ok := s.counterLocked(key, now)
	if err := backend.CheckFence(key, "", counter, floor, now.UnixMicro()); err != nil {
		return fmt.Errorf("membackend: acquire: %w", err)
	}
	if ok || s.restarted.IsZero() {
		return nil
	}
	left := s.restarted.Add(max(ttl, s.guard)).Sub(now)
	if left <= 0 {
		return nil
	}
	return &backend.HeldError{Holder: backend.Lease{Key: key, TTL: left}, Recovering: true}
}

// counterLocked returns key's fencing counter if it has not lapsed by now.
func (s *Store) counterLocked(key string, now time.Time) (uint64, bool) {
	f, ok := s.fences[key]
	if !ok || f.lapsed(now) {
		return 0, false
	}
	return f.token, true
}

func (f fence) lapsed(now time.Time) bool {
	return !f.expires.IsZero() && !now.Before(f.expires)
}

// grantLocked gives the free key to owner with the next fencing token
// (backend.NextToken), which refusalLocked allowed.
func (s *Store) grantLocked(key, owner string, ttl time.Duration, floor uint64, now time.Time) backend.Lease {
	us := s.tickLocked(now)
	counter, _ := s.counterLocked(key, now)
	token := backend.NextToken(counter, floor, us)
	s.setFenceLocked(key, token, us, ttl, now)
	s.sweepFencesLocked(now)
	e := &entry{owner: owner, token: token}
	s.leases[key] = e
	s.expireLocked(key, e, now, ttl)
	return e.lease(key, now)
}

// tickLocked returns the clock reading of a grant at now in µs: never the
// same microsecond twice, as a server never runs two grants in one, so
// that tokens increase also on a fake clock that stands still.
func (s *Store) tickLocked(now time.Time) int64 {
	s.lastUS = max(now.UnixMicro(), s.lastUS+1, 0)
	return s.lastUS
}

// setFenceLocked moves key's counter to token, granted at the clock
// reading us for ttl, to lapse when backend.CounterLife says.
func (s *Store) setFenceLocked(key string, token uint64, us int64, ttl time.Duration, now time.Time) {
	f := fence{token: token}
	if life := backend.CounterLife(token, us, ttl, FenceLife); life > 0 {
		f.expires = now.Add(life)
	}
	s.fences[key] = f
}

// sweepFencesLocked drops lapsed counters once their number has doubled
// since the last sweep, so that keys used once do not pile up.
func (s *Store) sweepFencesLocked(now time.Time) {
	if len(s.fences) < s.sweepAt {
		return
	}
	for key, f := range s.fences {
		if f.lapsed(now) {
			delete(s.fences, key)
		}
	}
	s.sweepAt = max(2*len(s.fences), 64)
}

// Renew implements backend.Store.
func (s *Store) Renew(ctx context.Context, key, owner string, ttl time.Duration) (backend.Lease, error) {
	if err := s.check(ctx, "renew", key); err != nil {
		return backend.Lease{}, err
	}
	if err := backend.ValidateArgs(key, owner, ttl); err != nil {
		return backend.Lease{}, fmt.Errorf("membackend: renew: %w", err)
	}
	ttl = backend.RoundUpMillis(ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return backend.Lease{}, err
	}
	now := s.clock.Now()
	e := s.liveLocked(key, now)
	if e == nil || e.owner != owner || e.released {
		return backend.Lease{}, s.notHeldLocked(key, owner, e, now)
	}
	s.expireLocked(key, e, now, ttl)
	s.notifyLocked(key, backend.Event{Kind: backend.EventRenewed, TTL: ttl})
	return e.lease(key, now), nil
}

// Release implements backend.Store.
func (s *Store) Release(ctx context.Context, key, owner string, keepFor time.Duration) error {
	if err := s.check(ctx, "release", key); err != nil {
		return err
	}
	if err := backend.ValidateKey(key); err != nil {
		return fmt.Errorf("membackend: release: %w", err)
	}
	if err := backend.ValidateOwner(owner); err != nil {
		return fmt.Errorf("membackend: release: %w", err)
	}
	if err := backend.ValidateKeepFor(keepFor); err != nil {
		return fmt.Errorf("membackend: release: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, now, err := s.heldLocked(key, owner)
	if err != nil {
		return err
	}
	if keepFor > 0 {
		if e.released {
			return nil // already released; the kept time stays as it was
		}
		e.released = true
		keep := backend.RoundUpMillis(keepFor)
		s.expireLocked(key, e, now, keep)
		s.notifyLocked(key, backend.Event{Kind: backend.EventRenewed, TTL: keep})
		return nil
	}
	s.freeLocked(key, e, now)
	return nil
}

// heldLocked returns owner's live lease on key, for a release, and the
// store's clock now; or the store's closed error, or a NotHeldError.
func (s *Store) heldLocked(key, owner string) (*entry, time.Time, error) {
	if err := s.openLocked(); err != nil {
		return nil, time.Time{}, err
	}
	now := s.clock.Now()
	e := s.liveLocked(key, now)
	if e == nil || e.owner != owner {
		return nil, now, s.notHeldLocked(key, owner, e, now)
	}
	return e, now, nil
}

// Get implements backend.Store.
func (s *Store) Get(ctx context.Context, key string) (backend.Lease, error) {
	return s.onLive(ctx, "get", key, func(e *entry, now time.Time) backend.Lease { return e.lease(key, now) })
}

// onLive runs f, under the store's lock, on the live lease of key and
// returns what f returns, for op; a free key is backend.ErrNotFound.
func (s *Store) onLive(ctx context.Context, op, key string, f func(e *entry, now time.Time) backend.Lease) (backend.Lease, error) {
	if err := s.check(ctx, op, key); err != nil {
		return backend.Lease{}, err
	}
	if err := backend.ValidateKey(key); err != nil {
		return backend.Lease{}, fmt.Errorf("membackend: %s: %w", op, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return backend.Lease{}, err
	}
	now := s.clock.Now()
	e := s.liveLocked(key, now)
	if e == nil {
		return backend.Lease{}, fmt.Errorf("membackend: %s %q: %w", op, key, backend.ErrNotFound)
	}
	return f(e, now), nil
}

// Watch implements backend.Store. The in-memory store reports releases,
// renewals and expiry.
func (s *Store) Watch(ctx context.Context, key string) (backend.Watch, error) {
	if err := s.check(ctx, "watch", key); err != nil {
		return nil, err
	}
	if err := backend.ValidateKey(key); err != nil {
		return nil, fmt.Errorf("membackend: watch: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openLocked(); err != nil {
		return nil, err
	}
	w := &watch{store: s, key: key, ch: make(chan backend.Event, 1)}
	set := s.watchers[key]
	if set == nil {
		set = make(map[*watch]struct{})
		s.watchers[key] = set
	}
	set[w] = struct{}{}
	return w, nil
}

// Reset drops every lease and every fencing counter, as a FLUSHALL does to
// a Redis server: a loss the store cannot tell from its clock, so the
// restart guard does not apply (Restart is a restart). Watchers are
// signalled. Tests use it to check that fencing floors and the clock keep
// tokens increasing.
func (s *Store) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
}

// Restart drops every lease and every fencing counter, as a server
// restarted without its data would, and starts the restart guard: until a
// key is granted again, Acquire and AcquireQueued refuse it with a
// backend.HeldError whose Recovering is set, until the ttl asked for (or
// the WithRestartGuard duration, if longer) has passed since Restart on
// the store's clock. Watchers are signalled.
func (s *Store) Restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
	s.restarted = s.clock.Now()
}

func (s *Store) resetLocked() {
	for key, e := range s.leases {
		s.deleteLocked(key, e, backend.EventMaybeFree)
	}
	clear(s.fences)
	clear(s.members)
	clear(s.lines)
	clear(s.mail)
}

// Close stops the store's timers and makes every later call fail with
// backend.ErrClosed. Watches stay readable but receive nothing more.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	for _, e := range s.leases {
		if e.timer != nil {
			e.timer.Stop()
		}
	}
	return nil
}

func (s *Store) check(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("membackend: %s %q: %w", op, key, backend.ContextError(ctx))
	}
	return nil
}

func (s *Store) openLocked() error {
	if s.closed {
		return fmt.Errorf("membackend: %w", backend.ErrClosed)
	}
	return nil
}

// liveLocked returns key's entry if it has not expired by now.
func (s *Store) liveLocked(key string, now time.Time) *entry {
	e := s.leases[key]
	if e == nil {
		return nil
	}
	if !now.Before(e.expires) {
		s.deleteLocked(key, e, backend.EventMaybeFree)
		return nil
	}
	return e
}

func (s *Store) notHeldLocked(key, owner string, e *entry, now time.Time) error {
	err := &backend.NotHeldError{Key: key, Owner: owner}
	if e != nil {
		err.Holder = e.lease(key, now)
	}
	return err
}

// expireLocked sets e to expire ttl after now and arms the timer that
// removes it and wakes watchers at that moment.
func (s *Store) expireLocked(key string, e *entry, now time.Time, ttl time.Duration) {
	e.expires = now.Add(ttl)
	if e.timer != nil {
		e.timer.Stop()
	}
	e.timer = s.clock.AfterFunc(ttl, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.leases[key] == e && !s.clock.Now().Before(e.expires) {
			s.deleteLocked(key, e, backend.EventMaybeFree)
		}
	})
}

// deleteLocked removes key's entry and tells watchers why (ev).
func (s *Store) deleteLocked(key string, e *entry, ev backend.EventKind) {
	s.dropLocked(key, e)
	s.notifyLocked(key, backend.Event{Kind: ev})
}

// dropLocked removes key's entry, with its owner's uncollected handover.
func (s *Store) dropLocked(key string, e *entry) {
	if e.timer != nil {
		e.timer.Stop()
	}
	delete(s.leases, key)
	delete(s.mail, mailKey{key, e.owner})
}

func (s *Store) notifyLocked(key string, ev backend.Event) {
	for w := range s.watchers[key] {
		backend.Notify(w.ch, ev)
	}
}

func (e *entry) lease(key string, now time.Time) backend.Lease {
	return backend.Lease{Key: key, Owner: e.owner, Token: e.token, TTL: e.expires.Sub(now)}
}

type watch struct {
	store *Store
	key   string
	ch    chan backend.Event
	once  sync.Once
}

func (w *watch) C() <-chan backend.Event { return w.ch }

func (w *watch) Close() error {
	w.once.Do(func() {
		s := w.store
		s.mu.Lock()
		defer s.mu.Unlock()
		set := s.watchers[w.key]
		delete(set, w)
		if len(set) == 0 {
			delete(s.watchers, w.key)
		}
	})
	return nil
}
