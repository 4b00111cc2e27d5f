package consulbackend

import (
	"context"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
)

// DecodeLease decodes a lease key's value as the store reads it.
func DecodeLease(key string, value []byte) (l backend.Lease, kept bool, err error) {
	r, err := (&Store{ttlMin: time.Millisecond}).decodeRecord(key, &api.KVPair{Key: "baton/lease/" + key, Value: value})
	if err != nil {
		return backend.Lease{}, false, err
	}
	return r.lease(key), r.Kept, nil
}

// EncodeLease encodes a lease as the store writes it.
func EncodeLease(l backend.Lease, kept bool) []byte {
	return encodeJSON(record{Owner: l.Owner, Token: l.Token, TTLMillis: l.TTL.Milliseconds(), Kept: kept})
}

// ParseCounter reads a fencing counter's value.
func ParseCounter(value []byte) (uint64, error) {
	return parseCounter("k", &api.KVPair{Key: "baton/fence/k", Value: value})
}

// DecodeMember decodes a member entry of group g as Members reads it.
func DecodeMember(s *Store, group, name string, value []byte) ([]backend.Member, error) {
	return s.decodeMembers("members", group, api.KVPairs{{Key: s.MemberKey(group, name), Value: value, Session: "s"}})
}

// QueuedAfter makes one attempt of owner's AcquireQueued on key decide on
// a read of the key taken before between ran, as when another client's
// write lands between the read and the join. It reports whether the
// attempt saw the change and must read again.
func QueuedAfter(ctx context.Context, s *Store, key, owner string, ttl, patience time.Duration, between func()) (retry bool, err error) {
	st, err := s.look(ctx, "acquire queued", key, true)
	if err != nil {
		return false, err
	}
	between()
	j := &joining{}
	defer s.unused(j)
	_, retry, err = s.queued(ctx, key, owner, ttl, 0, patience, st, j)
	return retry, err
}

// DecodePlace decodes the entry of a place in key's line, at name below
// the line's prefix, as the store reads it: the owner it names, or ok
// false if the store skips it.
func DecodePlace(s *Store, key, name string, value []byte) (owner string, ok bool, err error) {
	line, _, err := s.places(key, []*api.TxnResult{{KV: &api.KVPair{Key: s.LineKey(key) + name, Value: value, Session: "s", CreateIndex: 1}}})
	if err != nil || len(line) == 0 {
		return "", false, err
	}
	return line[0].owner, true, nil
}

// SetAfterLook makes every release, dequeue and break of s run f between its
// read of the key and its write, as when another client's write lands in
// between.
func SetAfterLook(s *Store, f func()) { s.afterLook = f }

// WatchAnswer is one answer a watch's blocking query could give: the
// token (0: free) and index on the lease key, and the last release the
// fencing counter records.
type WatchAnswer struct{ Token, Index, Released uint64 }

// WatchPending feeds a watch of a free key the answers in turn, with
// nobody reading its channel in between, and returns the event left
// pending there (ok false if none).
func WatchPending(answers ...WatchAnswer) (ev backend.Event, ok bool) {
	w := &watch{ch: make(chan Event, 1), index: 1}
	for _, a := range answers {
		w.observe(held{token: a.Token, index: a.Index}, a.Released)
	}
	select {
	case ev := <-w.ch:
		return ev, true
	default:
		return backend.Event{}, false
	}
}

// AwaitLookAhead waits until the read of key's line that s started ahead
// of the release of a lease handed to it (see rememberHanded) is over, and
// reports whether s started one.
func AwaitLookAhead(s *Store, key string) bool {
	s.mu.Lock()
	k := s.known[key]
	s.mu.Unlock()
	if k == nil || k.ahead == nil {
		return false
	}
	<-k.ahead.done
	return true
}
