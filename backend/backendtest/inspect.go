package backendtest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// inspectorStore is a client of a store that lists its leases.
type inspectorStore interface {
	backend.Store
	backend.Inspector
}

// inspectCases are the properties of backend.Inspector, checked only for
// stores that implement it (Run asks a first client), and of
// backend.MemberLister, the bounded listing of a Registry's members,
// skipped by stores that do not implement it.
func (s *suite) inspectCases() []testCase {
	return []testCase{
		{"LeasesListsHeld", s.testLeasesListsHeld},
		{"LeasesArguments", s.testLeasesArguments},
		{"LeasesUpTo", s.testLeasesUpTo},
		{"MembersUpTo", s.testMembersUpTo},
	}
}

// inspector returns a new client of the store under test as an
// inspectorStore; Run adds the Leases subtests only for such stores.
func (s *suite) inspector(t *testing.T) inspectorStore {
	t.Helper()
	st := s.store(t)
	in, ok := st.(inspectorStore)
	if !ok {
		t.Fatalf("backendtest: a client of the store (%T) does not implement backend.Inspector, but the first one did", st)
	}
	return in
}

// leases calls Leases and fails t on error or if the list is not sorted
// by key.
func leases(t testing.TB, ctx context.Context, in backend.Inspector, prefix string) []backend.LeaseInfo {
	t.Helper()
	got, err := in.Leases(ctx, prefix)
	if err != nil {
		t.Fatalf("Leases(%q): %v", prefix, err)
	}
	if !slices.IsSortedFunc(got, func(a, b backend.LeaseInfo) int { return strings.Compare(a.Key, b.Key) }) {
		t.Errorf("Leases(%q) are not sorted by key: %v", prefix, leaseKeys(got))
	}
	return got
}

func leaseKeys(ls []backend.LeaseInfo) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Key
	}
	return out
}

// testLeasesListsHeld checks that Leases lists exactly the held leases
// under a prefix, sorted by key, each as Get reports it (owner, token, a
// TTL within what it was given) with the live waiters of its line in
// order: a released key, a key outside the prefix that shares its first
// bytes, a member group under the prefix and the fencing counters, lines
// and markers the store keeps beside its leases are not listed; a lease
// released with a keep time is, until its keep time ends. On a store with
// handovers, a key handed down its line is listed held by each waiter in
// turn, with only those behind it waiting.
func (s *suite) testLeasesListsHeld(t *testing.T) {
	ctx := testCtx(t)
	in := s.inspector(t)
	prefix := s.key("leases") + ":"
	a, b, freed, kept := prefix+"a", prefix+"b", prefix+"freed", prefix+"kept"
	outside := s.key("leases-outside")

	sent := time.Now()
	la := s.acquire(t, ctx, in, a, "owner-a", longTTL, 0)
	lb := s.acquire(t, ctx, s.store(t), b, "owner-b", longTTL, 0)
	s.acquire(t, ctx, in, freed, "owner-f", longTTL, 0)
	release(t, ctx, in, freed, "owner-f", 0)
	lk := s.acquire(t, ctx, in, kept, "owner-k", longTTL, 0)
	release(t, ctx, in, kept, "owner-k", longTTL)
	s.acquire(t, ctx, in, outside, "owner-o", longTTL, 0)
	w := watch(t, ctx, in, b) // a watch marker beside b, on stores that keep one

	waiters := joinLine(ctx, in, a, []string{"waiter-1", "waiter-2"}, func(owner string, err error) {
		checkHeldBy(t, owner+"'s AcquireQueued of the held key", err, la, longTTL)
	})
	if r, ok := backend.Store(in).(backend.Registry); ok {
		heartbeat(t, ctx, r, prefix+"group", backend.Member{Name: "m", Identity: "i"}, longTTL)
	}

	got := leases(t, ctx, in, prefix)
	if want := []string{a, b, kept}; !slices.Equal(leaseKeys(got), want) {
		t.Fatalf("Leases(%q) lists %q; want %q (held, or kept after release)", prefix, leaseKeys(got), want)
	}
	s.checkListed(t, got, []backend.Lease{la, lb, lk}, sent)
	checkListedWaiters(t, got, waiters)
	if err := w.Close(); err != nil {
		t.Errorf("closing the watch of %q: %v", b, err)
	}

	// A narrower prefix lists only its keys; one that matches nothing,
	// nothing.
	if got := leases(t, ctx, in, a); !slices.Equal(leaseKeys(got), []string{a}) {
		t.Errorf("Leases(%q) lists %q; want only %q", a, leaseKeys(got), a)
	}
	if got := leases(t, ctx, in, prefix+"none"); len(got) != 0 {
		t.Errorf("Leases(%q) lists %q; want nothing", prefix+"none", leaseKeys(got))
	}
	// Once a lease is released it is no longer listed.
	release(t, ctx, in, b, "owner-b", 0)
	if got := leases(t, ctx, in, prefix); slices.Contains(leaseKeys(got), b) {
		t.Errorf("after b's release, Leases(%q) still lists it: %q", prefix, leaseKeys(got))
	}

	if len(waiters) == 0 || !s.handsOver(t, ctx, in) {
		return
	}
	checkListedDownTheLine(t, ctx, in, a, "owner-a", waiters)
}

