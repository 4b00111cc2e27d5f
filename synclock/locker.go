package synclock

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/internal/clock"
)

// Locker hands out the cross-instance locks of one instance: it holds the
// store, the instance's ID (the value the seed wrote under a lock key) and
// the configuration. Create it with NewLocker; it starts no goroutine
// until a lock is used and is safe for concurrent use.
type Locker struct {
	store  backend.Store
	id     instanceid.ID
	idText string
	cfg    Config
	clock  clock.Clock
	logger *slog.Logger

	autoRenew   time.Duration // total hold ceiling with renewals; 0: no renewals
	patience    time.Duration // how long a waiter's place in a store's line outlives its last try
	opTimeout   time.Duration
	leaseMargin time.Duration
	parkLimit   int // most idle watches kept (maxParked; tests lower it)

	noHandover atomic.Bool // the store refused AwaitHandover (errors.ErrUnsupported)
	observer   func(Event) // WithObserver; nil: none
	alarm      alarm       // the grants' deadlines (alarm.go)

	mu     sync.Mutex
	queues map[string]*queue       // store key -> local waiters
	parked map[string]*parkedWatch // store key -> idle watch (watches.go)
	floors map[string]uint64       // store key -> highest token seen (bounded)
}

// maxFloors bounds the fencing floors a Locker remembers for keys nobody
// in the process is using.
const maxFloors = 4096

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

// WithAutoRenew makes a holder renew its lease while the section runs, up
// to max in total: a long section keeps the lock past HoldDuration, but
// never past max, so a stuck holder still cannot keep it forever. Without
// it a holder keeps the lock at most HoldDuration, the seed's rule.
func WithAutoRenew(max time.Duration) Option {
	return func(lk *Locker) { lk.autoRenew = max }
}

// WithOperationTimeout bounds each call to the store that must finish even
// when the caller's context has ended, such as the release (default 5 s).
func WithOperationTimeout(d time.Duration) Option {
	return func(lk *Locker) { lk.opTimeout = d }
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
		opTimeout: 5 * time.Second,
		queues:    make(map[string]*queue),
		parked:    make(map[string]*parkedWatch),
		floors:    make(map[string]uint64),
		parkLimit: maxParked,
	}
	for _, o := range opts {
		o(lk)
	}
	lk.alarm.clock = lk.clock
	if lk.autoRenew < 0 {
		return nil, fmt.Errorf("synclock: WithAutoRenew(%v): the ceiling must not be negative", lk.autoRenew)
	}
	if lk.autoRenew > 0 && lk.autoRenew < lk.cfg.HoldDuration {
		return nil, fmt.Errorf("synclock: WithAutoRenew(%v) is shorter than HoldDuration %v: the ceiling must be at least one hold", lk.autoRenew, lk.cfg.HoldDuration)
	}
	if lk.opTimeout <= 0 {
		return nil, fmt.Errorf("synclock: WithOperationTimeout(%v) must be positive", lk.opTimeout)
	}
	lk.leaseMargin = min(lk.cfg.ClaimWindow/10, time.Second)
	// A live waiter asks again at least every RetryInterval; a place
	// outlives that three times over, so only a waiter that is gone
	// loses it, and the lock waits at most that long for a dead one.
	lk.patience = 3 * lk.cfg.RetryInterval
	lk.logger = lk.logger.With("instance", lk.idText)
	return lk, nil
}

// ID returns the instance ID the locker writes as the holder.
func (lk *Locker) ID() instanceid.ID { return lk.id }

// lockKey is a lock key with its store key, or the reason it has none.
type lockKey struct {
	key string // the caller's
	sk  string // the store's; empty if err is set
	err error
}

// lockKey returns the store key of a lock key. A Mutex works it out once.
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

// queue orders the goroutines of this process that want one key, so that
// only the one at its head talks to the store.
type queue struct {
	users   int             // holder + waiters; the queue is dropped at zero
	busy    bool            // a goroutine owns the turn
	waiters []chan struct{} // FIFO; closed to hand over the turn
	watch   backend.Watch   // open while the queue lives and someone waited
}

