package backend_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

func TestHeldError(t *testing.T) {
	var err error = fmt.Errorf("acquire: %w", &backend.HeldError{
		Holder: backend.Lease{Key: "{a:b}:role", Owner: "10.0.0.7:a:b:80", Token: 7, TTL: 3 * time.Second},
	})
	if !errors.Is(err, backend.ErrHeld) {
		t.Errorf("errors.Is(%v, ErrHeld) = false", err)
	}
	if errors.Is(err, backend.ErrNotHeld) || errors.Is(err, backend.ErrNotFound) {
		t.Errorf("a HeldError matches another sentinel: %v", err)
	}
	var he *backend.HeldError
	if !errors.As(err, &he) || he.Holder.Token != 7 {
		t.Fatalf("errors.As did not find the HeldError in %v", err)
	}
	for _, want := range []string{"{a:b}:role", "10.0.0.7:a:b:80", "7", "3s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
}

func TestHeldErrorRecovering(t *testing.T) {
	var err error = fmt.Errorf("acquire: %w", &backend.HeldError{
		Holder:     backend.Lease{Key: "{a:b}:role", TTL: 45 * time.Second},
		Recovering: true,
	})
	if !errors.Is(err, backend.ErrHeld) {
		t.Errorf("errors.Is(%v, ErrHeld) = false", err)
	}
	for _, want := range []string{"{a:b}:role", "restarted", "45s", "batonctl init", "WithoutRestartGuard"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "first in line") {
		t.Errorf("%q speaks of a line; the store is recovering", err)
	}
}

func TestNotHeldError(t *testing.T) {
	for _, c := range []struct {
		err  *backend.NotHeldError
		want []string
	}{
		{&backend.NotHeldError{Key: "k", Owner: "a"}, []string{`"a"`, `"k"`, "free"}},
		{&backend.NotHeldError{Key: "k", Owner: "a", Holder: backend.Lease{Key: "k", Owner: "b", Token: 9}}, []string{`"a"`, `"k"`, `"b"`, "9"}},
		{&backend.NotHeldError{Key: "k", Owner: "a", Holder: backend.Lease{Key: "k", Owner: "a", Token: 9, TTL: time.Second}}, []string{`"a"`, `"k"`, "released", "1s"}},
	} {
		var err error = fmt.Errorf("renew: %w", c.err)
		if !errors.Is(err, backend.ErrNotHeld) {
			t.Errorf("errors.Is(%v, ErrNotHeld) = false", err)
		}
		if errors.Is(err, backend.ErrHeld) {
			t.Errorf("a NotHeldError matches ErrHeld: %v", err)
		}
		for _, want := range c.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q does not mention %s", err, want)
			}
		}
	}
}

func TestEventKindString(t *testing.T) {
	for k, want := range map[backend.EventKind]string{
		backend.EventMaybeFree: "maybe-free",
		backend.EventReleased:  "released",
		backend.EventRenewed:   "renewed",
	} {
		if got := k.String(); got != want {
			t.Errorf("EventKind(%d).String() = %q; want %q", int(k), got, want)
		}
	}
	if (backend.Event{}).Kind != backend.EventMaybeFree {
		t.Error("the zero Event is not EventMaybeFree, the cautious reading")
	}
}

func TestNotifyKeepsTheNewest(t *testing.T) {
	ch := make(chan backend.Event, 1)
	backend.Notify(ch, backend.Event{Kind: backend.EventRenewed, TTL: time.Second})
	backend.Notify(ch, backend.Event{Kind: backend.EventRenewed, TTL: 2 * time.Second})
	backend.Notify(ch, backend.Event{Kind: backend.EventReleased})
	if got := <-ch; got.Kind != backend.EventReleased {
		t.Errorf("read %+v after three events; want the newest, a release", got)
	}
	select {
	case ev := <-ch:
		t.Errorf("a second event %+v was queued; want one", ev)
	default:
	}
}

// A maybe-free that comes after a release the reader has not taken yet
// leaves the release, which a faster reader would have acted on, without
// its Next: the events missed may have changed who the key is kept for.
func TestNotifyKeepsAReleaseBeforeAMaybeFree(t *testing.T) {
	ch := make(chan backend.Event, 1)
	backend.Notify(ch, backend.Event{Kind: backend.EventReleased, Next: "b"})
	backend.Notify(ch, backend.Event{Kind: backend.EventMaybeFree})
	if got := <-ch; got != (backend.Event{Kind: backend.EventReleased}) {
		t.Errorf("read %+v after a release kept for b and a maybe-free; want a release kept for nobody", got)
	}
	// A renewal after the release is newer news: the key is held again.
	backend.Notify(ch, backend.Event{Kind: backend.EventReleased})
	backend.Notify(ch, backend.Event{Kind: backend.EventRenewed, TTL: time.Second})
	if got := <-ch; got.Kind != backend.EventRenewed {
		t.Errorf("read %+v after a release and a renewal; want the renewal", got)
	}
	// A maybe-free alone stays one.
	backend.Notify(ch, backend.Event{Kind: backend.EventRenewed, TTL: time.Second})
	backend.Notify(ch, backend.Event{Kind: backend.EventMaybeFree})
	if got := <-ch; got.Kind != backend.EventMaybeFree {
		t.Errorf("read %+v after a renewal and a maybe-free; want the maybe-free", got)
	}
}
