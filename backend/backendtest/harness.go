package backendtest

import (
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
)

// DefaultSlack is the Slack used when Harness.Slack is zero.
const DefaultSlack = 10 * time.Millisecond

// Harness tells Run how to reach the store under test.
type Harness struct {
	// NewStore returns a new client of the store under test: every store
	// it returns must see the same data, as separate processes talking to
	// one server do (for Redis, a new client with its own connection
	// pool; for the in-memory store, the one shared Store). Run calls it
	// many times per subtest, from the subtest's goroutine, passing the
	// subtest's t.
	//
	// NewStore owns what it returns: the suite never closes a store, so
	// NewStore must arrange for that itself, normally with t.Cleanup,
	// which runs when the subtest that asked for the store ends. If it
	// cannot open a store it fails t.
	NewStore func(t testing.TB) backend.Store

	// Wipe makes the store lose all its data, leases and fencing counters
	// alike, in a way the store cannot notice, as FLUSHALL does to Redis:
	// its restart guard does not apply. Run calls it only while none of
	// its other subtests runs, and opens new stores after it: of the
	// stores opened before, only a Watch opened before Wipe is read
	// afterwards. If it cannot wipe the store it fails t.
	Wipe func(t testing.TB)

	// Restart, if not nil, restarts the store's server without its data
	// (for Redis, redis-server restarted empty; for membackend, Restart),
	// so that its restart guard applies. Stores that NewStore opens after
	// it must guard grants for their ttl (backend.Store's Acquire) and no
	// longer than 10 s. Run calls it, like Wipe, only while none of
	// its other subtests runs, and reads no store opened before it. Nil
	// skips the Sequential/Restart subtest.
	Restart func(t testing.TB)

	// GuardPerService says that the store's restart guard knows each
	// service's data apart and nothing wider (redisbackend on a Redis
	// Cluster, whose scripts read one slot only): after a restart, every
	// service new to the store waits out the guard once. Otherwise a
	// service whose tenant has waited it out since the restart is new,
	// not lost, and the suite checks that its first grant is at once.
	GuardPerService bool

	// Slack is how far the store's view of time may be off from the
	// suite's when the suite judges durations: how much earlier than its
	// TTL a lease may end, and how much a reported TTL may differ from the
	// time that passed. It covers the resolution of the store's clock
	// (Redis keeps whole milliseconds) and a little drift. Zero means
	// DefaultSlack; a store whose clock is coarser needs more, and more
	// slack makes the suite weaker.
	Slack time.Duration

	// GivenTTL says that the store reports, for a lease read by Get or
	// named in a HeldError, the TTL the lease was given rather than what
	// is left of it, because the store cannot tell (Consul: a session's
	// remaining time cannot be read). The suite then checks that the
	// reported TTL stays within what was granted but not that it falls as
	// time passes.
	GivenTTL bool

	// MinTTL and MaxTTL are the shortest and longest lease (and keep
	// time) the store accepts, when they are narrower than
	// backend.MinTTL and backend.MaxTTL (Consul's sessions hold 10 s to
	// 24 h unless its servers were told otherwise). Zero means the
	// backend package's limit. The suite checks that the limits are
	// accepted and that durations beyond them are refused with
	// ErrInvalidArgument; its own short leases must be at least MinTTL,
	// so a test server must accept short sessions.
	MinTTL, MaxTTL time.Duration

	// Forge, if not nil, writes the data what describes (a Forgery) for
	// key into the store the way another client of its server could,
	// past the store's own checks, so that the suite can check that the
	// store never hands such data back as read and never acts on it half
	// way. Run calls it from the subtest's goroutine; the data may be
	// left behind (with an expiry, where the store has one). Nil, as for
	// a store whose data nothing outside the process can reach
	// (membackend), skips the Forged subtests.
	Forge func(t testing.TB, key string, what Forgery)
}

// minTTL and maxTTL return the store's limits (Harness.MinTTL, MaxTTL).
func (s *suite) minTTL() time.Duration {
	if s.h.MinTTL > 0 {
		return s.h.MinTTL
	}
	return backend.MinTTL
}

func (s *suite) maxTTL() time.Duration {
	if s.h.MaxTTL > 0 {
		return s.h.MaxTTL
	}
	return backend.MaxTTL
}