// localWait bounds how long one acquisition waits behind other
// goroutines of this process — first for a Mutex's previous holding to be
// unlocked, then for the key's local turn — by its context and, with
// MaxRetries set, by one budget for all of it: MaxRetries retry
// intervals, the time a waiter at the store would spend in its retries.
type localWait struct {
	lk    *Locker
	ctx   context.Context
	start time.Time   // when the acquisition began
	timer clock.Timer // the budget's, made when the first wait begins
}

// budget returns a channel that delivers when the budget is spent, or
// nil (never) without MaxRetries.
func (w *localWait) budget() <-chan time.Time {
	lk := w.lk
	if lk.cfg.MaxRetries <= 0 {
		return nil
	}
	if w.timer == nil {
		w.timer = lk.clock.NewTimer(time.Duration(lk.cfg.MaxRetries)*lk.cfg.RetryInterval - lk.clock.Since(w.start))
	}
	return w.timer.C()
}

// retries is how many store retries the local waiting used up: one per
// whole RetryInterval, with MaxRetries set; 0 if nothing was waited for.
func (w *localWait) retries() int {
	if w.timer == nil {
		return 0
	}
	return int(w.lk.clock.Since(w.start) / w.lk.cfg.RetryInterval)
}

func (w *localWait) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}

// lockGate locks a Mutex: gate is full while the Mutex is locked, from
// Lock until Unlock. With wait false it fails with ErrLocked at once if
// the Mutex is locked.
func (w *localWait) lockGate(gate chan struct{}, wait bool) error {
	select {
	case gate <- struct{}{}:
		return nil
	default:
	}
	if !wait {
		return ErrLocked
	}
	select {
	case gate <- struct{}{}:
		return nil
	case <-w.ctx.Done():
		return backend.ContextError(w.ctx)
	case <-w.budget():
		return errLocalBudget
	}
}

// enter joins key's local queue and returns when the caller owns the
// turn. With wait false it fails with ErrLocked at once if another
// goroutine owns the turn. A waiter gives up when w's context ends (the
// context's error) or its budget is spent (errLocalBudget).
func (lk *Locker) enter(w *localWait, sk string, wait bool) (*queue, error) {
	lk.mu.Lock()
	q := lk.queues[sk]
	if q == nil {
		q = &queue{watch: lk.unparkLocked(sk)}
		lk.queues[sk] = q
	}
	if !q.busy {
		q.users++
		q.busy = true
		lk.mu.Unlock()
		return q, nil
	}
	if !wait {
		lk.mu.Unlock()
		return nil, ErrLocked
	}
	q.users++
	turn := make(chan struct{})
	q.waiters = append(q.waiters, turn)
	lk.mu.Unlock()
	var err error
	select {
	case <-turn:
		return q, nil
	case <-w.ctx.Done():
		err = backend.ContextError(w.ctx)
	case <-w.budget():
		err = errLocalBudget
	}
	lk.mu.Lock()
	var pw backend.Watch
	select {
	case <-turn:
		if err == errLocalBudget {
			// The turn came as the budget ran out: take it, with
			// one try left at the store.
			lk.mu.Unlock()
			return q, nil
		}
		// The turn arrived as we gave up: pass it on.
		pw = lk.passLocked(sk, q)
	default:
		for i, t := range q.waiters {
			if t == turn {
				q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
				break
			}
		}
		pw = lk.leaveLocked(sk, q)
	}
	lk.mu.Unlock()
	closeWatch(pw)
	return nil, err
}

// errLocalBudget is a local wait giving up when its budget is spent.
var errLocalBudget = errors.New("synclock: local wait budget spent")

// exit gives the turn to the next local waiter.
func (lk *Locker) exit(sk string, q *queue) {
	lk.mu.Lock()
	w := lk.passLocked(sk, q)
	lk.mu.Unlock()
	closeWatch(w)
}

// passLocked hands q's turn to the next waiter, or frees it, and leaves
// the queue. It returns a watch the caller closes after unlocking lk.mu.
func (lk *Locker) passLocked(sk string, q *queue) backend.Watch {
	if len(q.waiters) > 0 {
		next := q.waiters[0]
		q.waiters = q.waiters[1:]
		close(next)
	} else {
		q.busy = false
	}
	return lk.leaveLocked(sk, q)
}

