package consulbackend

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

const (
	// watchWait is how long one blocking query waits for a change before
	// Consul answers anyway (Consul caps it at 10 minutes).
	watchWait = 5 * time.Minute

	// watchRetryMin and watchRetryMax bound the pause after a failed
	// blocking query, which doubles while the agent stays unreachable.
	watchRetryMin = 50 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// Watch implements backend.Store with blocking queries on the lease key.
// It returns after its first read of the key, so that every change after
// it is seen; ctx bounds only that read.
//
// A deletion of the key is reported as EventReleased when the key's
// fencing counter records the token that was deleted (Release does that
// in the same transaction) and as EventMaybeFree otherwise (the session
// ran out or was destroyed, or the data was lost). A lease moved to a new
// session (a Renew with another TTL, a Release with a keep time) is
// reported as EventRenewed with its new TTL, and so is a renewal, which
// rewrites the key (Renew), and a handover to the waiter first in line
// (Release with someone in line). A failed query, or an index that
// went back (the agent lost its data), is reported as EventMaybeFree.
func (s *Store) Watch(ctx context.Context, key string) (backend.Watch, error) {
	if err := s.begin(ctx, "watch", key); err != nil {
		return nil, err
	}
	p, meta, err := s.lookLease(key, s.queryOpts(ctx))
	if err != nil {
		return nil, s.transport("watch", key, ctx, err)
	}
	w := &watch{s: s, key: key, ch: make(chan Event, 1), index: meta.LastIndex}
	if w.seen, err = s.heldToken(key, p); err != nil {
		return nil, err
	}
	if w.releases, err = w.lastRelease(ctx); err != nil {
		return nil, s.transport("watch", key, ctx, err)
	}
	wctx, cancel := context.WithCancel(s.base)
	w.cancel = cancel
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		cancel()
		return nil, fmt.Errorf("consulbackend: watch %q: %w", key, backend.ErrClosed)
	}
	s.watches.Add(1)
	s.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer s.watches.Done()
		defer w.wg.Done()
		w.run(wctx)
	}()
	return w, nil
}

// lookLease reads the lease key of key for a watch. It lists the key as a
// prefix rather than getting it: Consul's blocking GET of a missing key
// does not wake when the key is created and deleted again before it looks
// (missing then missing reads as unchanged), while a list's index counts
// the tombstone the deletion left. Keys that merely start with the lease
// key are skipped.
func (s *Store) lookLease(key string, q *api.QueryOptions) (*api.KVPair, *api.QueryMeta, error) {
	name := s.LeaseKey(key)
	pairs, meta, err := s.kv.List(name, q)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range pairs {
		if p.Key == name {
			return p, meta, nil
		}
	}
	return nil, meta, nil
}

// Event is backend.Event (an alias, to keep the code short).
type Event = backend.Event

// watch is one subscription: a goroutine that long-polls the lease key.
type watch struct {
	s      *Store
	key    string
	ch     chan Event
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	index    uint64 // the KV index of the last answer
	seen     held   // the lease on the key in the last answer
	releases uint64 // the last released token the fencing counter recorded
}

// held is what a watcher saw on the key; the zero value is a free key.
type held struct {
	token uint64
	ttl   time.Duration
	index uint64
}

// heldToken reads what a look found on the key (see Store.entry).
func (s *Store) heldToken(key string, p *api.KVPair) (held, error) {
	e, err := s.entry(key, p)
	if err != nil || e == nil {
		return held{}, err
	}
	return held{token: e.rec.Token, ttl: time.Duration(e.rec.TTLMillis) * time.Millisecond, index: e.index}, nil
}

func (w *watch) C() <-chan Event { return w.ch }

func (w *watch) Close() error {
	w.once.Do(func() {
		w.cancel()
		w.wg.Wait()
	})
	return nil
}

// run long-polls the key until the watch or the store is closed.
func (w *watch) run(ctx context.Context) {
	retry := watchRetryMin
	for ctx.Err() == nil {
		q := (&api.QueryOptions{WaitIndex: w.index, WaitTime: watchWait}).WithContext(ctx)
		p, meta, err := w.s.lookLease(w.key, q)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			// Releases may be missed while the agent is unreachable.
			backend.Notify(w.ch, Event{Kind: backend.EventMaybeFree})
			if !sleepCtx(ctx, retry) {
				return
			}
			retry = min(2*retry, watchRetryMax)
			continue
		}
		retry = watchRetryMin
		if meta.LastIndex < w.index {
			// The index went back: the agent lost its data (or a new
			// leader is behind). Start over from what is there now.
			w.index = 0
			w.seen = held{}
			backend.Notify(w.ch, Event{Kind: backend.EventMaybeFree})
			continue
		}
		w.index = meta.LastIndex
		now, err := w.s.heldToken(w.key, p)
		if err != nil {
			// A foreign value: whoever wrote it, the lease seen before
			// is gone.
			now = held{index: p.ModifyIndex}
		}
		released, err := w.lastRelease(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// Cannot tell a release from an expiry: say "look".
			released = w.releases
			now.index = 0
		}
		w.observe(now, released)
	}
}

// lastRelease reads the last released token recorded on the key's
// fencing counter (its flags; Release sets them in the transaction that
// deletes the key).
func (w *watch) lastRelease(ctx context.Context) (uint64, error) {
	p, _, err := w.s.kv.Get(w.s.FenceKey(w.key), (&api.QueryOptions{}).WithContext(ctx))
	if err != nil || p == nil {
		return 0, err
	}
	return p.Flags, nil
}

// observe compares what the key holds now, and the last release the
// counter records, with what the watch saw last, and reports the
// difference. A release is recognised by the counter's record even when
// the lease came and went between two answers.
func (w *watch) observe(now held, released uint64) {
	prev := w.seen
	w.seen = now
	switch {
	case released != w.releases && released != 0:
		w.releases = released
		if now.token == released {
			// The lease in this answer was released after the answer:
			// the key is free, and its deletion, seen next, is that
			// release, not an expiry (which would also replace this
			// event if the reader has not taken it yet).
			w.seen = held{index: now.index}
		}
		backend.Notify(w.ch, Event{Kind: backend.EventReleased})
	case prev.token == 0 || now.index == prev.index:
		// Was free, or nothing changed on the key.
	case now.token != 0:
		// The same lease on a new session (renewed with another TTL, or
		// kept after its release), or a new lease with no release
		// between: handed to the waiter first in line (Handover), or
		// taken by another holder after the one seen before expired.
		// Either way the key is held for now.ttl.
		backend.Notify(w.ch, Event{Kind: backend.EventRenewed, TTL: now.ttl})
	default:
		// The lease seen before ended without a release: its session
		// ran out or was destroyed, or the data was lost.
		backend.Notify(w.ch, Event{Kind: backend.EventMaybeFree})
	}
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
