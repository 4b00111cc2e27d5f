package redisbackend

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
)

// marker keeps the watch marker of watched keys alive. A release of a
// lease that nobody waits for publishes nothing (scripts.go); a Watch
// tells the scripts that someone listens by setting the marker
// "<lease key>:watch-mark" and flagging the current lease contended, and its
// subscriber refreshes the marker every ttl/3 while the watch is open.
// Once the last watch closes, the marker expires within ttl; until then
// releases are published for nobody, which costs a little and nothing
// else.
type marker struct {
	rdb      redis.UniversalClient
	scripts  *scriptSet
	settings []any // the store's (scriptSettings)
	ttl      time.Duration
}

// defaultMarkerTTL is how long a watch marker outlives its last refresh.
const defaultMarkerTTL = 30 * time.Second

func (m *marker) mark(ctx context.Context, name string) error {
	return m.scripts.mark.run(ctx, m.rdb, leaseKeys(name, name, name), scriptArgs(m.settings, m.ttl.Milliseconds())...).Err()
}

// remarkRetry is how long keepMarks waits before it marks again a key
// whose marking after a re-subscription failed.
const remarkRetry = 250 * time.Millisecond

// keepMarks refreshes the watch markers of the watched keys every third
// of their ttl. When a refresh fails, or comes too late, a marker may have
// lapsed and a release gone unpublished, so the key's watchers are told to
// look again.
//
// It also marks a watched key again as soon as its subscription is
// confirmed after a loss (remark, set by confirm): a server restarted
// without its data lost the markers, and a release of a plain lease would
// otherwise go unpublished until the next refresh. The key's watchers are
// then told to look again, since such a release may have happened before
// the mark; a mark that fails is tried again after remarkRetry.
func (s *subscriber) keepMarks() {
	defer s.wg.Done()
	every := s.marker.ttl / 3
	t := time.NewTicker(every)
	defer t.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	last := time.Now() // the oldest refresh any marker may date from
	for {
		refresh := false
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			refresh = true
		case <-s.marks:
		case <-retry.C:
		}
		names, pending := s.toMark(refresh)
		start := time.Now()
		late := refresh && start.Sub(last) >= s.marker.ttl
		failed, ok := s.markAll(names, pending, every, late)
		if !ok {
			return
		}
		if failed {
			retry.Reset(remarkRetry)
		}
		if refresh {
			last = start
		}
	}
}

// toMark returns the watched keys to mark in this round: all of them on a
// refresh, else those asked for again (remark), which it hands over as
// pending.
func (s *subscriber) toMark(refresh bool) (names []string, pending map[string]struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	names = make([]string, 0, len(s.channels))
	for name, c := range s.channels {
		_, again := s.remark[name]
		if len(c.watches) > 0 && (refresh || again) {
			names = append(names, name)
		}
	}
	pending = s.remark
	s.remark = make(map[string]struct{})
	return names, pending
}

// markAll marks names, each within every. A key's watchers are told to
// look again when its mark failed, when the round is late (a marker may
// have lapsed) or when the key was marked again after a loss (pending); a
// pending key whose mark failed is asked for again (failed). It reports
// false once the subscriber closes.
func (s *subscriber) markAll(names []string, pending map[string]struct{}, every time.Duration, late bool) (failed, ok bool) {
	for _, name := range names {
		ctx, cancel := context.WithTimeout(s.ctx, every)
		err := s.marker.mark(ctx, name)
		cancel()
		if s.ctx.Err() != nil {
			return failed, false
		}
		_, again := pending[name]
		if err != nil && again {
			failed = true
			s.mu.Lock()
			s.remark[name] = struct{}{}
			s.mu.Unlock()
		}
		if err != nil || late || again {
			s.signal(name, backend.Event{Kind: backend.EventMaybeFree})
		}
	}
	return failed, true
}