// leaveLocked drops one user of q, and q with the last one. It returns a
// watch the caller closes after unlocking lk.mu: closing may be a round
// trip to the store, which must not stall the other keys.
func (lk *Locker) leaveLocked(sk string, q *queue) backend.Watch {
	q.users--
	if q.users > 0 {
		return nil
	}
	delete(lk.queues, sk)
	w := q.watch
	q.watch = nil
	if w == nil {
		return nil
	}
	return lk.parkLocked(sk, w)
}

// closeWatch closes w, if any. Call it without holding lk.mu.
func closeWatch(w backend.Watch) {
	if w != nil {
		w.Close()
	}
}

func (lk *Locker) floor(sk string) uint64 {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.floors[sk]
}

func (lk *Locker) observe(sk string, token uint64) {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if token <= lk.floors[sk] {
		return
	}
	if _, ok := lk.floors[sk]; !ok && len(lk.floors) >= maxFloors {
		for k := range lk.floors { // forget one at random
			delete(lk.floors, k)
			break
		}
	}
	lk.floors[sk] = token
}

// grant is one holding of a lock.
type grant struct {
	lk      *Locker
	key     string // the caller's key
	sk      string // the store key
	q       *queue
	owner   string
	lease   backend.Lease
	outer   *grant          // the section ctx came from, if any (reentrancy)
	ctx     context.Context // carries the grant; cancelled when the lease ends or is about to
	cancel  context.CancelCauseFunc
	start   time.Time     // when the holding began
	sent    time.Time     // when the request that got the lease was sent
	first   time.Duration // the first lease, counted from sent
	handed  bool          // a release handed the lock over
	lost    sync.Once     // run once: by lose (the lease ran out) or by release (no longer losable)
	expired bool          // lose ran first; written and read only through lost
	over    atomic.Bool   // the holding ended: lost or released; Token no longer claims it
	turn    sync.Once     // passes the local turn on: at the loss or at the release

	// One deadline per grant on the Locker's alarm (fire): if the grant
	// renews, the first starts the renewal (renews is then set), and from
	// then on, or from the start if it does not renew, the deadline is a
	// margin before the lease ends. due and slot belong to the alarm.
	due    time.Time
	slot   int
	renews atomic.Bool

	// The renewal: ending, under renewMu, keeps it from starting once the
	// release began; a renewal that starts sets stopRen, which cancels
	// its store call and its waits and which the release calls, and
	// renewWG waits for it to end.
	renewMu sync.Mutex
	ending  bool
	stopRen context.CancelFunc
	renewWG sync.WaitGroup

	once sync.Once
}

// acquire waits for key (local queue, then the store) and returns the
// grant. wait=false tries once and fails with ErrLocked. gate is a
// Mutex's (nil for DoKey): it is locked first and stays locked until the
// Mutex's Unlock, and the holding outlives ctx — it lasts until Unlock or
// the lease's end. Without a gate the section's context ends with ctx.
func (lk *Locker) acquire(ctx context.Context, k lockKey, wait bool, gate chan struct{}) (*grant, error) {
	key := k.key
	start := lk.clock.Now()
	g, tries, err := lk.acquireAt(ctx, k, wait, gate, start)
	if err != nil {
		lk.report(Event{Kind: EventRefused, Key: key, Wait: lk.clock.Since(start), Tries: tries, Err: err})
		return nil, err
	}
	lk.report(Event{Kind: EventAcquired, Key: key, Token: g.lease.Token, Wait: lk.clock.Since(start), Tries: tries, Handed: g.handed})
	return g, nil
}

// acquireAt is acquire without the report; it also returns the claims
// sent to the store.
func (lk *Locker) acquireAt(ctx context.Context, k lockKey, wait bool, gate chan struct{}, start time.Time) (*grant, int, error) {
	if lk.cfg.Disabled {
		return nil, 0, ErrDisabled
	}
	if k.err != nil {
		return nil, 0, k.err
	}
	key, sk := k.key, k.sk
	w := localWait{lk: lk, ctx: ctx, start: start}
	if gate != nil {
		if err := w.lockGate(gate, wait); err != nil {
			w.stop()
			return nil, 0, lk.localError(key, "is a Mutex locked by another goroutine of this instance (it stays locked until its Unlock, even after its lease lapsed)", err, start)
		}
	}
	q, err := lk.enter(&w, sk, wait)
	w.stop()
	if err != nil {
		unlockGate(gate)
		return nil, 0, lk.localError(key, "is held by another goroutine of this instance", err, start)
	}
	g, tries, err := lk.claim(ctx, key, sk, q, wait, w.retries(), gate != nil)
	if err != nil {
		lk.exit(sk, q)
		unlockGate(gate)
		return nil, tries, err
	}
	return g, tries, nil
}