// joinLine has each of owners join the waiting line of the held key, on
// a store with waiting lines, checking each AcquireQueued's error with
// check. It returns the owners that joined: none on a store without lines.
func joinLine(ctx context.Context, st backend.Store, key string, owners []string, check func(owner string, err error)) []string {
	q, ok := st.(backend.Queue)
	if !ok {
		return nil
	}
	for _, owner := range owners {
		_, err := q.AcquireQueued(ctx, key, owner, longTTL, 0, waitPatience)
		check(owner, err)
	}
	return owners
}

// checkListed checks that got lists each of want, in order, with its owner
// and token and a TTL within longTTL, which want was granted for at sent.
func (s *suite) checkListed(t *testing.T, got []backend.LeaseInfo, want []backend.Lease, sent time.Time) {
	t.Helper()
	for i, want := range want {
		l := got[i]
		if l.Owner != want.Owner || l.Token != want.Token {
			t.Errorf("Leases lists %q held by %q (token %d); want %q (token %d)", l.Key, l.Owner, l.Token, want.Owner, want.Token)
		}
		if !s.h.GivenTTL {
			s.checkTTL(t, "Leases of "+l.Key, l.TTL, longTTL, sent)
		} else if l.TTL <= 0 || l.TTL > longTTL {
			t.Errorf("Leases lists %q with TTL %v; want one in (0, %v]", l.Key, l.TTL, longTTL)
		}
	}
}

// checkListedWaiters checks that the first listed lease has waiters, in
// the order they joined, and the others none.
func checkListedWaiters(t *testing.T, got []backend.LeaseInfo, waiters []string) {
	t.Helper()
	if !slices.Equal(got[0].Waiters, waiters) {
		t.Errorf("Leases lists %q with waiters %q; want %q, in the order they joined", got[0].Key, got[0].Waiters, waiters)
	}
	for _, l := range got[1:] {
		if len(l.Waiters) != 0 {
			t.Errorf("Leases lists %q with waiters %q; nobody waits for it", l.Key, l.Waiters)
		}
	}
}

// checkListedDownTheLine releases key, held by holder, down its line of
// waiters and checks that Leases lists it held by each waiter in turn,
// with only those still waiting behind it: the place a holder was handed
// the key through is not a waiter's.
func checkListedDownTheLine(t *testing.T, ctx context.Context, in inspectorStore, key, holder string, waiters []string) {
	t.Helper()
	h := backend.Store(in).(backend.Handover)
	from := holder
	for i, owner := range waiters {
		release(t, ctx, in, key, from, 0)
		l, handed, err := h.AwaitHandover(ctx, key, owner, waitPatience)
		if err != nil || !handed || l.Owner != owner {
			t.Fatalf("%s's AwaitHandover after %s's release: %+v, handed %v, err %v; want the key handed to it", owner, from, l, handed, err)
		}
		got := leases(t, ctx, in, key)
		if len(got) != 1 || got[0].Owner != owner || got[0].Token != l.Token {
			t.Fatalf("after the handover to %s, Leases(%q) lists %+v; want %q held by it with token %d", owner, key, got, key, l.Token)
		}
		if want := waiters[i+1:]; !slices.Equal(got[0].Waiters, want) {
			t.Errorf("after the handover to %s, Leases lists %q with waiters %q; want %q", owner, key, got[0].Waiters, want)
		}
		from = owner
	}
}

// testLeasesArguments checks that Leases refuses a prefix with a space or
// a control character with ErrInvalidArgument and fails with the
// context's error when the context has ended.
func (s *suite) testLeasesArguments(t *testing.T) {
	ctx := testCtx(t)
	in := s.inspector(t)
	for _, prefix := range []string{"a b", "tab\t", "nl\n"} {
		if _, err := in.Leases(ctx, prefix); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("Leases(%q): err = %v; want ErrInvalidArgument", prefix, err)
		}
	}
	ended, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := in.Leases(ended, s.key("leases-args")); !errors.Is(err, context.Canceled) {
		t.Errorf("Leases with an ended context: err = %v; want one matching context.Canceled", err)
	}
}

