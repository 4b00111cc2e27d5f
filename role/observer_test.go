package role

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/clock"
	"github.com/baton-go/baton/backend/membackend"
)

// observed keeps what an elector reported to its observer.
type observed struct {
	mu     sync.Mutex
	events []Event
}

func (r *observed) observe(e Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

func (r *observed) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Event(nil), r.events...)
}

// first returns the first event of kind k at or after index from, and its
// index; -1 if there is none.
func (r *observed) first(k EventKind, from int) (Event, int) {
	evs := r.all()
	for i := from; i < len(evs); i++ {
		if evs[i].Kind == k {
			return evs[i], i
		}
	}
	return Event{}, -1
}

// await waits until an event of kind k arrives at or after index from.
func (r *observed) await(t *testing.T, k EventKind, from int) (Event, int) {
	t.Helper()
	var e Event
	i := -1
	eventually(t, fmt.Sprintf("a %s event after #%d; have %s", k, from, r), func() bool {
		e, i = r.first(k, from)
		return i >= 0
	})
	return e, i
}

func (r *observed) String() string {
	var b strings.Builder
	for i, e := range r.all() {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(e.Kind.String())
	}
	return "[" + b.String() + "]"
}

// The observer sees an election step by step and in order: the claim,
// the election, renewals, the failures of a master cut off from the
// store, its demotion at the deadline with the tenure's epoch, its claims
// while cut off, and the end of the election; a slave sees its refused
// claim and the master.
func TestObserverReportsTheElection(t *testing.T) {
	clk := clock.NewFake(t0)
	store := newStore(t, membackend.WithClock(clk))
	cut := &flaky{Store: store}
	var ra, rb observed
	a, _ := NewElector(leaseOnly{cut}, mustID(t, 1), fast, quiet, withClock(clk), WithObserver(ra.observe))
	b, _ := NewElector(leaseOnly{store}, mustID(t, 2), fast, quiet, withClock(clk), WithObserver(rb.observe))
	start(t, a)
	eventually(t, "a elected", a.IsMaster)
	start(t, b)
	eventually(t, "b sees a", func() bool { return b.Status().Master == a.Status().Instance })

	claim, i := ra.await(t, EventClaim, 0)
	if claim.Err != nil || claim.Latency < 0 {
		t.Errorf("a's claim: %+v, want granted", claim)
	}
	elected, i := ra.await(t, EventElected, i)
	if elected.Epoch == 0 || elected.Epoch != a.Status().Epoch {
		t.Errorf("elected with epoch %d, want a's epoch %d", elected.Epoch, a.Status().Epoch)
	}
	if mc, _ := ra.await(t, EventMasterChange, i); mc.Master != a.Status().Instance {
		t.Errorf("a's master change names %q, want itself", mc.Master)
	}
	bc, _ := rb.await(t, EventClaim, 0)
	if !errors.Is(bc.Err, backend.ErrHeld) {
		t.Errorf("b's claim: %v, want ErrHeld", bc.Err)
	}
	if mc, _ := rb.await(t, EventMasterChange, 0); mc.Master != a.Status().Instance || mc.Epoch != elected.Epoch {
		t.Errorf("b's master change: %+v, want a with epoch %d", mc, elected.Epoch)
	}

	// a: heartbeat sleep + deadline timer; store: expiry timer; b: wait.
	clk.AwaitTimers(t, 4)
	clk.Advance(fast.HeartbeatInterval)
	renewed, i := ra.await(t, EventRenewal, i)
	if renewed.Err != nil || renewed.Epoch != elected.Epoch || renewed.Latency < 0 {
		t.Errorf("renewed: %+v, want epoch %d", renewed, elected.Epoch)
	}

	cut.Cut(true)
	clk.AwaitTimers(t, 4)
	clk.Advance(fast.HeartbeatInterval)
	failed, i := ra.await(t, EventRenewal, i+1) // the renewal after the one that succeeded
	if !errors.Is(failed.Err, errDown) || failed.Epoch != elected.Epoch {
		t.Errorf("renew-failed: %+v, want the store's error and epoch %d", failed, elected.Epoch)
	}
	clk.Advance(fast.HeartbeatExpiration)
	demoted, i := ra.await(t, EventDemoted, i)
	if demoted.Epoch != elected.Epoch {
		t.Errorf("demoted with epoch %d, want the tenure's %d", demoted.Epoch, elected.Epoch)
	}
	if again, _ := ra.await(t, EventClaim, i); !errors.Is(again.Err, errDown) {
		t.Errorf("a's claim while cut off: %v, want the store's error", again.Err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := a.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	evs := ra.all()
	if last := evs[len(evs)-1]; last.Kind != EventStopped {
		t.Errorf("a's last event is %s, want stopped; all: %s", last.Kind, &ra)
	}
}

// A slow observer never holds up the election: an instance whose
// observer is stuck is elected and renews, and the observer gets every
// step in order once it returns.
func TestObserverDoesNotBlockTheHeartbeat(t *testing.T) {
	clk := clock.NewFake(t0)
	store := newStore(t, membackend.WithClock(clk))
	release := make(chan struct{})
	var rec observed
	a, _ := NewElector(leaseOnly{store}, mustID(t, 1), fast, quiet, withClock(clk), WithObserver(func(e Event) {
		<-release
		rec.observe(e)
	}))
	start(t, a)
	eventually(t, "a elected while its observer is stuck", a.IsMaster)
	before, err := store.Get(context.Background(), a.Status().Key)
	if err != nil {
		t.Fatal(err)
	}
	clk.AwaitTimers(t, 3) // a: heartbeat sleep + deadline timer; store: expiry timer
	clk.Advance(fast.HeartbeatInterval)
	eventually(t, "a renewed while its observer is stuck", func() bool {
		l, err := store.Get(context.Background(), a.Status().Key)
		return err == nil && l.TTL > before.TTL-fast.HeartbeatInterval
	})
	close(release)
	rec.await(t, EventRenewal, 0)
	want := []EventKind{EventClaim, EventElected, EventMasterChange, EventRenewal}
	var got []EventKind
	for _, e := range rec.all() {
		got = append(got, e.Kind)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("events %v, want %v", got, want)
	}
}
