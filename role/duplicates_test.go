package role_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/testkit/storetest"
	"github.com/baton-go/baton/testkit/testenv"
)

// sightings is a store whose member heartbeats count how often they found
// the member entry named forged claiming the caller's ID.
type sightings struct {
	backend.Store
	forged string
	seen   atomic.Int64
}

func (s *sightings) Heartbeat(ctx context.Context, group string, m backend.Member, ttl time.Duration) ([]string, error) {
	dups, err := s.Store.(backend.Registry).Heartbeat(ctx, group, m, ttl)
	if slices.Contains(dups, s.forged) {
		s.seen.Add(1)
	}
	return dups, err
}

func (s *sightings) Members(ctx context.Context, group string) ([]backend.Member, error) {
	return s.Store.(backend.Registry).Members(ctx, group)
}

func (s *sightings) Leave(ctx context.Context, group, name string) error {
	return s.Store.(backend.Registry).Leave(ctx, group, name)
}

func (s *sightings) MemberEntry(group, name string) string {
	if l, ok := s.Store.(backend.MemberLocator); ok {
		return l.MemberEntry(group, name)
	}
	return "member " + name
}

// One write of a member entry that claims an instance's ID, with a TTL of
// an hour and never renewed (forged, or left behind), is not a duplicate:
// the instance's Status names none however many heartbeats find the entry
// (before, /healthz answered 503 for the hour), and the elector logs where
// the entry is, to delete. A second live process with the ID, which
// renews its entry, is reported, with where its entry is kept, and the
// report ends once that process has stopped. Both instances are slaves,
// so only their member entries can show the duplicate.
func TestForgedMemberEntryIsNoDuplicate(t *testing.T) {
	storetest.Each(t, testForgedMemberEntry)
}

func testForgedMemberEntry(t *testing.T, b storetest.Backend) {
	newStore := b.Open(t)
	cfg := role.Config{HeartbeatInterval: 100 * time.Millisecond, HeartbeatExpiration: 2 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	other := startElector(t, newStore(t), 7000, cfg, nil)
	defer stopAll(t, other)
	waitFor(t, "a master", other.IsMaster, other)

	self := id(t, 7001)
	forged := self.String() + "#0123456789ab"
	group := backend.AppKey(self.Tenant, self.App, "members")
	forger := newStore(t).(backend.Registry)
	if _, err := forger.Heartbeat(ctx, group, backend.Member{Name: forged, Identity: self.String(), Data: []byte(`{"started":"2026-01-01T00:00:00Z"}`)}, time.Hour); err != nil {
		t.Fatal(err)
	}
	st := &sightings{Store: newStore(t), forged: forged}
	var log testenv.SyncBuffer
	a := startElector(t, st, 7001, cfg, nil, role.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	defer stopAll(t, a)
	waitFor(t, "six heartbeats that find the forged entry", func() bool { return st.seen.Load() >= 6 }, a)
	if s := a.Status(); s.Duplicate != "" {
		t.Fatalf("one forged member entry is reported as a duplicate: %q (%s)", s.Duplicate, s.DuplicateEntry)
	}
	waitFor(t, "the log line that names the forged entry", func() bool {
		return strings.Contains(log.String(), "not renewed") && strings.Contains(log.String(), "entry=")
	}, a)

	c := startElector(t, newStore(t), 7001, cfg, nil)
	waitFor(t, "the live duplicate reported", func() bool {
		d := a.Status().Duplicate
		return d != "" && d != forged
	}, a, c)
	if s := a.Status(); s.DuplicateEntry == "" || s.DuplicateSeen.IsZero() {
		t.Errorf("Status names the duplicate %q, but not where its entry is (%q) or when it was seen (%v)", s.Duplicate, s.DuplicateEntry, s.DuplicateSeen)
	}
	stopAll(t, c)
	waitFor(t, "the report of the stopped duplicate to end", func() bool { return a.Status().Duplicate == "" }, a)
}

// membersDown is a store whose member list cannot be read: Members fails,
// heartbeats go through.
type membersDown struct{ backend.Store }

func (s membersDown) Heartbeat(ctx context.Context, group string, m backend.Member, ttl time.Duration) ([]string, error) {
	return s.Store.(backend.Registry).Heartbeat(ctx, group, m, ttl)
}

func (s membersDown) Members(context.Context, string) ([]backend.Member, error) {
	return nil, errors.New("members: connection refused")
}

func (s membersDown) Leave(ctx context.Context, group, name string) error {
	return s.Store.(backend.Registry).Leave(ctx, group, name)
}

// While another entry claims its ID, a member stamps its own entry with a
// changing beat count at every heartbeat, also when it cannot read the
// claimant's entry: the stamp is what tells the other process that this
// one is live. Before, a member whose first reading of the member list
// failed kept its entry unstamped until a reading succeeded, so the
// other process logged it as "not renewed" instead of reporting it.
func TestMemberStampsItsEntryWhileTheListFails(t *testing.T) {
	store := membackend.New()
	cfg := role.Config{HeartbeatInterval: 50 * time.Millisecond, HeartbeatExpiration: time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	self := id(t, 7002)
	group := backend.AppKey(self.Tenant, self.App, "members")
	other := backend.Member{Name: self.String() + "#0123456789ab", Identity: self.String(), Data: []byte(`{}`)}
	if _, err := store.Heartbeat(ctx, group, other, time.Hour); err != nil {
		t.Fatal(err)
	}
	a := startElector(t, membersDown{store}, 7002, cfg, nil)
	defer stopAll(t, a)
	beats := map[string]bool{}
	waitFor(t, "two different stamps in the member's own entry", func() bool {
		ms, err := store.Members(ctx, group)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.Name != other.Name && strings.Contains(string(m.Data), `"beat"`) {
				beats[string(m.Data)] = true
			}
		}
		return len(beats) >= 2
	}, a)
}
