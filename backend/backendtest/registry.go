package backendtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// registry returns a new client of the store under test as a
// backend.Registry, and skips t if the store does not implement it.
func (s *suite) registry(t *testing.T) backend.Registry {
	t.Helper()
	r, ok := s.store(t).(backend.Registry)
	if !ok {
		t.Skip("the store does not implement backend.Registry")
	}
	return r
}

// heartbeat sends m's heartbeat and fails t on error; it returns the
// duplicates the store reported, sorted.
func heartbeat(t testing.TB, ctx context.Context, r backend.Registry, group string, m backend.Member, ttl time.Duration) []string {
	t.Helper()
	dups, err := r.Heartbeat(ctx, group, m, ttl)
	if err != nil {
		t.Fatalf("Heartbeat(%q, %q): %v", group, m.Name, err)
	}
	dups = slices.Clone(dups)
	slices.Sort(dups)
	return dups
}

// checkDups fails t unless m's heartbeat reports exactly want (in any
// order) as the other live members claiming its identity.
func checkDups(t testing.TB, ctx context.Context, r backend.Registry, group string, m backend.Member, ttl time.Duration, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := heartbeat(t, ctx, r, group, m, ttl); !slices.Equal(got, want) {
		t.Errorf("Heartbeat of %q (identity %q) reported duplicates %q; want %q", m.Name, m.Identity, got, want)
	}
}

// members returns the members of group and fails t on error or if they
// are not sorted by name.
func members(t testing.TB, ctx context.Context, r backend.Registry, group string) []backend.Member {
	t.Helper()
	ms, err := r.Members(ctx, group)
	if err != nil {
		t.Fatalf("Members(%q): %v", group, err)
	}
	if !slices.IsSortedFunc(ms, func(a, b backend.Member) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("Members(%q) are not sorted by name: %v", group, names(ms))
	}
	return ms
}