// unlockGate unlocks a Mutex's gate, if any.
func unlockGate(gate chan struct{}) {
	if gate != nil {
		<-gate
	}
}

// localError is the error of an acquisition that gave up waiting behind
// other goroutines of this process, because (why) of err.
func (lk *Locker) localError(key, why string, err error, start time.Time) error {
	switch {
	case errors.Is(err, ErrLocked):
		return fmt.Errorf("synclock: lock %q %s: %w", key, why, err)
	case err == errLocalBudget:
		return fmt.Errorf("synclock: lock %q %s; gave up after waiting %v behind it (MaxRetries %d x RetryInterval %v): %w",
			key, why, lk.clock.Since(start).Round(time.Millisecond), lk.cfg.MaxRetries, lk.cfg.RetryInterval, ErrLocked)
	}
	return errors.Join(fmt.Errorf("synclock: waiting for lock %q behind local holders: %w", key, ErrTimeout), err)
}

// claim takes the lock in the store for the goroutine that owns q's turn.
// On a store with waiting lines (backend.Queue) a waiter holds a place in
// the key's line while it waits, so that the lock goes to the instance that
// has waited longest, and it leaves the line when it gives up. On a store
// that hands over (backend.Handover) the release grants the key to the
// first waiter, who collects it without another request; elsewhere a
// waiter sleeps until a release is announced and then asks again. used is
// the retries the caller already spent waiting behind local holders. A
// store that refuses because it restarted without its data (Recovering)
// grants the key to nobody for the time it names: the waiter sleeps that
// long, bounded by ctx, and the refusal is not counted as a retry.
func (lk *Locker) claim(ctx context.Context, key, sk string, q *queue, wait bool, used int, detach bool) (*grant, int, error) {
	tries := 0
	spared := 0 // tries refused as Recovering: not retries
	owner := lk.newOwner()
	// A grant, and a handover asked for in line, first lasts ClaimWindow;
	// the holder extends it if its section runs long (renew).
	ttl := lk.cfg.ClaimWindow
	line, _ := lk.store.(backend.Queue)
	hand, _ := lk.store.(backend.Handover)
	if lk.noHandover.Load() {
		hand = nil
	}
	var patience time.Duration
	if wait {
		patience = lk.patience
	}
	for {
		sent := lk.clock.Now()
		var l backend.Lease
		var err error
		if line != nil {
			l, err = line.AcquireQueued(ctx, sk, owner, ttl, lk.floor(sk), patience)
		} else {
			l, err = lk.store.Acquire(ctx, sk, owner, ttl, lk.floor(sk))
		}
		tries++
		if err == nil {
			lk.observe(sk, l.Token)
			return lk.newGrant(ctx, detach, key, sk, q, owner, l, sent), tries, nil
		}
		var held *backend.HeldError
		if !errors.As(err, &held) {
			return nil, tries, lk.giveUp(ctx, line, key, sk, owner, patience, nil, fmt.Errorf("synclock: acquiring lock %q: %w", key, err))
		}
		lk.observe(sk, held.Holder.Token)
		locked := &lockedError{key: key, holder: held.Holder, next: held.Next, recovering: held.Recovering}
		if !wait {
			return nil, tries, locked
		}
		if held.Recovering {
			// Nobody gets the key before Holder.TTL, and no release can
			// come sooner: sleep it out, then ask again.
			spared++
			if err := lk.sleep(ctx, held.Holder.TTL); err != nil {
				return nil, tries, lk.giveUp(ctx, line, key, sk, owner, patience, locked, err)
			}
			continue
		}
		if lk.cfg.MaxRetries > 0 && tries-spared+used > lk.cfg.MaxRetries {
			lk.leaveLine(ctx, line, key, sk, owner, patience)
			locked.tries = tries
			return nil, tries, locked
		}
		poll := lk.cfg.RetryInterval
		if held.Holder.Owner != "" {
			poll = min(poll, held.Holder.TTL+time.Millisecond)
		}
		if hand != nil {
			// The refused request was sent before any handover to
			// owner can happen, so the lease is counted from then.
			l, ok, err := hand.AwaitHandover(ctx, sk, owner, poll)
			switch {
			case ok:
				lk.observe(sk, l.Token)
				g := lk.newGrant(ctx, detach, key, sk, q, owner, l, sent)
				g.handed = true
				return g, tries, nil
			case errors.Is(err, errors.ErrUnsupported):
				// Wait for releases instead, from now on.
				lk.noHandover.Store(true)
				hand = nil
			case err != nil:
				return nil, tries, lk.giveUp(ctx, line, key, sk, owner, patience, locked,
					fmt.Errorf("synclock: waiting for lock %q, %s: %w", key, locked.holderText(), err))
			default:
				continue // nothing handed over in time: ask again, which keeps the place
			}
		}
		if q.watch == nil {
			// Subscribe once per queue, then look again at once: a
			// release between the failed claim and the subscription
			// would otherwise go unseen until the fallback poll.
			if w, err := lk.store.Watch(ctx, sk); err == nil {
				q.watch = w
				continue
			} else if !ended(ctx) {
				lk.logger.Warn("synclock: cannot watch the lock key; falling back to polling", "key", key, "err", err)
			}
		}
		if err := lk.waitTurn(ctx, q, poll, owner); err != nil {
			return nil, tries, lk.giveUp(ctx, line, key, sk, owner, patience, locked, err)
		}
	}
}

