package lease

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-go/baton/backend"
)

// MaxMargin caps the default margin (Margin).
const MaxMargin = time.Second

// Margin is the default margin of a holding whose policy grants leases of
// ttl: a tenth of it, at most MaxMargin.
func Margin(ttl time.Duration) time.Duration { return min(ttl/10, MaxMargin) }

// ErrExpired is the cause Lost is given when a holding's deadline came.
var ErrExpired = errors.New("lease: the lease's deadline passed")

// ErrLate reports a grant or a renewal whose reply came back after the
// holding's deadline: it is void.
var ErrLate = errors.New("lease: the store answered after the lease's deadline")

// Terms are what the holdings of one policy share: the store, the alarm,
// the margin and the bound of each store call. Make them once (a Locker's,
// a Gate's, an Elector's) and do not change them while holdings use them.
type Terms struct {
	Store     backend.Store
	Alarm     *Alarm
	Margin    time.Duration // fixed for every grant and renewal; see the package doc
	OpTimeout time.Duration // bounds each store call; the deadline bounds renewals further
}

// Late reports whether a lease of ttl asked for at sent is already over by
// the rule: a grant that must not be used.
func (t *Terms) Late(sent time.Time, ttl time.Duration) bool {
	return t.Alarm.now() >= t.deadline(sent, ttl)
}

func (t *Terms) deadline(sent time.Time, ttl time.Duration) int64 {
	return t.Alarm.of(sent) + int64(ttl-t.Margin)
}

// Hooks are the policy's side of a holding.
type Hooks interface {
	// Lost is called once when the holding ends before End: at its
	// deadline (cause ErrExpired) or on Lose. It runs under the holding's
	// lock, so an End that begins meanwhile waits for it, and before the
	// context is cancelled, with the cause it returns. It must not call
	// End or Lose.
	Lost(cause error) error
	// Woken is called, on a goroutine of its own, when a wake-up set with
	// WakeIn comes before the deadline.
	Woken()
}

// state is where a holding is in its life; it only moves forward.
type state int32

const (
	held     state = iota
	lost           // the deadline came or Lose was called: the context is cancelled
	released       // End was called: nothing is lost or renewed from now on
)

// Holder is one holding of one lease. Its zero value is ready for Start;
// policies embed it in the value they hand out, so that a holding costs
// one allocation with its context.
type Holder struct {
	t     *Terms
	hooks Hooks
	key   string
	owner string
	token uint64

	ctx    context.Context
	cancel context.CancelCauseFunc

	// On the alarm (alarm.go): deadline is read without a lock; wake,
	// due and slot belong to the alarm's lock.
	deadline atomic.Int64
	wake     int64
	due      int64
	slot     int

	mu    sync.Mutex // orders Lose and End
	state atomic.Int32
}

// Grant is a lease as the store granted it, for Start.
type Grant struct {
	Key   string        // the store key
	Owner string        // the owner string it was granted to
	Lease backend.Lease // the store's reply
	Sent  time.Time     // when the request was sent, by the alarm's clock
	TTL   time.Duration // how long the lease lasts from Sent
	// Wake, if positive, has the alarm call Woken that long after Start,
	// if that comes before the deadline (as WakeIn).
	Wake time.Duration
}

// Start begins the holding of grant g: its deadline is g.Sent + g.TTL −
// the margin. Its context keeps parent's values and ends with it. Start
// returns ErrLate, and holds nothing, if that deadline has already passed.
func (h *Holder) Start(parent context.Context, t *Terms, hooks Hooks, g Grant) error {
	now := t.Alarm.now()
	deadline := t.deadline(g.Sent, g.TTL)
	if now >= deadline {
		return ErrLate
	}
	h.t, h.hooks, h.key, h.owner, h.token = t, hooks, g.Key, g.Owner, g.Lease.Token
	h.ctx, h.cancel = context.WithCancelCause(parent)
	var wake int64
	if g.Wake > 0 && now+int64(g.Wake) < deadline {
		wake = now + int64(g.Wake)
	}
	t.Alarm.set(h, deadline, wake)
	return nil
}

// Context is cancelled when the holding is lost (with the cause Lost
// returned) or ended (context.Canceled).
func (h *Holder) Context() context.Context { return h.ctx }

// Key returns the store key held.
func (h *Holder) Key() string { return h.key }

// Owner returns the owner string the lease was granted to.
func (h *Holder) Owner() string { return h.owner }

// Token returns the lease's fencing token.
func (h *Holder) Token() uint64 { return h.token }

// Over reports whether the holding was lost or ended. No lock, no I/O.
func (h *Holder) Over() bool { return state(h.state.Load()) != held }

