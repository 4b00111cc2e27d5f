package synclock

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
)

// queue orders the goroutines of this process that want one key, so that
// only the one at its head talks to the store.
type queue struct {
	busy    bool            // a goroutine owns the turn
	waiters []chan struct{} // FIFO; closed to hand over the turn
	watch   backend.Watch   // open while the queue lives and someone waited
	ticket  *ticket         // a place in the store's line for the next turn
}

// ticket is a place in the store's line that a holder releasing the key
// took for the goroutine that owns the turn next (backend.Rejoin): the
// owner it stands in line as, and when the request that took it was
// sent, which came before any handover to it.
type ticket struct {
	owner string
	sent  time.Time
}

// leftover is what a queue given up leaves to end after lk.mu is
// unlocked, each a round trip to the store: its watch, and a place in the
// store's line that no goroutine took.
type leftover struct {
	watch  backend.Watch
	ticket *ticket
}

// localWait bounds an acquisition's waits behind other goroutines of this
// process (a Mutex's Unlock, then the key's turn) by its context and, with
// MaxRetries, one budget of MaxRetries retry intervals for all of them.
type localWait struct {
	lk    *Locker
	ctx   context.Context
	start time.Time   // when the acquisition began
	timer clock.Timer // the budget's, made when the first wait begins
}

// wait blocks until ch delivers, ctx ends, or the budget is spent.
func (w *localWait) wait(ch <-chan struct{}) error {
	var budget <-chan time.Time
	if lk := w.lk; lk.cfg.MaxRetries > 0 {
		if w.timer == nil {
			w.timer = lk.clock.NewTimer(time.Duration(lk.cfg.MaxRetries)*lk.cfg.RetryInterval - lk.clock.Since(w.start))
		}
		budget = w.timer.C()
	}
	select {
	case <-ch:
		return nil
	case <-w.ctx.Done():
		return backend.ContextError(w.ctx)
	case <-budget:
		return errLocalBudget
	}
}

// retries is the store retries the local waits used up: one per whole
// RetryInterval, with MaxRetries set.
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

// lockGate locks a Mutex's gate; with wait false it fails with ErrLocked
// if the Mutex is locked.
func (w *localWait) lockGate(gate chan struct{}, wait bool) error {
	select {
	case <-gate:
		return nil
	default:
	}
	if !wait {
		return ErrLocked
	}
	return w.wait(gate)
}

// enter returns when the caller owns the turn of sk's local queue; with
// wait false it fails with ErrLocked if another goroutine owns it.
func (lk *Locker) enter(w *localWait, sk string, wait bool) (*queue, error) {
	lk.mu.Lock()
	q := lk.queues[sk]
	if q == nil {
		q = &queue{watch: lk.unparkLocked(sk)}
		lk.queues[sk] = q
	}
	if q.busy && !wait {
		lk.mu.Unlock()
		return nil, ErrLocked
	}
	if !q.busy {
		q.busy = true
		lk.mu.Unlock()
		return q, nil
	}
	turn := make(chan struct{})
	q.waiters = append(q.waiters, turn)
	lk.mu.Unlock()
	err := w.wait(turn)
	if err == nil {
		return q, nil
	}
	lk.mu.Lock()
	var left leftover
	select {
	case <-turn:
		if err == errLocalBudget {
			// The turn came as the budget ran out: take it, with one try
			// left at the store.
			lk.mu.Unlock()
			return q, nil
		}
		left = lk.passLocked(sk, q) // the turn came as we gave up: pass it on
	default:
		q.waiters = slices.DeleteFunc(q.waiters, func(t chan struct{}) bool { return t == turn })
		left = lk.leaveLocked(sk, q)
	}
	lk.mu.Unlock()
	lk.settle(sk, left)
	return nil, err
}

var errLocalBudget = errors.New("synclock: local wait budget spent")

// exit passes q's turn on, with t (if any), the place in the store's line
// that the holder's release took for the next turn.
func (lk *Locker) exit(sk string, q *queue, t *ticket) {
	lk.mu.Lock()
	if t != nil {
		q.ticket = t
	}
	left := lk.passLocked(sk, q)
	lk.mu.Unlock()
	lk.settle(sk, left)
}

// takeTicket returns, and takes from q, the place in the store's line that
// a release took for the turn's new owner, if any.
func (lk *Locker) takeTicket(q *queue) *ticket {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	t := q.ticket
	q.ticket = nil
	return t
}

// waitedFor reports whether another goroutine of this process waits for
// q's turn.
func (lk *Locker) waitedFor(q *queue) bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return len(q.waiters) > 0
}

// passLocked hands q's turn to the next waiter, or frees it, and leaves q
// as leaveLocked does.
func (lk *Locker) passLocked(sk string, q *queue) leftover {
	if len(q.waiters) > 0 {
		next := q.waiters[0]
		q.waiters = q.waiters[1:]
		close(next)
	} else {
		q.busy = false
	}
	return lk.leaveLocked(sk, q)
}

// leaveLocked drops q once nobody uses it. It returns what the caller
// ends after unlocking lk.mu (settle): a close or a Dequeue is a round
// trip to the store, which must not stall the other keys.
func (lk *Locker) leaveLocked(sk string, q *queue) leftover {
	if q.busy || len(q.waiters) > 0 {
		return leftover{}
	}
	delete(lk.queues, sk)
	left := leftover{ticket: q.ticket}
	q.ticket = nil
	if w := q.watch; w != nil {
		q.watch = nil
		left.watch = lk.parkLocked(sk, w)
	}
	return left
}

// settle ends what leaveLocked left: it closes the watch and takes the
// untaken place out of the store's line, so that the key is not handed to
// an owner nobody waits as.
func (lk *Locker) settle(sk string, left leftover) {
	closeWatch(left.watch)
	if left.ticket != nil {
		lk.dequeue(context.Background(), sk, sk, left.ticket.owner)
	}
}

func closeWatch(w backend.Watch) {
	if w != nil {
		w.Close()
	}
}