// testLeasesUpTo checks that LeasesUpTo lists at most limit of the held
// leases under a prefix, sorted by key, each as Leases lists it with at
// most its limit of waiters, and counts the rest in More (MoreWaiting
// says more wait): with five leases and a limit of two, the two first by key
// and More 3 (a store whose scan saw every key, as it does on a test
// server, sees them all); with a limit above the count, all of them and
// More 0. A limit below 1 or of waiters below 0 is ErrInvalidArgument.
func (s *suite) testLeasesUpTo(t *testing.T) {
	ctx := testCtx(t)
	in := s.inspector(t)
	prefix := s.key("upto") + ":"
	var keys []string
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		keys = append(keys, prefix+name)
		s.acquire(t, ctx, in, prefix+name, "owner-"+name, longTTL, 0)
	}
	waiters := joinLine(ctx, in, keys[0], []string{"waiter-1", "waiter-2", "waiter-3"}, func(owner string, err error) {
		heldError(t, owner+"'s AcquireQueued of the held key", err)
	})
	all := leases(t, ctx, in, prefix)

	got := leasesUpTo(t, ctx, in, prefix, 2, 2)
	if got.Partial {
		t.Skipf("LeasesUpTo(%q, 2, 2) stopped its scan before the end of the store's keys: too many keys on the server for this test", prefix)
	}
	checkFirstPage(t, prefix, got, keys[:2], all)
	if len(waiters) > 0 {
		checkWaitersUpTo(t, ctx, in, prefix, got.Leases[0], keys[0], waiters)
	}
	checkWholePage(t, prefix, leasesUpTo(t, ctx, in, prefix, 10, 10), keys, waiters)
	for _, limits := range [][2]int{{0, 1}, {-1, 1}, {1, -1}} {
		if _, err := in.LeasesUpTo(ctx, prefix, limits[0], limits[1]); !errors.Is(err, backend.ErrInvalidArgument) {
			t.Errorf("LeasesUpTo(%q, %d, %d): err = %v; want ErrInvalidArgument", prefix, limits[0], limits[1], err)
		}
	}
}

// checkFirstPage checks LeasesUpTo(prefix, 2, 2) of five leases: it lists
// the keys want and counts 3 more, each lease as Leases lists it in all.
func checkFirstPage(t *testing.T, prefix string, got backend.LeaseList, want []string, all []backend.LeaseInfo) {
	t.Helper()
	if !slices.Equal(leaseKeys(got.Leases), want) || got.More != 3 {
		t.Fatalf("LeasesUpTo(%q, 2, 2) lists %q and %d more; want %q and 3 more", prefix, leaseKeys(got.Leases), got.More, want)
	}
	for i, l := range got.Leases {
		want := all[i]
		if l.Owner != want.Owner || l.Token != want.Token {
			t.Errorf("LeasesUpTo lists %q held by %q (token %d); Leases lists it held by %q (token %d)", l.Key, l.Owner, l.Token, want.Owner, want.Token)
		}
	}
}

// checkWholePage checks LeasesUpTo(prefix, 10, 10) of the leases of keys:
// it lists them all, the first with all its waiters, and no more.
func checkWholePage(t *testing.T, prefix string, got backend.LeaseList, keys, waiters []string) {
	t.Helper()
	if !slices.Equal(leaseKeys(got.Leases), keys) || got.More != 0 || got.Partial {
		t.Errorf("LeasesUpTo(%q, 10, 10) lists %q, %d more (partial %v); want %q and no more", prefix, leaseKeys(got.Leases), got.More, got.Partial, keys)
	}
	if len(waiters) > 0 && (!slices.Equal(got.Leases[0].Waiters, waiters) || got.Leases[0].MoreWaiting) {
		t.Errorf("LeasesUpTo(%q, 10, 10) lists %q with waiters %q (more waiting: %v); want %q and no more", prefix, keys[0], got.Leases[0].Waiters, got.Leases[0].MoreWaiting, waiters)
	}
}

// leasesUpTo calls LeasesUpTo and fails t on error.
func leasesUpTo(t testing.TB, ctx context.Context, in backend.Inspector, prefix string, limit, waiters int) backend.LeaseList {
	t.Helper()
	got, err := in.LeasesUpTo(ctx, prefix, limit, waiters)
	if err != nil {
		t.Fatalf("LeasesUpTo(%q, %d, %d): %v", prefix, limit, waiters, err)
	}
	return got
}

// checkWaitersUpTo checks that LeasesUpTo lists at most its limit of the
// waiters of key, whose line holds more than two: first, the lease it
// listed with a limit of two waiters, then with a limit of none.
func checkWaitersUpTo(t *testing.T, ctx context.Context, in backend.Inspector, prefix string, a backend.LeaseInfo, key string, waiters []string) {
	t.Helper()
	if !slices.Equal(a.Waiters, waiters[:2]) || !a.MoreWaiting {
		t.Errorf("LeasesUpTo(%q, 2, 2) lists %q with waiters %q (more waiting: %v); want %q and more waiting", prefix, a.Key, a.Waiters, a.MoreWaiting, waiters[:2])
	}
	got := leasesUpTo(t, ctx, in, prefix, 1, 0)
	if len(got.Leases) != 1 || len(got.Leases[0].Waiters) != 0 || !got.Leases[0].MoreWaiting {
		t.Errorf("LeasesUpTo(%q, 1, 0) lists %+v; want %q with no waiters listed and more waiting", prefix, got.Leases, key)
	}
}
