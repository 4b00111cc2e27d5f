package statuspage_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/statuspage"
	"github.com/baton-go/baton/synclock"
)

func kinds(es []statuspage.Event) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Kind+" "+e.Subject)
	}
	return out
}

// TestEventsRings checks that each ring keeps its last size events, newest
// first, and that job events never push a transition out.
func TestEventsRings(t *testing.T) {
	ev := statuspage.NewEvents(3)
	ev.Elected(context.Background())
	for i := range 5 {
		ev.MasterChanged(fmt.Sprint("m", i))
	}
	for i := range 10 {
		ev.Job(schedlock.Event{Kind: schedlock.EventSkipped, Job: fmt.Sprint("job", i), Err: errors.New("not master")})
	}
	if got, want := kinds(ev.Transitions()), []string{"master m4", "master m3", "master m2"}; !slices.Equal(got, want) {
		t.Errorf("transitions %q; want %q", got, want)
	}
	if got, want := kinds(ev.Jobs()), []string{"skipped job9", "skipped job8", "skipped job7"}; !slices.Equal(got, want) {
		t.Errorf("jobs %q; want %q", got, want)
	}
}

// TestEventsKeepWhatMatters checks which gate and lock events are kept:
// skips, losses and errors, not admissions, acquisitions, ordinary
// refusals or clean releases.
func TestEventsKeepWhatMatters(t *testing.T) {
	ev := statuspage.NewEvents(0)
	boom := errors.New("store down")
	for _, e := range []schedlock.Event{
		{Kind: schedlock.EventAdmitted, Job: "admitted"},
		{Kind: schedlock.EventReleased, Job: "released"},
		{Kind: schedlock.EventSkipped, Job: "skipped"},
		{Kind: schedlock.EventLost, Job: "lost", Err: schedlock.ErrLost},
		{Kind: schedlock.EventReleased, Job: "release-failed", Err: boom},
	} {
		ev.Job(e)
	}
	for _, e := range []synclock.Event{
		{Kind: synclock.EventAcquired, Key: "acquired"},
		{Kind: synclock.EventRefused, Key: "locked", Err: synclock.ErrLocked},
		{Kind: synclock.EventRefused, Key: "timeout", Err: errors.Join(synclock.ErrLocked, context.DeadlineExceeded)},
		{Kind: synclock.EventRefused, Key: "ended", Err: context.Canceled},
		{Kind: synclock.EventRefused, Key: "store-error", Err: boom},
		{Kind: synclock.EventLost, Key: "lost", Err: synclock.ErrLeaseExpired},
		{Kind: synclock.EventReleased, Key: "released"},
		{Kind: synclock.EventReleased, Key: "release-failed", Err: boom},
	} {
		ev.Lock(e)
	}
	ev.Demoted()
	ev.DuplicateID("other#1")
	if got, want := kinds(ev.Jobs()), []string{"job-error release-failed", "job-lost lost", "skipped skipped"}; !slices.Equal(got, want) {
		t.Errorf("jobs %q; want %q", got, want)
	}
	want := []string{"duplicate-id other#1", "demoted this instance", "lock-error release-failed", "lock-lost lost", "lock-error store-error"}
	if got := kinds(ev.Transitions()); !slices.Equal(got, want) {
		t.Errorf("transitions %q; want %q", got, want)
	}
}