// Left returns how long until the deadline, by the clock: zero or less
// once it has passed or the holding was lost or ended (Lose and End take
// the deadline away before the context is cancelled). One clock read, no
// lock, no allocation.
//
// Once Left has found the deadline passed, the deadline never moves
// again: a renewal whose reply was read before the deadline and is acted
// on after it is void, so that a reader that saw the holding over never
// sees it held again.
func (h *Holder) Left() time.Duration {
	d := h.deadline.Load()
	left := time.Duration(d - h.t.Alarm.now())
	if left <= 0 && d != 0 {
		h.deadline.CompareAndSwap(d, 0)
	}
	return left
}

// WakeIn has the alarm call Woken after d, if that comes before the
// deadline; it reports whether it will.
func (h *Holder) WakeIn(d time.Duration) bool { return h.t.Alarm.wakeIn(h, d) }

// Renew extends the lease to ttl from when the request is sent. It is not
// sent once the deadline has passed, its call is bounded by the deadline,
// and a reply that lands after it is void: each case returns ErrLate and
// leaves the holding to be lost at its deadline. A store error (such as
// backend.ErrNotHeld) is returned as it is, the deadline unchanged; the
// policy decides whether it loses the holding (Lose).
func (h *Holder) Renew(ctx context.Context, ttl time.Duration) (backend.Lease, error) {
	t := h.t
	left := h.Left()
	if left <= 0 || h.Over() {
		return backend.Lease{}, ErrLate
	}
	sent := t.Alarm.Clock().Now()
	cctx, cancel := context.WithTimeout(ctx, min(t.OpTimeout, left))
	l, err := t.Store.Renew(cctx, h.key, h.owner, ttl)
	cancel()
	if err != nil {
		if h.Left() <= 0 {
			return l, errors.Join(ErrLate, err)
		}
		return l, err
	}
	if !t.Alarm.extend(h, t.deadline(sent, ttl)) {
		return l, ErrLate
	}
	return l, nil
}

// Lose ends the holding before End, once: the alarm forgets it, Lost
// runs, and the context is cancelled with the cause Lost returns. It does
// nothing once the holding was lost or ended.
func (h *Holder) Lose(cause error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.state.CompareAndSwap(int32(held), int32(lost)) {
		return
	}
	h.t.Alarm.cancel(h)
	h.cancel(h.hooks.Lost(cause))
	if a, ok := h.hooks.(AfterLoss); ok {
		a.AfterLost()
	}
}

// AfterLoss is a Hooks with more to do once the context is cancelled: what
// must not happen while the lost holder's context is still live (synclock
// passes the local turn to the next goroutine there). AfterLost runs under
// the holding's lock, after Lost, and must not call End or Lose.
type AfterLoss interface {
	AfterLost()
}

// End ends the holding for its release: from now on it is not lost and
// not renewed. It cancels the context (context.Canceled) and reports
// whether the holding had been lost before. Call it once.
func (h *Holder) End() (wasLost bool) {
	h.mu.Lock()
	wasLost = state(h.state.Swap(int32(released))) == lost
	h.mu.Unlock()
	h.t.Alarm.cancel(h)
	h.cancel(context.Canceled)
	return wasLost
}

// Drop gives the key back in the store, owner-checked, keeping it keepFor
// longer (0: free at once). It runs even when ctx has ended, bounded by
// the terms' operation timeout, and returns the store's error
// (backend.ErrNotHeld if the lease was no longer the owner's).
func (h *Holder) Drop(ctx context.Context, keepFor time.Duration) error {
	return h.t.Drop(ctx, h.key, h.owner, keepFor)
}

// Drop gives key back for owner, as Holder.Drop does: for a grant that
// came back late, which never started a holding.
func (t *Terms) Drop(ctx context.Context, key, owner string, keepFor time.Duration) error {
	rctx, cancel := t.dropContext(ctx)
	defer cancel()
	return t.Store.Release(rctx, key, owner, keepFor)
}

// DropJoin gives the lease back as Drop does (keepFor 0), through r's
// ReleaseAndJoin, which puts next in the key's line in the same step if
// the release hands the key over; it reports whether next joined.
func (h *Holder) DropJoin(ctx context.Context, r backend.Rejoin, next string, ttl time.Duration, floor uint64, patience time.Duration) (bool, error) {
	rctx, cancel := h.t.dropContext(ctx)
	defer cancel()
	return r.ReleaseAndJoin(rctx, h.key, h.owner, next, ttl, floor, patience)
}

// dropContext bounds a release by OpTimeout, even when ctx has ended.
func (t *Terms) dropContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if ctx.Done() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	return context.WithTimeout(ctx, t.OpTimeout)
}
