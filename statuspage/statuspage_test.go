package statuspage_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/statuspage"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/storetest"
	"github.com/baton-go/baton/testkit/testenv"
)

var server *testenv.Redis

func TestMain(m *testing.M) { testenv.MainWithRedis(m, &server) }

// patience bounds every wait for something that must happen; reaching it
// means the thing was missed, not that the machine was slow.
const patience = 30 * time.Second

var quiet = slog.New(slog.DiscardHandler)

// refresh is how often the tests' pages read the store: their waits for
// a change see it within this time.
const refresh = 300 * time.Millisecond

// fastRole is a role configuration whose failover after a crash takes a
// few seconds, with room for a renewal to land on a busy machine.
var fastRole = role.Config{HeartbeatExpiration: 3 * time.Second, HeartbeatInterval: time.Second, SafetyMargin: 300 * time.Millisecond}

// instance is one process of a service: its own store client, its
// elector, its events and its status page.
type instance struct {
	id     instanceid.ID
	store  backend.Store
	el     *role.Elector
	events *statuspage.Events
	page   *statuspage.Handler
	srv    *httptest.Server
}

// newApp returns an app name of its own for a test, so tests sharing the
// server never see each other's keys.
func newApp() string { return "app" + strings.ToLower(rand.Text()[:10]) }

// shared returns a client of the package's shared redis-server, closed
// when t ends: a storetest.Factory.
func shared(t testing.TB) backend.Store { return storetest.Redis(t, server) }

// start starts an instance of app on port with a new client from
// newStore (shared, or a storetest backend's), serving its page under
// /baton/. t.Cleanup stops it.
func start(t *testing.T, newStore storetest.Factory, app string, port int) *instance {
	t.Helper()
	id, err := instanceid.New("127.0.0.1", "acme", app, port)
	if err != nil {
		t.Fatal(err)
	}
	in := &instance{id: id, store: newStore(t), events: statuspage.NewEvents(0)}
	opts := append(in.events.RoleOptions(), role.WithLogger(quiet))
	if in.el, err = role.NewElector(in.store, id, fastRole, opts...); err != nil {
		t.Fatal(err)
	}
	if in.page, err = statuspage.New(in.store, in.el, statuspage.WithEvents(in.events), statuspage.WithRefresh(refresh)); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/baton/", http.StripPrefix("/baton", in.page))
	in.srv = httptest.NewServer(mux)
	testenv.Start(in.el, in.el.Run)
	// Runs before the store's own cleanup closes it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		testenv.Stop(ctx, in.el)
		in.srv.Close()
	})
	return in
}

