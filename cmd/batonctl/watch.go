package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/statuspage"
)

// watchJSON is one line of watch's JSON output (one object per line);
// its fields are named as in /status's locks (statuspage.Lock).
type watchJSON struct {
	Time        time.Time `json:"time"`
	Key         string    `json:"key"`
	StoreKey    string    `json:"store_key,omitempty"`
	Held        bool      `json:"held"`
	Holder      string    `json:"holder,omitempty"`
	Owner       string    `json:"owner,omitempty"`
	Token       uint64    `json:"token,omitempty"`
	LeaseMillis int64     `json:"lease_ms,omitempty"`
}

// holding is who holds a key, as watch compares it.
type holding struct {
	owner string
	token uint64
}

// watch prints the holder of a key (default: the role key) and then every
// change of holder until ctx ends. It looks at the key after every event
// of a backend.Watch, when the holder's lease would end (stores need not
// signal expiry), and every --interval (a grant of a free key is not
// signalled).
func watch(ctx context.Context, s *session, args []string) error {
	key := s.roleKey()
	if len(args) > 0 {
		key = s.key(args[0])
	}
	if err := backend.ValidateKey(key); err != nil {
		return usagef("watch: %v", err)
	}
	wctx, cancel := s.call(ctx)
	w, err := s.store.Watch(wctx, key)
	cancel()
	if ctx.Err() != nil {
		return nil
	}
	if err != nil {
		return fmt.Errorf("watching %s: %w", key, err)
	}
	defer w.Close()
	k := &keyWatch{s: s, key: key}
	timer := time.NewTimer(k.look(ctx))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.C():
		case <-timer.C:
		}
		timer.Reset(k.look(ctx))
	}
}

// keyWatch is the state of watch between looks at its key: the holder it
// printed last.
type keyWatch struct {
	s       *session
	key     string
	last    holding
	printed bool
}

// look reads the key's holder, prints it if it changed (or was never
// printed), and returns when to look again: when the holder's lease would
// end if that is before the next --interval.
func (k *keyWatch) look(ctx context.Context) time.Duration {
	s := k.s
	cctx, cancel := s.call(ctx)
	l, err := s.store.Get(cctx, k.key)
	cancel()
	if ctx.Err() != nil {
		return s.o.interval
	}
	if err != nil && !errors.Is(err, backend.ErrNotFound) {
		fprintf(s.stderr, "batonctl: watching %s: %v\n", k.key, err)
		return s.o.interval
	}
	now := holding{owner: l.Owner, token: l.Token}
	if !k.printed || now != k.last {
		s.printHolder(k.key, l)
		k.last, k.printed = now, true
	}
	if l.Owner != "" && l.TTL < s.o.interval {
		return l.TTL + time.Millisecond
	}
	return s.o.interval
}

// printHolder writes one line of watch: the time, the key and its holder
// (l's owner, empty when free).
func (s *session) printHolder(key string, l backend.Lease) {
	now := time.Now().UTC()
	if s.json() {
		j := watchJSON{Time: now, Key: key, StoreKey: statuspage.StoreKey(s.store, key), Held: l.Owner != ""}
		if j.Held {
			j.Holder, j.Owner, j.Token, j.LeaseMillis = instanceOf(l.Owner), l.Owner, l.Token, l.TTL.Milliseconds()
		}
		b, _ := json.Marshal(j) // strings, numbers and a time cannot fail
		fprintf(s.stdout, "%s\n", b)
		return
	}
	var what string
	switch {
	case key == s.roleKey() && l.Owner != "":
		what = fmt.Sprintf("master %s (epoch %d)", text(instanceOf(l.Owner)), l.Token)
	case key == s.roleKey():
		what = "no master"
	case l.Owner != "":
		what = fmt.Sprintf("held by %s (owner %s, token %d)", text(instanceOf(l.Owner)), text(l.Owner), l.Token)
	default:
		what = "free"
	}
	fprintf(s.stdout, "%s  %s  %s\n", now.Format("2006-01-02T15:04:05.000Z07:00"), key, what)
}