// giveUp leaves the line after a failed wait or store call and returns
// err, or, if ctx ended, ErrTimeout (naming the holder when the last
// refusal, locked, is known) joined with the context's error.
func (lk *Locker) giveUp(ctx context.Context, line backend.Queue, key, sk, owner string, patience time.Duration, locked *lockedError, err error) error {
	lk.leaveLine(ctx, line, key, sk, owner, patience)
	if ctx.Err() == nil {
		return err
	}
	if locked == nil {
		return errors.Join(fmt.Errorf("synclock: waiting for lock %q: %w", key, ErrTimeout), backend.ContextError(ctx))
	}
	return errors.Join(fmt.Errorf("synclock: waiting for lock %q, %s: %w", key, locked.holderText(), ErrTimeout), backend.ContextError(ctx))
}

// leaveLine takes a waiter that gives up out of the key's line, so that
// the lock does not sit idle, kept for it, until its place lapses. It runs
// even when ctx has ended.
func (lk *Locker) leaveLine(ctx context.Context, line backend.Queue, key, sk, owner string, patience time.Duration) {
	if line == nil || patience <= 0 {
		return
	}
	dctx, cancel := context.WithTimeout(uncancelled(ctx), lk.opTimeout)
	defer cancel()
	if err := line.Dequeue(dctx, sk, owner); err != nil {
		lk.logger.Warn("synclock: leaving the lock's waiting line failed; the place lapses by itself", "key", key, "patience", patience, "err", err)
	}
}

// waitTurn sleeps until a release is announced that does not keep the key
// for another waiter in line, d passes, or ctx ends. Announced renewals
// move the wake-up to the holder's new expiry, but never past d: a waiter
// asks again at least every d, which keeps its place in the line.
func (lk *Locker) waitTurn(ctx context.Context, q *queue, d time.Duration, owner string) error {
	var events <-chan backend.Event
	if q.watch != nil {
		events = q.watch.C()
	}
	start := lk.clock.Now()
	t := lk.clock.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case ev := <-events:
			switch {
			case ev.Kind == backend.EventRenewed:
				// Held for ev.TTL more: poll no earlier than that allows.
				t.Reset(min(lk.cfg.RetryInterval-lk.clock.Since(start), ev.TTL+time.Millisecond))
				continue
			case ev.Kind == backend.EventReleased && ev.Next != "" && ev.Next != owner:
				continue // the store keeps the key for the waiter first in line
			}
			return nil
		case <-t.C():
			return nil
		case <-ctx.Done():
			return backend.ContextError(ctx)
		}
	}
}

// sleep waits d on the Locker's clock, or until ctx ends.
func (lk *Locker) sleep(ctx context.Context, d time.Duration) error {
	t := lk.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return backend.ContextError(ctx)
	}
}