// crash closes in's store client: the instance never renews nor
// releases again, and what it held runs out on the server's clock.
func (in *instance) crash(t *testing.T) {
	t.Helper()
	c, ok := in.store.(io.Closer)
	if !ok {
		t.Fatalf("the store %T cannot be closed", in.store)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it holds, and fails t after patience.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for: %s", patience, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// get fetches path from in's page and returns the status code and body.
func get(t *testing.T, in *instance, path string) (int, string) {
	t.Helper()
	res, err := http.Get(in.srv.URL + "/baton/" + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the body: %v", path, err)
	}
	return res.StatusCode, string(body)
}

// status fetches and decodes in's /status.
func status(t *testing.T, in *instance) statuspage.Status {
	t.Helper()
	code, body := get(t, in, "status")
	var s statuspage.Status
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("/status answered %d with %q: %v", code, body, err)
	}
	if want := http.StatusOK; !s.Healthy {
		want = http.StatusServiceUnavailable
		if code != want {
			t.Errorf("/status of an unhealthy instance answered %d; want %d", code, want)
		}
	} else if code != want {
		t.Errorf("/status of a healthy instance answered %d; want %d", code, want)
	}
	return s
}

func memberIDs(s statuspage.Status) []string {
	var ids []string
	for _, m := range s.Members {
		ids = append(ids, m.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestStatus runs two instances of a service on each store of the table
// (in memory, a real redis-server, a Consul dev agent) and checks what
// their /status, /healthz and page say: the master with its epoch, both
// members, a lock held by one instance with the other waiting in its
// line, a job the slave skipped, and the master change after the master
// stops.
func TestStatus(t *testing.T) {
	storetest.Each(t, testStatus)
}

func testStatus(t *testing.T, st storetest.Backend) {
	newStore := st.Open(t)
	app := newApp()
	a := start(t, newStore, app, 8081)
	waitFor(t, "a is master and its election recorded", func() bool {
		return a.el.IsMaster() && slices.ContainsFunc(a.events.Transitions(), func(e statuspage.Event) bool { return e.Kind == "elected" })
	})
	b := start(t, newStore, app, 8082)
	waitFor(t, "b sees a as master", func() bool { return b.el.Status().Master == a.id.String() })
	waitFor(t, "both members listed", func() bool { ms, _ := a.el.Members(t.Context()); return len(ms) == 2 })

	// a holds a lock; b waits for it in line.
	endSections := holdWithWaiter(t, a, b)
	var s statuspage.Status
	waitFor(t, "the lock listed with b waiting", func() bool {
		s = status(t, a)
		return len(s.Locks) == 1 && len(s.Locks[0].Waiters) == 1
	})

	// b skips a master-only job.
	sched, err := gocron.NewScheduler()
	if err != nil {
		t.Fatal(err)
	}
	defer sched.Shutdown()
	skipped := make(chan error, 1)
	if _, err := sched.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()), gocron.NewTask(func() {}), gocron.WithName("nightly-report"),
		schedlock.MasterOnly(b.el, schedlock.WithObserver(b.events.Job), schedlock.WithLogger(quiet)),
		gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) { skipped <- err }))); err != nil {
		t.Fatal(err)
	}
	sched.Start()
	if err := <-skipped; !errors.Is(err, schedlock.ErrSkipped) {
		t.Fatalf("a slave's master-only gate: err = %v; want a skip", err)
	}

	if !s.Healthy || len(s.Problems) != 0 {
		t.Errorf("a is not healthy: %q", s.Problems)
	}
	if s.Service != (statuspage.Service{Tenant: "acme", App: app}) {
		t.Errorf("service %+v; want acme/%s", s.Service, app)
	}
	if s.Master == nil || s.Master.ID != a.id.String() || s.Master.Epoch != a.el.Status().Epoch || s.Master.Since == nil {
		t.Errorf("master %+v; want %s with epoch %d, since its election", s.Master, a.id, a.el.Status().Epoch)
	}
	// What is left of the role's lease is at most its TTL; Consul cannot
	// read a session's remaining time and shows the TTL itself.
	ttl, left := fastRole.HeartbeatExpiration.Milliseconds(), s.Master.LeaseMillis
	switch {
	case st.Name == "consul" && left != ttl:
		t.Errorf("the master's lease left on Consul is %d ms; want the TTL, %d", left, ttl)
	case left <= 0 || left > ttl:
		t.Errorf("the master's lease left is %d ms; want in (0, %d]", left, ttl)
	}
	if s.Instance.ID != a.id.String() || s.Instance.Role != "master" {
		t.Errorf("instance %+v; want %s, master", s.Instance, a.id)
	}
	if got, want := memberIDs(s), []string{a.id.String(), b.id.String()}; !slices.Equal(got, want) {
		t.Errorf("members %q; want %q", got, want)
	}
	for _, m := range s.Members {
		if m.Master != (m.ID == a.id.String()) || m.Self != (m.ID == a.id.String()) {
			t.Errorf("member %+v: master and self should be true for a only", m)
		}
	}
	lk := s.Locks[0]
	if lk.Kind != "lock" || lk.Name != "invoice:42" || lk.Holder != a.id.String() || lk.Token == 0 ||
		lk.LeaseMillis <= 0 || lk.LeaseMillis > (synclock.Config{}).WithDefaults().HoldDuration.Milliseconds() {
		t.Errorf("lock %+v; want lock invoice:42 held by %s with a token and a lease of at most the hold duration", lk, a.id)
	}
	if !slices.Equal(lk.Waiters, []string{b.id.String()}) {
		t.Errorf("lock waiters %q; want b's instance ID (%s), without its process nonce", lk.Waiters, b.id)
	}
	if code, raw := get(t, b, "status"); code != http.StatusOK || strings.Contains(raw, "0001-01-01") {
		t.Errorf("the slave's /status answered %d and shows a zero time:\n%s", code, raw)
	}
	if !slices.ContainsFunc(s.Transitions, func(e statuspage.Event) bool { return e.Kind == "elected" }) {
		t.Errorf("a's transitions %+v lack its election", s.Transitions)
	}

	code, body := get(t, a, "healthz")
	if code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz answered %d %q; want 200 ok", code, body)
	}
	code, html := get(t, b, "")
	if code != http.StatusOK {
		t.Fatalf("the page answered %d", code)
	}
	for _, want := range []string{`<meta name="viewport"`, `id="master-id">` + a.id.String(), b.id.String(), "invoice:42", "nightly-report", "not-master"} {
		if !strings.Contains(html, want) {
			t.Errorf("b's page lacks %q", want)
		}
	}
	if strings.Contains(html, "<script") || strings.Contains(html, "<link") || strings.Contains(html, "src=") {
		t.Errorf("the page loads outside assets or scripts")
	}

	endSections()

	// a stops: b becomes master, and b's status says so with a larger
	// epoch and the change among its transitions.
	ctx, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	if err := testenv.Stop(ctx, a.el); err != nil {
		t.Fatal(err)
	}
	// The store names b before b's elector has taken the tenure, and the
	// callbacks that record it run after that: wait for all three.
	waitFor(t, "b's status names b master, b says so, and its transitions have its election", func() bool {
		s = status(t, b)
		return s.Master != nil && s.Master.ID == b.id.String() && s.Instance.Role == "master" &&
			slices.ContainsFunc(s.Transitions, func(e statuspage.Event) bool { return e.Kind == "elected" })
	})
	if s.Master.Epoch <= a.el.Status().Epoch {
		t.Errorf("b's epoch %d is not above a's %d", s.Master.Epoch, a.el.Status().Epoch)
	}
	if s.Master.Since == nil {
		t.Errorf("b's status after the handover does not say since when b is master: %+v", s.Master)
	}
	if i := slices.IndexFunc(s.Jobs, func(e statuspage.Event) bool { return e.Kind == "skipped" && e.Subject == "nightly-report" }); i < 0 {
		t.Errorf("b's jobs %+v lack the skipped run", s.Jobs)
	}
}

