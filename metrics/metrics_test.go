package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/metrics"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/storetest"
	"github.com/baton-go/baton/testkit/testenv"
)

var (
	discard    = slog.New(slog.DiscardHandler)
	appCounter atomic.Int64
)

// names are every metric family the package exports, as doc.go and the
// README list them.
var names = []string{
	"baton_backend_errors_total",
	"baton_job_lost_total",
	"baton_job_run_seconds",
	"baton_job_runs_total",
	"baton_job_skipped_total",
	"baton_lock_acquire_seconds",
	"baton_lock_acquired_total",
	"baton_lock_extensions_total",
	"baton_lock_handovers_total",
	"baton_lock_hold_seconds",
	"baton_lock_lost_total",
	"baton_lock_refusals_total",
	"baton_lock_wait_seconds",
	"baton_role_claims_total",
	"baton_role_epoch",
	"baton_role_is_master",
	"baton_role_master_changes_total",
	"baton_role_masterless_seconds_total",
	"baton_role_renewal_failures_total",
	"baton_role_renewal_seconds",
	"baton_role_transitions_total",
}

// newID returns the ID of an instance of app on port.
func newID(t testing.TB, app string, port int) instanceid.ID {
	t.Helper()
	id, err := instanceid.New("127.0.0.1", "acme", app, port)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func startElector(t *testing.T, el *role.Elector) {
	t.Helper()
	testenv.Start(el, el.Run)
	t.Cleanup(func() { stopElector(t, el) })
}

func stopElector(t *testing.T, el *role.Elector) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := testenv.Stop(ctx, el); err != nil {
		t.Error(err)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// schedule runs job once, at once, on a scheduler of its own, and stops
// the scheduler when the test ends.
func schedule(t *testing.T, name string, gate gocron.JobOption) {
	t.Helper()
	s, err := gocron.NewScheduler()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(); err != nil {
			t.Error(err)
		}
	})
	if _, err := s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(func() {}), gocron.WithName(name), gate); err != nil {
		t.Fatal(err)
	}
	s.Start()
}

// Two instances of one service, each with a client of its own of a real
// redis-server (and of a Consul agent, and of the in-memory store), share
// one Metrics: after an election, a contended lock and jobs that run on
// one instance and are skipped on the other, the registry holds the
// values of what happened; after the master stops, those of the
// handover.
func TestMetricsOfARealElectionLocksAndJobs(t *testing.T) {
	storetest.Each(t, func(t *testing.T, store storetest.Backend) {
		newStore := store.Open(t)
		electionLocksAndJobs(t, newStore(t), newStore(t))
	})
}