// newGrant starts the holding of a lease. Its context keeps ctx's values;
// with detach it does not end with ctx.
func (lk *Locker) newGrant(ctx context.Context, detach bool, key, sk string, q *queue, owner string, l backend.Lease, sent time.Time) *grant {
	g := &grant{lk: lk, key: key, sk: sk, q: q, owner: owner, lease: l, outer: sectionOf(ctx), start: lk.clock.Now(), sent: sent}
	parent := ctx
	if detach {
		parent = uncancelled(ctx)
	}
	g.ctx, g.cancel = context.WithCancelCause(context.WithValue(parent, sectionKey{}, g))
	// The lease ends ClaimWindow after the request was sent, or sooner if
	// the store says so (a lease handed over a while ago); give up a
	// margin before that.
	g.first = lk.cfg.ClaimWindow
	if l.TTL > 0 && l.TTL < g.first {
		g.first = l.TTL
	}
	d := lk.lossIn(g.first, sent)
	if lk.ceiling() > g.first && g.first/3 < d {
		// No goroutine until the section has run a third of the lease:
		// most sections are shorter.
		d = g.first / 3
		g.renews.Store(true)
	}
	lk.alarm.set(g, d)
	return g
}

// lossIn is how long from now a lease of ttl, counted from sent, lasts,
// less the margin: when the grant gives the lease up.
func (lk *Locker) lossIn(ttl time.Duration, sent time.Time) time.Duration {
	return ttl - lk.leaseMargin - lk.clock.Since(sent)
}

// fire is the grant's deadline coming: the first time for a grant that
// renews, the renewal starts; otherwise the lease is about to end.
func (g *grant) fire() {
	if g.renews.CompareAndSwap(true, false) {
		g.renew()
		return
	}
	g.lose(ErrLeaseExpired)
}

// ceiling is how long a holding may last in all: HoldDuration, or the
// ceiling of WithAutoRenew.
func (lk *Locker) ceiling() time.Duration {
	return max(lk.cfg.HoldDuration, lk.autoRenew)
}

// renew extends the lease while the section runs: first when a third of
// the first lease has passed, then every third of a hold, each time to
// HoldDuration or to what is left of the ceiling, whichever is shorter,
// until the lease lasts to the ceiling. A failed extension is tried again
// before the lease runs out. It runs on a goroutine of its own, and sets
// the grant's deadline to when the lease is about to end.
//
// The deadline on the alarm is the one source of truth for the grant: an
// extension is not sent once it has passed, each call is bounded by it,
// and a reply that lands after it is void (alarm.extend refuses it), so
// a late success never revives a grant that lose gave up, nor moves its
// deadline.
func (g *grant) renew() {
	g.renewMu.Lock()
	if g.ending {
		g.renewMu.Unlock()
		return
	}
	rctx, stop := context.WithCancel(g.ctx)
	g.stopRen = stop
	g.renewWG.Add(1)
	g.renewMu.Unlock()
	defer g.renewWG.Done()
	defer stop()
	lk := g.lk
	lk.alarm.set(g, lk.lossIn(g.first, g.sent))

	sent := g.sent
	hold, ceiling := lk.cfg.HoldDuration, lk.ceiling()
	end := g.first // the lease lasts until sent+end, counted from before each request
	var t clock.Timer
	for {
		left := ceiling - lk.clock.Since(sent)
		if left <= 0 || end >= ceiling {
			return
		}
		until, ok := lk.alarm.left(g)
		if !ok || until <= 0 {
			return // the deadline passed: the alarm gives the grant up
		}
		ttl := min(hold, left)
		rsent := lk.clock.Now()
		cctx, cancel := context.WithTimeout(rctx, min(lk.opTimeout, until))
		_, err := lk.store.Renew(cctx, g.sk, g.owner, ttl)
		cancel()
		wait := hold / 3
		switch {
		case err == nil:
			if !lk.alarm.extend(g, rsent.Add(ttl-lk.leaseMargin)) {
				return // the reply came after the deadline: void
			}
			end = rsent.Sub(sent) + ttl
			lk.report(Event{Kind: EventExtended, Key: g.key, Token: g.lease.Token})
		case errors.Is(err, backend.ErrNotHeld):
			g.lose(fmt.Errorf("%w: %w", ErrLeaseExpired, err))
			return
		case rctx.Err() != nil:
			return
		default:
			lk.logger.Warn("synclock: extending a lock's lease failed; will retry until the lease ends", "key", g.key, "err", err)
			wait = max((end-lk.clock.Since(sent))/3, time.Millisecond)
		}
		if t == nil {
			t = lk.clock.NewTimer(wait)
			defer t.Stop()
		} else {
			t.Reset(wait)
		}
		select {
		case <-rctx.Done():
			return
		case <-t.C():
		}
	}
}

