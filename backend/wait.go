package backend

import (
	"context"
	"errors"
	"strings"
	"time"
)

// ContextError returns the error of an ended ctx in a form that
// errors.Is matches against both context.Canceled or
// context.DeadlineExceeded and the cause the context was cancelled with,
// if that is different. Stores return it (wrapped) when a call's context
// has ended.
func ContextError(ctx context.Context) error {
	err := ctx.Err()
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return errors.Join(err, cause)
	}
	return err
}

// AppKey returns the key of a per-app object, such as the role key
// "{acme:billing}:role" or a lock key "{acme:billing}:lock:nightly".
// The {tenant:app} hash tag keeps all keys of one app in one Redis Cluster
// slot.
func AppKey(tenant, app string, parts ...string) string {
	var b strings.Builder
	b.WriteByte('{')
	b.WriteString(tenant)
	b.WriteByte(':')
	b.WriteString(app)
	b.WriteByte('}')
	for _, p := range parts {
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

// WaitFree blocks until key is free in store — released, expired or never
// held — or ctx ends. It subscribes before it looks, so a release between
// the look and the wait is not missed, and it re-checks at the holder's
// remaining TTL so expiry is noticed by stores that do not signal it.
// The key may be taken again by the time WaitFree returns; the caller
// still has to Acquire.
func WaitFree(ctx context.Context, store Store, key string) error {
	w, err := store.Watch(ctx, key)
	if err != nil {
		return err
	}
	defer w.Close()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var d time.Duration // how long to sleep before asking the store again
	ask := true
	for {
		if ask {
			l, err := store.Get(ctx, key)
			if errors.Is(err, ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			d = l.TTL + time.Millisecond // just after the holder's lease would end
		}
		timer.Reset(d)
		select {
		case ev := <-w.C():
			timer.Stop() // since Go 1.23 a stopped timer delivers no stale value
			// A renewal says how long the key stays held: sleep through it
			// without asking. Anything else may mean the key is free.
			ask = ev.Kind != EventRenewed
			d = ev.TTL + time.Millisecond
		case <-timer.C:
			ask = true
		case <-ctx.Done():
			return ContextError(ctx)
		}
	}
}