func names(ms []backend.Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// testRegistryMembers checks that heartbeats add and refresh members, that
// Members lists them by name with their identity, data, age and TTL as
// sent, that Leave removes one at once (and is not an error for a member
// that is not there), and that groups are independent.
func (s *suite) testRegistryMembers(t *testing.T) {
	const ttl = 10 * time.Second
	ctx := testCtx(t)
	r, reader := s.registry(t), s.registry(t)
	group, other := s.key("registry-members"), s.key("registry-members", "other")

	b := backend.Member{Name: "proc-b", Identity: "10.0.0.2:t:app:80", Data: []byte("version=2")}
	a := backend.Member{Name: "proc-a", Identity: "10.0.0.1:t:app:80", Data: bytes.Repeat([]byte{0, '\n', 0xff}, backend.MaxMemberData/3)}
	sent := time.Now()
	checkDups(t, ctx, r, group, b, ttl)
	checkDups(t, ctx, r, group, a, ttl)

	ms := members(t, ctx, reader, group)
	if got := names(ms); !slices.Equal(got, []string{"proc-a", "proc-b"}) {
		t.Fatalf("Members = %q; want [proc-a proc-b]", got)
	}
	s.checkMembersAsSent(t, ms, []backend.Member{a, b}, ttl, sent)

	// A heartbeat refreshes the member and replaces its data.
	b.Data = []byte("version=3")
	sent = time.Now()
	checkDups(t, ctx, r, group, b, time.Minute)
	s.checkRefreshed(t, members(t, ctx, reader, group), b, time.Minute, sent)

	if ms := members(t, ctx, reader, other); len(ms) != 0 {
		t.Errorf("Members of a group nobody joined = %q; want none", names(ms))
	}
	checkLeaves(t, ctx, r, reader, group, other)
}

// checkMembersAsSent checks that Members listed ms as want, sent at sent
// with ttl: the identity and data as sent, an age no older than the
// heartbeat and the TTL.
func (s *suite) checkMembersAsSent(t *testing.T, ms, want []backend.Member, ttl time.Duration, sent time.Time) {
	t.Helper()
	for i, want := range want {
		got := ms[i]
		if got.Identity != want.Identity || !bytes.Equal(got.Data, want.Data) {
			t.Errorf("member %q: identity %q, %d bytes of data; want %q, %d bytes as sent", got.Name, got.Identity, len(got.Data), want.Identity, len(want.Data))
		}
		if elapsed := time.Since(sent); got.Age < 0 || got.Age > elapsed+s.slack {
			t.Errorf("member %q: Age %v, but its heartbeat was sent %v ago", got.Name, got.Age, elapsed)
		}
		s.checkTTL(t, fmt.Sprintf("member %q", got.Name), got.TTL, ttl, sent)
	}
}

// checkRefreshed checks that ms lists b with the data and TTL of its
// second heartbeat, sent at sent with ttl.
func (s *suite) checkRefreshed(t *testing.T, ms []backend.Member, b backend.Member, ttl time.Duration, sent time.Time) {
	t.Helper()
	for _, m := range ms {
		if m.Name != b.Name {
			continue
		}
		if !bytes.Equal(m.Data, b.Data) {
			t.Errorf("after a second heartbeat member %q has data %q; want %q", m.Name, m.Data, b.Data)
		}
		s.checkTTL(t, "a refreshed member", m.TTL, ttl, sent)
	}
}

// checkLeaves checks that Leave removes proc-a and then proc-b from group
// at once, as reader sees it, and is not an error for a member that is not
// there or a group (other) nobody joined.
func checkLeaves(t *testing.T, ctx context.Context, r, reader backend.Registry, group, other string) {
	t.Helper()
	if err := r.Leave(ctx, group, "proc-a"); err != nil {
		t.Fatalf("Leave(%q): %v", "proc-a", err)
	}
	if got := names(members(t, ctx, reader, group)); !slices.Equal(got, []string{"proc-b"}) {
		t.Errorf("after proc-a left, Members = %q; want [proc-b]", got)
	}
	for _, name := range []string{"proc-a", "never-joined"} {
		if err := r.Leave(ctx, group, name); err != nil {
			t.Errorf("Leave(%q) of a member not in the group: %v; want nil", name, err)
		}
	}
	if err := r.Leave(ctx, other, "proc-b"); err != nil {
		t.Errorf("Leave of a group never joined: %v; want nil", err)
	}
	if got := names(members(t, ctx, reader, group)); !slices.Equal(got, []string{"proc-b"}) {
		t.Errorf("after Leave calls for absent members, Members = %q; want [proc-b]", got)
	}
	if err := r.Leave(ctx, group, "proc-b"); err != nil {
		t.Fatalf("Leave(%q): %v", "proc-b", err)
	}
	if ms := members(t, ctx, reader, group); len(ms) != 0 {
		t.Errorf("after everyone left, Members = %q; want none", names(ms))
	}
}

// testRegistryDuplicates checks that a heartbeat reports every other live
// member claiming its identity — two, three, after one of them left, and
// not one that expired — and never a member with another identity.
func (s *suite) testRegistryDuplicates(t *testing.T) {
	const (
		ttl   = 10 * time.Second
		short = 200 * time.Millisecond
	)
	ctx := testCtx(t)
	r := s.registry(t)
	group := s.key("registry-duplicates")
	const id = "10.0.0.7:t:app:8080"
	p := func(name string) backend.Member { return backend.Member{Name: name, Identity: id} }

	checkDups(t, ctx, r, group, backend.Member{Name: "other", Identity: "10.0.0.8:t:app:8080"}, ttl)
	checkDups(t, ctx, r, group, p("p1"), ttl)
	checkDups(t, ctx, r, group, p("p1"), ttl) // its own earlier heartbeat is not a duplicate
	checkDups(t, ctx, r, group, p("p2"), ttl, "p1")
	checkDups(t, ctx, r, group, p("p1"), ttl, "p2")
	checkDups(t, ctx, r, group, p("p3"), ttl, "p1", "p2")
	checkDups(t, ctx, r, group, p("p1"), ttl, "p2", "p3")

	// After the claimant that heartbeat last leaves, the others still
	// see each other.
	checkDups(t, ctx, r, group, p("p3"), ttl, "p1", "p2")
	if err := r.Leave(ctx, group, "p3"); err != nil {
		t.Fatalf("Leave(p3): %v", err)
	}
	checkDups(t, ctx, r, group, p("p4"), ttl, "p1", "p2")
	for _, name := range []string{"p2", "p4"} {
		if err := r.Leave(ctx, group, name); err != nil {
			t.Fatalf("Leave(%s): %v", name, err)
		}
	}
	checkDups(t, ctx, r, group, p("p1"), ttl)

	// A claimant whose heartbeat expired is no duplicate.
	checkDups(t, ctx, r, group, p("p5"), short, "p1")
	deadline := time.Now().Add(waitTimeout)
	for slices.Contains(names(members(t, ctx, r, group)), "p5") {
		if time.Now().After(deadline) {
			t.Fatalf("member p5 with a %v heartbeat is still listed after %v", short, waitTimeout)
		}
		time.Sleep(pollEvery)
	}
	checkDups(t, ctx, r, group, p("p1"), ttl)
}

// testRegistryExpiry checks that a member that stops heartbeating leaves
// the list on its own, not before its TTL, while others stay.
func (s *suite) testRegistryExpiry(t *testing.T) {
	const short = 300 * time.Millisecond
	ctx := testCtx(t)
	r, reader := s.registry(t), s.registry(t)
	group := s.key("registry-expiry")

	heartbeat(t, ctx, r, group, backend.Member{Name: "stays", Identity: "a"}, longTTL)
	sent := time.Now()
	heartbeat(t, ctx, r, group, backend.Member{Name: "goes", Identity: "b"}, short)
	deadline := sent.Add(waitTimeout)
	var prevTTL time.Duration = short
	for {
		ms := members(t, ctx, reader, group)
		recv := time.Now()
		if !slices.Contains(names(ms), "stays") {
			t.Fatalf("member \"stays\" with a %v heartbeat is gone: %q", longTTL, names(ms))
		}
		i := slices.IndexFunc(ms, func(m backend.Member) bool { return m.Name == "goes" })
		if i < 0 {
			s.checkNotEarly(t, "a member that stopped heartbeating", recv, sent, short)
			return
		}
		if ttl := ms[i].TTL; ttl > prevTTL || ttl < 0 {
			t.Errorf("member \"goes\": TTL %v after %v; it must fall towards 0", ttl, prevTTL)
		} else {
			prevTTL = ttl
		}
		if recv.After(deadline) {
			t.Fatalf("member \"goes\" with a %v heartbeat is still listed after %v", short, waitTimeout)
		}
		time.Sleep(pollEvery)
	}
}

// testRegistryArguments checks that bad groups, members and TTLs, and
// ended contexts, are refused and write nothing.
func (s *suite) testRegistryArguments(t *testing.T) {
	ctx := testCtx(t)
	r := s.registry(t)
	group := s.key("registry-args")
	good := backend.Member{Name: "p", Identity: "i"}

	for what, m := range map[string]backend.Member{
		"an empty name":     {Identity: "i"},
		"an empty identity": {Name: "p"},
		"a name with space": {Name: "p q", Identity: "i"},
		"a too long name":   {Name: strings.Repeat("n", backend.MaxOwnerLen+1), Identity: "i"},
		"too much data":     {Name: "p", Identity: "i", Data: make([]byte, backend.MaxMemberData+1)},
	} {
		_, err := r.Heartbeat(ctx, group, m, time.Second)
		isInvalid(t, "Heartbeat of a member with "+what, err)
	}
	for _, d := range []time.Duration{0, -time.Second, backend.MaxTTL + time.Millisecond} {
		_, err := r.Heartbeat(ctx, group, good, d)
		isInvalid(t, fmt.Sprintf("Heartbeat with ttl %v", d), err)
	}
	for _, g := range []string{"", "a b", "{a"} {
		_, err := r.Heartbeat(ctx, g, good, time.Second)
		isInvalid(t, fmt.Sprintf("Heartbeat in group %q", g), err)
		_, err = r.Members(ctx, g)
		isInvalid(t, fmt.Sprintf("Members of group %q", g), err)
		isInvalid(t, fmt.Sprintf("Leave of group %q", g), r.Leave(ctx, g, "p"))
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := r.Heartbeat(cancelled, group, good, time.Second)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Heartbeat with a cancelled context: err = %v; want context.Canceled", err)
	}
	if _, err := r.Members(cancelled, group); !errors.Is(err, context.Canceled) {
		t.Errorf("Members with a cancelled context: err = %v; want context.Canceled", err)
	}
	if err := r.Leave(cancelled, group, "p"); !errors.Is(err, context.Canceled) {
		t.Errorf("Leave with a cancelled context: err = %v; want context.Canceled", err)
	}
	if ms := members(t, ctx, r, group); len(ms) != 0 {
		t.Errorf("after refused heartbeats, Members = %q; want none", names(ms))
	}
}