// Run runs the conformance suite against the store h describes. It fails
// t, naming the broken property in the subtest's name, where the store
// does not behave as the backend package documents.
//
// Run uses keys under a hash tag of its own, so stores shared with other
// data are fine, but its Sequential subtests call h.Wipe: Run must not run
// concurrently with other users of the data that Wipe removes.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.NewStore == nil {
		t.Fatal("backendtest: Harness.NewStore is nil")
	}
	if h.Wipe == nil {
		t.Fatal("backendtest: Harness.Wipe is nil; the fencing floor cannot be checked without it")
	}
	if h.Slack < 0 {
		t.Fatalf("backendtest: Harness.Slack %v is negative", h.Slack)
	}
	if h.MinTTL < 0 || h.MaxTTL < 0 || h.MinTTL > 100*time.Millisecond || (h.MaxTTL > 0 && h.MaxTTL < longTTL) {
		t.Fatalf("backendtest: Harness.MinTTL %v must be in [0, 100ms] and MaxTTL %v zero or at least %v: the suite's leases are 100 ms to %v long",
			h.MinTTL, h.MaxTTL, longTTL, longTTL)
	}
	s := &suite{h: h, slack: h.Slack, app: "app" + strings.ToLower(rand.Text()[:12])}
	if s.slack == 0 {
		s.slack = DefaultSlack
	}
	t.Logf("backendtest: keys of this run are under %s", backend.AppKey(keyTenant, s.app))

	// t.Run returns only once every parallel subtest of the group has
	// finished, so the Sequential group never overlaps them.
	parallel := s.parallelCases()
	if _, ok := s.store(t).(backend.Inspector); ok {
		parallel = append(parallel, s.inspectCases()...)
	} else {
		t.Logf("backendtest: the store does not implement backend.Inspector (optional): no Leases subtests")
	}
	if st, ok := s.store(t).(backend.Breaker); ok {
		_, queue := st.(backend.Queue)
		parallel = append(parallel, s.breakCases(queue)...)
	} else {
		t.Logf("backendtest: the store does not implement backend.Breaker (optional): no Break subtests")
	}
	parallel = append(parallel, s.forgedCases()...)
	t.Run("Parallel", func(t *testing.T) {
		for _, c := range parallel {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t)
			})
		}
	})
	t.Run("Sequential", func(t *testing.T) {
		for _, c := range s.sequentialCases() {
			t.Run(c.name, c.run)
		}
	})
}

type testCase struct {
	name string
	run  func(t *testing.T)
}

// parallelCases are the properties checked concurrently. Each uses keys
// of its own and leaves other keys alone.
func (s *suite) parallelCases() []testCase {
	return []testCase{
		{"OneWinner", s.testOneWinner},
		{"AcquireHeldBySelf", s.testAcquireHeldBySelf},
		{"NonOwnerCannotRenewOrRelease", s.testNonOwner},
		{"StaleOwnerAfterTakeover", s.testStaleOwner},
		{"RenewExtends", s.testRenewExtends},
		{"ReleaseKeepFor", s.testReleaseKeepFor},
		{"ReleaseKeepForLongerThanTTL", s.testReleaseKeepForLonger},
		{"ReleaseAtOnce", s.testReleaseAtOnce},
		{"ExpiryByStoreClock", s.testExpiry},
		{"TokensIncrease", s.testTokensIncrease},
		{"TokensPerKey", s.testTokensPerKey},
		{"TokenFloor", s.testTokenFloor},
		{"FloorAhead", s.testFloorAhead},
		{"GetAbsent", s.testGetAbsent},
		{"WatchSeesRelease", s.testWatchSeesRelease},
		{"ManyWatchers", s.testManyWatchers},
		{"WatchClose", s.testWatchClose},
		{"RenewalEvents", s.testRenewalEvents},
		{"NoStaleReleaseEvents", s.testNoStaleReleaseEvents},
		{"WaitFreeThroughRenewals", s.testWaitFreeThroughRenewals},
		{"WaitFreeAfterKeepFor", s.testWaitFreeKeepFor},
		{"WaitFreeWhileKept", s.testWaitFreeWhileKept},
		{"WaitFreeAfterExpiry", s.testWaitFreeExpiry},
		{"WaitFreeContext", s.testWaitFreeContext},
		{"InvalidArguments", s.testInvalidArguments},
		{"EndedContext", s.testEndedContext},
		{"Stress", s.testStress},
		{"RegistryMembers", s.testRegistryMembers},
		{"RegistryDuplicates", s.testRegistryDuplicates},
		{"RegistryExpiry", s.testRegistryExpiry},
		{"RegistryArguments", s.testRegistryArguments},
		{"QueueFreeKeyGrants", s.testQueueFreeKeyGrants},
		{"QueueOrder", s.testQueueOrder},
		{"QueuePatience", s.testQueuePatience},
		{"QueueLapsedRejoins", s.testQueueLapsedRejoins},
		{"QueueDequeue", s.testQueueDequeue},
		{"QueueZeroPatience", s.testQueueZeroPatience},
		{"QueueFencing", s.testQueueFencing},
		{"QueueInvalidArguments", s.testQueueInvalidArguments},
		{"QueueEndedContext", s.testQueueEndedContext},
		{"Handover", s.testHandover},
		{"Rejoin", s.testRejoin},
	}
}

// sequentialCases wipe the store and so run alone, after the others.
func (s *suite) sequentialCases() []testCase {
	return []testCase{
		{"FloorAfterWipe", s.testFloorAfterWipe},
		{"Restart", s.testRestart},
	}
}
