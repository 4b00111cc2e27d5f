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
