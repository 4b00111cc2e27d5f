package role

import (
	mrand "math/rand/v2"
	"time"
)

// backoff is a capped exponential delay with full jitter in its upper
// half, for retrying a store that cannot be reached.
type backoff struct {
	first, max, cur time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.first
	} else {
		b.cur = min(2*b.cur, b.max)
	}
	half := b.cur / 2
	return half + time.Duration(mrand.Int64N(int64(half)+1))
}

func (b *backoff) reset() { b.cur = 0 }

// jitter returns a small random delay, at most 1% of ttl and 20 ms.
func jitter(ttl time.Duration) time.Duration {
	return time.Duration(mrand.Int64N(int64(min(ttl/100, 20*time.Millisecond)) + 1))
}