// TestHealthzDuplicateID checks, on every store of the table, that two
// live processes with one instance ID make /healthz answer 503, naming
// the duplicate.
func TestHealthzDuplicateID(t *testing.T) {
	storetest.Each(t, testHealthzDuplicateID)
}

func testHealthzDuplicateID(t *testing.T, st storetest.Backend) {
	newStore := st.Open(t)
	app := newApp()
	a := start(t, newStore, app, 8081)
	b := start(t, newStore, app, 8081)
	waitFor(t, "a duplicate reported", func() bool { return a.el.Status().Duplicate != "" || b.el.Status().Duplicate != "" })
	in := a
	if a.el.Status().Duplicate == "" {
		in = b
	}
	code, body := get(t, in, "healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "duplicate instance ID") || !strings.Contains(body, "delete its entry: ") {
		t.Errorf("/healthz answered %d %q; want 503 naming the duplicate instance ID and the entry to delete", code, body)
	}
	if s := status(t, in); s.Healthy || s.Instance.Duplicate == "" {
		t.Errorf("/status says healthy %v, duplicate %q; want unhealthy with the duplicate", s.Healthy, s.Instance.Duplicate)
	}
}

// TestHealthzStoreUnreachable checks, on Redis and on Consul, that
// /healthz answers 503 saying the store is unreachable once the
// instance's server is gone, that the page still renders, saying so, and
// that /healthz is 200 again once the server is back.
func TestHealthzStoreUnreachable(t *testing.T) {
	storetest.EachServer(t, testHealthzStoreUnreachable)
}

func testHealthzStoreUnreachable(t *testing.T, st storetest.Backend) {
	newStore, srv := st.Serve(t)
	in := start(t, newStore, newApp(), 8081)
	waitFor(t, "master", in.el.IsMaster)
	if code, body := get(t, in, "healthz"); code != http.StatusOK {
		t.Fatalf("/healthz with the server up answered %d %q", code, body)
	}
	if err := srv.Kill(); err != nil {
		t.Fatal(err)
	}
	code, body := get(t, in, "healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "store unreachable") {
		t.Errorf("/healthz with the server gone answered %d %q; want 503, store unreachable", code, body)
	}
	// The page answers from a snapshot up to the refresh interval old.
	waitFor(t, "the page with the server gone answers 200 saying the store is unreachable", func() bool {
		code, html := get(t, in, "")
		return code == http.StatusOK && strings.Contains(html, "store unreachable") && strings.Contains(html, "unhealthy")
	})

	// Once the server is back, so is the health (and the Redis client's
	// pool stops redialling in the background).
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "/healthz answers 200 again", func() bool { code, _ := get(t, in, "healthz"); return code == http.StatusOK })
}

// TestRoutes checks the paths and methods the handler answers.
func TestRoutes(t *testing.T) {
	in := start(t, shared, newApp(), 8081)
	for path, want := range map[string]int{"": 200, "status": 200, "healthz": 200, "nope": 404} {
		if path == "status" || path == "healthz" || path == "" {
			waitFor(t, "master", in.el.IsMaster)
		}
		if code, _ := get(t, in, path); code != want {
			t.Errorf("GET /baton/%s answered %d; want %d", path, code, want)
		}
	}
	res, err := http.Post(in.srv.URL+"/baton/status", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /baton/status answered %d; want 405", res.StatusCode)
	}
}

// holdWithWaiter makes a hold the lock "invoice:42" (its locker reporting
// to a's events) and b wait for it; the returned function ends a's
// section and checks that both sections ran.
func holdWithWaiter(t *testing.T, a, b *instance) (end func()) {
	t.Helper()
	lockA, err := synclock.NewLocker(a.store, a.id, synclock.Config{}, synclock.WithLogger(quiet), synclock.WithObserver(a.events.Lock))
	if err != nil {
		t.Fatal(err)
	}
	lockB, err := synclock.NewLocker(b.store, b.id, synclock.Config{}, synclock.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	aDone, bDone := make(chan error, 1), make(chan error, 1)
	go func() {
		aDone <- lockA.DoKey(t.Context(), "invoice:42", func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	go func() {
		bDone <- lockB.DoKey(t.Context(), "invoice:42", func(context.Context) error { return nil })
	}()
	return func() {
		t.Helper()
		close(release)
		if err := <-aDone; err != nil {
			t.Errorf("a's section: %v", err)
		}
		if err := <-bDone; err != nil {
			t.Errorf("b's section: %v", err)
		}
	}
}
