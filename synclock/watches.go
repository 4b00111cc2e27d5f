package synclock

import (
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
)

// A key's watch belongs to its local queue while anyone in the process
// uses the key; then it is parked for watchLinger, so that a process that
// takes the key again soon (a contended key) does not subscribe anew, a
// round trip and a server command.
const (
	watchLinger = 30 * time.Second
	maxParked   = 256
)

type parkedWatch struct {
	w     backend.Watch
	timer clock.Timer
}

// parkLocked keeps w, the watch of sk, for watchLinger, or returns it for
// the caller to close, as leaveLocked does, when too many are parked.
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
// it saw while parked: they are about holdings that are over.
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
