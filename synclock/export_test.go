package synclock

// Waiting returns how many goroutines of this process wait in key's local
// queue behind the holder.
func Waiting(lk *Locker, key string) int {
	k := lk.lockKey(key)
	if k.err != nil {
		return 0
	}
	sk := k.sk
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if q := lk.queues[sk]; q != nil {
		return len(q.waiters)
	}
	return 0
}

// WithClock runs a Locker on c instead of the real clock.
var WithClock = withClock

// Users returns how many goroutines of this process use key's local queue
// (the holder and its waiters); 0 when the queue is gone.
func Users(lk *Locker, key string) int {
	k := lk.lockKey(key)
	if k.err != nil {
		return 0
	}
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if q := lk.queues[k.sk]; q != nil {
		if q.busy {
			return len(q.waiters) + 1
		}
		return len(q.waiters)
	}
	return 0
}

// SetParkLimit sets how many idle watches lk keeps; call it before lk is
// used.
func SetParkLimit(lk *Locker, n int) { lk.parkLimit = n }

// LeaveTicket passes on the turn of key's local queue, which nobody waits
// for, with a place in the store's line taken for owner: as when the
// goroutine a release took the place for gave up before its turn.
func LeaveTicket(lk *Locker, key, owner string) {
	sk := lk.lockKey(key).sk
	lk.mu.Lock()
	q := &queue{busy: true}
	lk.queues[sk] = q
	lk.mu.Unlock()
	lk.exit(sk, q, &ticket{owner: owner, sent: lk.clock.Now()})
}
