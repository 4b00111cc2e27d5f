package synclock

import (
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/internal/clock"
)

// A key's watch (its subscription to releases) belongs to the key's local
// queue while anyone in the process uses the key. When the queue empties,
// the Locker parks the watch for watchLinger instead of closing it, so that
// a process that takes the key again soon — the usual case for a contended
// key — neither subscribes anew (a round trip and a server command) nor has
// to look again after subscribing.
const (
	watchLinger = 30 * time.Second
	maxParked   = 256
)

type parkedWatch struct {
	w     backend.Watch
	timer clock.Timer
}

// parkLocked keeps w, the watch of sk, for watchLinger. When too many are
// parked it returns w instead, for the caller to close once it has
// unlocked lk.mu (a close may be a round trip to the store); otherwise nil.
// The linger timer closes a watch without holding lk.mu too.
func (lk *Locker) parkLocked(sk string, w backend.Watch) backend.Watch {
	if len(lk.parked) >= lk.parkLimit {
		return w
	}
	p := &parkedWatch{w: w}
	p.timer = lk.clock.AfterFunc(watchLinger, func() {
		lk.mu.Lock()
		mine := lk.parked[sk] == p
		if mine {
			delete(lk.parked, sk)
		}
		lk.mu.Unlock()
		if mine {
			p.w.Close()
		}
	})
	lk.parked[sk] = p
	return nil
}

// unparkLocked returns the parked watch of sk, if any, without the events
// it saw while parked (they are about holdings that are over).
func (lk *Locker) unparkLocked(sk string) backend.Watch {
	p := lk.parked[sk]
	if p == nil {
		return nil
	}
	delete(lk.parked, sk)
	p.timer.Stop()
	select {
	case <-p.w.C():
	default:
	}
	return p.w
}