func electionLocksAndJobs(t *testing.T, storeA, storeB backend.Store) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.WithLockKeys("nightly-export"))
	if err != nil {
		t.Fatal(err)
	}
	app := fmt.Sprintf("metrics%d", appCounter.Add(1))
	idA, idB := newID(t, app, 8081), newID(t, app, 8082)
	// The long TTL gives each renewal seconds to land, so a busy machine
	// does not cost the master its role; the short heartbeat renews often.
	cfg := role.Config{HeartbeatInterval: 100 * time.Millisecond, HeartbeatExpiration: 10 * time.Second}
	a, err := role.NewElector(storeA, idA, cfg, role.WithLogger(discard), m.Role(idA))
	if err != nil {
		t.Fatal(err)
	}
	b, err := role.NewElector(storeB, idB, cfg, role.WithLogger(discard), m.Role(idB))
	if err != nil {
		t.Fatal(err)
	}
	instA := map[string]string{"app": app, "tenant": "acme", "instance_id": idA.String()}
	instB := map[string]string{"app": app, "tenant": "acme", "instance_id": idB.String()}
	with := func(base map[string]string, kv ...string) map[string]string {
		l := make(map[string]string, len(base)+len(kv)/2)
		for k, v := range base {
			l[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			l[kv[i]] = kv[i+1]
		}
		return l
	}
	if v := value(t, reg, "baton_role_is_master", instA); v != 0 {
		t.Errorf("is_master of a before its election = %v, want 0", v)
	}

	// The election.
	startElector(t, a)
	waitUntil(t, "a elected", a.IsMaster)
	startElector(t, b)
	waitUntil(t, "b sees a as master", func() bool { return b.Status().Master == idA.String() })
	await(t, reg, "baton_role_is_master", instA, "a is master", func(v float64) bool { return v == 1 })
	await(t, reg, "baton_role_claims_total", with(instB, "result", "held"), "b's claim was refused", func(v float64) bool { return v >= 1 })
	await(t, reg, "baton_role_master_changes_total", instB, "b learnt of a", func(v float64) bool { return v == 1 })
	await(t, reg, "baton_role_renewal_seconds", instA, "a renewed", func(v float64) bool { return v >= 1 })
	if v := value(t, reg, "baton_role_is_master", instB); v != 0 {
		t.Errorf("is_master of b = %v, want 0", v)
	}
	if v := value(t, reg, "baton_role_transitions_total", with(instA, "to", "master")); v != 1 {
		t.Errorf("a's transitions to master = %v, want 1", v)
	}
	if v := value(t, reg, "baton_role_claims_total", with(instA, "result", "granted")); v != 1 {
		t.Errorf("a's granted claims = %v, want 1", v)
	}
	if v := value(t, reg, "baton_role_transitions_total", with(instB, "to", "master")); v != 0 {
		t.Errorf("b's transitions to master before its election = %v, want 0", v)
	}
	if v := value(t, reg, "baton_role_epoch", instA); v != float64(a.Status().Epoch) || v == 0 {
		t.Errorf("a's epoch gauge = %v, want %d", v, a.Status().Epoch)
	}

	// A contended lock: a holds it, b's TryLock is refused, a DoKey of b
	// gives up when its context ends, b's Do waits and
	// gets it when a unlocks. A key not allowed as a label counts as
	// "other".
	la, err := synclock.NewLocker(storeA, idA, synclock.Config{}, synclock.WithLogger(discard), m.Lock(idA))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := synclock.NewLocker(storeB, idB, synclock.Config{}, synclock.WithLogger(discard), m.Lock(idB))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	mu := la.Mutex("nightly-export")
	if err := mu.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lb.Mutex("nightly-export").TryLock(ctx); !errors.Is(err, synclock.ErrLocked) {
		t.Fatalf("b's TryLock while a holds the lock: %v, want ErrLocked", err)
	}
	// A wait whose context ends while a holds the lock is a timeout, not
	// "locked", though its error matches ErrLocked too.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	err = lb.DoKey(short, "nightly-export", func(context.Context) error { return nil })
	cancelShort()
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, synclock.ErrLocked) {
		t.Fatalf("b's DoKey whose context ends while a holds the lock: %v, want ErrLocked and DeadlineExceeded", err)
	}
	ran := make(chan error, 1)
	go func() {
		ran <- lb.DoKey(ctx, "nightly-export", func(context.Context) error { return nil })
	}()
	if err := mu.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; err != nil {
		t.Fatalf("b's Do after a unlocked: %v", err)
	}
	if m := la.Mutex("invoice:42"); m.TryLock(ctx) != nil || m.Unlock(ctx) != nil {
		t.Fatal("a's TryLock and Unlock of a free lock failed")
	}
	export := map[string]string{"app": app, "tenant": "acme", "lock": "nightly-export"}
	other := map[string]string{"app": app, "tenant": "acme", "lock": metrics.Other}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"baton_lock_acquired_total", export, 2},
		{"baton_lock_acquire_seconds", export, 2},
		{"baton_lock_hold_seconds", export, 2},
		{"baton_lock_refusals_total", with(export, "reason", "locked"), 1},
		{"baton_lock_refusals_total", with(export, "reason", "timeout"), 1},
		{"baton_lock_wait_seconds", export, 2},
		{"baton_lock_acquired_total", other, 1},
		{"baton_lock_hold_seconds", other, 1},
	} {
		if v := value(t, reg, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	if _, ok := sample(t, reg, "baton_lock_acquired_total", map[string]string{"lock": "invoice:42"}); ok {
		t.Error("a lock key that was not allowed became a label")
	}
	handed := value(t, reg, "baton_lock_handovers_total", export)
	t.Logf("handovers of the contended lock: %v (0 when a's release came before b's wait reached the store)", handed)

	// Jobs: "report" is master-only, "warm-cache" slave-only; each runs on
	// one instance and is skipped on the other.
	for _, in := range []struct {
		el *role.Elector
		id instanceid.ID
	}{{a, idA}, {b, idB}} {
		schedule(t, "report", schedlock.MasterOnly(in.el, m.Job(in.id)))
		schedule(t, "warm-cache", schedlock.SlaveOnly(in.el, m.Job(in.id)))
	}
	job := func(name string, kv ...string) map[string]string {
		return with(map[string]string{"app": app, "tenant": "acme", "job": name}, kv...)
	}
	one := func(v float64) bool { return v == 1 }
	await(t, reg, "baton_job_skipped_total", job("report", "reason", "not-master"), "b skipped the report", one)
	await(t, reg, "baton_job_skipped_total", job("warm-cache", "reason", "not-slave"), "a skipped the warm-up", one)
	await(t, reg, "baton_job_runs_total", job("report"), "a ran the report", one)
	await(t, reg, "baton_job_runs_total", job("warm-cache"), "b ran the warm-up", one)
	await(t, reg, "baton_job_run_seconds", job("report"), "the report's run ended", one)
	await(t, reg, "baton_job_run_seconds", job("warm-cache"), "the warm-up's run ended", one)

	// The handover: a stops, b takes over.
	epochA := a.Status().Epoch
	stopElector(t, a)
	waitUntil(t, "b elected", b.IsMaster)
	await(t, reg, "baton_role_is_master", instB, "b is master", one)
	if v := value(t, reg, "baton_role_is_master", instA); v != 0 {
		t.Errorf("is_master of the stopped a = %v, want 0", v)
	}
	if v := value(t, reg, "baton_role_transitions_total", with(instA, "to", "slave")); v != 1 {
		t.Errorf("a's transitions to slave = %v, want 1", v)
	}
	if v := value(t, reg, "baton_role_transitions_total", with(instB, "to", "master")); v != 1 {
		t.Errorf("b's transitions to master = %v, want 1", v)
	}
	if v := value(t, reg, "baton_role_epoch", instB); v <= float64(epochA) {
		t.Errorf("b's epoch gauge = %v, want above a's %d", v, epochA)
	}
	for _, inst := range []map[string]string{instA, instB} {
		if v := value(t, reg, "baton_role_masterless_seconds_total", inst); v < 0 {
			t.Errorf("masterless seconds of %s = %v", inst["instance_id"], v)
		}
	}

	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// feed reports one event of every kind to the observers of m, with
// labels of app, without a store.
func feed(m *metrics.Metrics, id instanceid.ID) {
	el := m.RoleObserver(id)
	held := &backend.HeldError{Holder: backend.Lease{Owner: "other#1", Token: 7, TTL: time.Second}}
	for _, e := range []role.Event{
		{Kind: role.EventClaim, Err: held},
		{Kind: role.EventClaim, Err: errors.New("store down")},
		{Kind: role.EventClaim},
		{Kind: role.EventElected, Epoch: 8},
		{Kind: role.EventMasterChange, Epoch: 8, Master: id.String()},
		{Kind: role.EventRenewal, Epoch: 8, Latency: time.Millisecond},
		{Kind: role.EventRenewal, Epoch: 8, Latency: time.Second, Err: errors.New("store down")},
		{Kind: role.EventDemoted, Epoch: 8},
		{Kind: role.EventStopped, Epoch: 8},
	} {
		el(e)
	}
	lk := m.LockObserver(id)
	for _, e := range []synclock.Event{
		{Kind: synclock.EventAcquired, Key: "k", Token: 1, Wait: time.Millisecond, Tries: 1, Handed: true},
		{Kind: synclock.EventRefused, Key: "k", Wait: time.Second, Err: synclock.ErrLocked},
		{Kind: synclock.EventRefused, Key: "k", Wait: time.Second, Err: errors.New("store down")},
		{Kind: synclock.EventExtended, Key: "k", Token: 1},
		{Kind: synclock.EventLost, Key: "k", Token: 1, Held: time.Second, Err: synclock.ErrLeaseExpired},
		{Kind: synclock.EventReleased, Key: "k", Token: 1, Held: time.Second, Err: errors.New("store down")},
	} {
		lk(e)
	}
	job := m.JobObserver(id)
	for _, e := range []schedlock.Event{
		{Kind: schedlock.EventAdmitted, Job: "j"},
		{Kind: schedlock.EventSkipped, Job: "j", Err: &schedlock.SkipError{Job: "j", Reason: schedlock.ErrUnavailable}, Reason: "unavailable"},
		{Kind: schedlock.EventLost, Job: "j", Err: schedlock.ErrLost},
		{Kind: schedlock.EventReleased, Job: "j", Held: time.Second},
	} {
		job(e)
	}
}

// Every family follows Prometheus' conventions (promlint finds nothing),
// and the package exports exactly the families it documents.
func TestMetricsPassLint(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	feed(m, newID(t, "lint", 8080))
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fams {
		got = append(got, f.GetName())
		if f.GetHelp() == "" {
			t.Errorf("%s has no help text", f.GetName())
		}
	}
	if !slices.Equal(got, names) {
		t.Errorf("families:\n%v\nwant:\n%v", got, names)
	}
}

// Each fed event lands in its series; store errors are told apart from
// refusals and lost leases.
func TestObserversCountEveryEvent(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	id := newID(t, "feed", 8080)
	feed(m, id)
	inst := map[string]string{"instance_id": id.String()}
	with := func(base map[string]string, k, v string) map[string]string {
		l := map[string]string{k: v}
		for bk, bv := range base {
			l[bk] = bv
		}
		return l
	}
	lock := map[string]string{"lock": metrics.Other}
	jobL := map[string]string{"job": "j"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"baton_role_claims_total", with(inst, "result", "held"), 1},
		{"baton_role_claims_total", with(inst, "result", "error"), 1},
		{"baton_role_claims_total", with(inst, "result", "granted"), 1},
		{"baton_role_transitions_total", with(inst, "to", "master"), 1},
		{"baton_role_transitions_total", with(inst, "to", "slave"), 1},
		{"baton_role_master_changes_total", inst, 1},
		{"baton_role_renewal_seconds", inst, 1},
		{"baton_role_renewal_failures_total", inst, 1},
		{"baton_role_is_master", inst, 0},
		{"baton_role_epoch", inst, 8},
		{"baton_lock_acquired_total", lock, 1},
		{"baton_lock_acquire_seconds", lock, 1},
		{"baton_lock_handovers_total", lock, 1},
		{"baton_lock_refusals_total", with(lock, "reason", "locked"), 1},
		{"baton_lock_refusals_total", with(lock, "reason", "error"), 1},
		{"baton_lock_wait_seconds", lock, 2},
		{"baton_lock_extensions_total", lock, 1},
		{"baton_lock_lost_total", lock, 1},
		{"baton_lock_hold_seconds", lock, 1},
		{"baton_job_runs_total", jobL, 1},
		{"baton_job_skipped_total", with(jobL, "reason", "unavailable"), 1},
		{"baton_job_lost_total", jobL, 1},
		{"baton_job_run_seconds", jobL, 1},
		{"baton_backend_errors_total", map[string]string{"component": "role", "op": "acquire"}, 1},
		{"baton_backend_errors_total", map[string]string{"component": "role", "op": "renew"}, 1},
		{"baton_backend_errors_total", map[string]string{"component": "lock", "op": "acquire"}, 1},
		{"baton_backend_errors_total", map[string]string{"component": "lock", "op": "release"}, 1},
		{"baton_backend_errors_total", map[string]string{"component": "job", "op": "acquire"}, 1},
		{"baton_backend_errors_total", map[string]string{"component": "job", "op": "release"}, 0},
	} {
		if v := value(t, reg, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
}

// Masterless time counts from the first event or a demotion until a
// master is known, and from a refused claim that names no holder; it
// stops with the election.
func TestMasterlessTime(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.WithNow(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	id := newID(t, "masterless", 8080)
	observe := m.RoleObserver(id)
	inst := map[string]string{"instance_id": id.String()}
	at := func(d time.Duration, e role.Event) {
		now = now.Add(d)
		observe(e)
	}
	masterless := func(want time.Duration) {
		t.Helper()
		if v := value(t, reg, "baton_role_masterless_seconds_total", inst); v != want.Seconds() {
			t.Errorf("masterless = %vs, want %v", v, want)
		}
	}
	masterless(0) // not running yet
	at(0, role.Event{Kind: role.EventClaim})
	now = now.Add(time.Second)
	masterless(time.Second) // the open spell counts at scrape time
	at(0, role.Event{Kind: role.EventElected, Epoch: 3})
	now = now.Add(time.Hour)
	masterless(time.Second)
	at(0, role.Event{Kind: role.EventDemoted, Epoch: 3})
	at(2*time.Second, role.Event{Kind: role.EventMasterChange, Master: "10.0.0.9:acme:masterless:8080"})
	masterless(3 * time.Second)
	recovering := &backend.HeldError{Holder: backend.Lease{TTL: time.Minute}, Recovering: true}
	at(time.Minute, role.Event{Kind: role.EventClaim, Err: recovering})
	at(4*time.Second, role.Event{Kind: role.EventStopped})
	now = now.Add(time.Hour)
	masterless(7 * time.Second) // stopped: nothing more counts
	at(0, role.Event{Kind: role.EventClaim, Err: &backend.HeldError{Holder: backend.Lease{Owner: "10.0.0.9:acme:masterless:8080#1", TTL: time.Minute}}})
	at(time.Minute, role.Event{Kind: role.EventClaim})
	masterless(7 * time.Second) // a restarted election that sees a master at once
}

// New registers its collectors once: a second Metrics on one registry is
// refused, and one made without a registry can be registered by hand.
func TestRegisteredOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg); err != nil {
		t.Fatal(err)
	}
	var already prometheus.AlreadyRegisteredError
	if _, err := metrics.New(reg); !errors.As(err, &already) {
		t.Fatalf("a second New on one registry: %v, want AlreadyRegisteredError", err)
	}
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	other := prometheus.NewRegistry()
	if err := other.Register(m); err != nil {
		t.Fatal(err)
	}
	m.RoleObserver(newID(t, "byhand", 8080))(role.Event{Kind: role.EventElected, Epoch: 1})
	if v := value(t, other, "baton_role_is_master", map[string]string{"app": "byhand"}); v != 1 {
		t.Errorf("is_master = %v, want 1", v)
	}
}

// WithLockKeys and WithLockLabel decide which keys name their series;
// every other key is "other".
func TestLockLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.WithLockKeys("nightly-export"), metrics.WithLockLabel(func(key string) string {
		if kind, _, ok := strings.Cut(key, ":"); ok && kind == "invoice" {
			return "invoice"
		}
		return ""
	}))
	if err != nil {
		t.Fatal(err)
	}
	observe := m.LockObserver(newID(t, "labels", 8080))
	for _, key := range []string{"nightly-export", "invoice:1", "invoice:2", "customer:9", "github.com/acme/billing.(*S).Close"} {
		observe(synclock.Event{Kind: synclock.EventAcquired, Key: key, Token: 1})
	}
	for label, want := range map[string]float64{"nightly-export": 1, "invoice": 2, metrics.Other: 2} {
		if v := value(t, reg, "baton_lock_acquired_total", map[string]string{"lock": label}); v != want {
			t.Errorf("acquired{lock=%q} = %v, want %v", label, v, want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "baton_lock_acquired_total"); err != nil || n != 3 {
		t.Errorf("acquired series: %d, %v; want 3", n, err)
	}
}

// The metrics table of docs/operations.md names every family the package
// exports.
func TestREADMEListsEveryMetric(t *testing.T) {
	readme, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !strings.Contains(string(readme), "`"+n+"`") {
			t.Errorf("docs/operations.md does not list %s", n)
		}
	}
}