// lose ends the section's context because the lease ended or is about
// to, reports it and passes the local turn on, so that the next goroutine
// of this process waiting for the key goes to the store; all once, unless
// the release began first (release waits for a report in progress, so
// EventLost always comes before EventReleased).
func (g *grant) lose(cause error) {
	g.lost.Do(func() {
		g.expired = true
		g.over.Store(true)
		g.cancel(cause)
		g.lk.report(Event{Kind: EventLost, Key: g.key, Token: g.lease.Token, Held: g.lk.clock.Since(g.start), Err: cause})
		g.passTurn()
	})
}

// passTurn gives the local turn to the next waiter, once per grant: at
// the loss or at the release, whichever comes first.
func (g *grant) passTurn() {
	g.turn.Do(func() { g.lk.exit(g.sk, g.q) })
}

// release ends the holding: stops renewals, deletes the key in the store
// (owner-checked, even when the caller's context has ended) and passes the
// local turn on, unless the loss did already. It reports ErrLeaseExpired
// if the lease ended first.
func (g *grant) release(ctx context.Context) error {
	var err error
	g.once.Do(func() {
		lk := g.lk
		lk.alarm.cancel(g)
		g.renewMu.Lock()
		g.ending = true // no renewal starts from now on
		stop := g.stopRen
		g.renewMu.Unlock()
		if stop != nil {
			stop() // cancels an extension in flight
			g.renewWG.Wait()
			lk.alarm.cancel(g) // the renewal may have set it again
		}
		g.lost.Do(func() {}) // the lease is no longer lost from here on
		expired := g.expired
		g.over.Store(true)
		g.cancel(context.Canceled)
		rctx, cancel := context.WithTimeout(uncancelled(ctx), lk.opTimeout)
		rerr := lk.store.Release(rctx, g.sk, g.owner, 0)
		cancel()
		g.passTurn()
		switch {
		case errors.Is(rerr, backend.ErrNotHeld):
			err = fmt.Errorf("synclock: lock %q: %w: %w", g.key, ErrLeaseExpired, rerr)
		case rerr != nil:
			lk.logger.Warn("synclock: releasing a lock failed; it expires after its hold duration", "key", g.key, "err", rerr)
			err = fmt.Errorf("synclock: releasing lock %q: %w", g.key, rerr)
		case expired:
			err = fmt.Errorf("synclock: lock %q: %w (hold duration %v, claim window %v)", g.key, ErrLeaseExpired, lk.cfg.HoldDuration, lk.cfg.ClaimWindow)
		}
		lk.report(Event{Kind: EventReleased, Key: g.key, Token: g.lease.Token, Held: lk.clock.Since(g.start), Err: err})
	})
	return err
}

// ended reports whether ctx has ended or reached its deadline: the
// client's network timeout can fire a moment before ctx.Err is set, and
// such a failure is the caller giving up, not a store problem to log.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// uncancelled returns ctx without its cancellation, and ctx itself when
// it has none (saving an allocation on every release).
func uncancelled(ctx context.Context) context.Context {
	if ctx.Done() == nil {
		return ctx
	}
	return context.WithoutCancel(ctx)
}

// newOwner returns the owner of one acquisition: the instance ID and a
// random nonce, "<id>#<16 hex digits>", in one allocation.
func (lk *Locker) newOwner() string {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], rand.Uint64())
	var h [16]byte
	hex.Encode(h[:], n[:])
	var b strings.Builder
	b.Grow(len(lk.idText) + 1 + len(h))
	b.WriteString(lk.idText)
	b.WriteByte('#')
	b.Write(h[:])
	return b.String()
}
