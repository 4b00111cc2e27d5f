package statuspage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/statuspage"
	"github.com/baton-go/baton/testkit/storetest"
	"github.com/baton-go/baton/testkit/testenv"
)

// quietPage is a status page on a private redis-server where nothing
// else runs: its elector is made but not started, so that every command
// the server counts is the page's.
type quietPage struct {
	app   string
	store backend.Store
	el    *role.Elector
	admin *redis.Client // for INFO and for filling the server
	srv   *testenv.Redis
}

func newQuietPage(t testing.TB) *quietPage {
	t.Helper()
	srv := testenv.NewRedis(t)
	q := &quietPage{app: newApp(), srv: srv, admin: srv.Client(t)}
	q.store = storetest.Redis(t, srv)
	id, err := instanceid.New("127.0.0.1", "acme", q.app, 8081)
	if err != nil {
		t.Fatal(err)
	}
	if q.el, err = role.NewElector(q.store, id, fastRole, role.WithLogger(quiet)); err != nil {
		t.Fatal(err)
	}
	return q
}

// serve returns a server of a new page of q's elector.
func (q *quietPage) serve(t testing.TB, opts ...statuspage.Option) *httptest.Server {
	t.Helper()
	page, err := statuspage.New(q.store, q.el, opts...)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/baton/", http.StripPrefix("/baton", page))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// hold makes n locks of q's service held, named item-<from>...
func (q *quietPage) hold(t testing.TB, from, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := from + w; i < from+n; i += 8 {
				key := backend.AppKey("acme", q.app, "lock", "item-"+strconv.Itoa(i))
				if _, err := q.store.Acquire(t.Context(), key, "10.0.0.1:acme:"+q.app+":80#n", time.Hour, 0); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// join adds n members to q's service's member list.
func (q *quietPage) join(t testing.TB, n int) {
	t.Helper()
	reg := q.store.(backend.Registry)
	for i := range n {
		id := fmt.Sprintf("10.0.%d.%d:acme:%s:80", i/250, i%250, q.app)
		m := backend.Member{Name: id + "#n", Identity: id, Data: []byte(`{}`)}
		if _, err := reg.Heartbeat(t.Context(), backend.AppKey("acme", q.app, "members"), m, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
}

// commands returns how many commands the server has run, from INFO
// commandstats, leaving out INFO itself and what a client sends when it
// connects (HELLO, CLIENT SETINFO).
func (q *quietPage) commands(t testing.TB) int {
	t.Helper()
	info, err := q.admin.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for line := range strings.Lines(info) {
		name, rest, ok := strings.Cut(strings.TrimPrefix(line, "cmdstat_"), ":calls=")
		if !ok || name == "info" || name == "hello" || strings.HasPrefix(name, "client") {
			continue
		}
		calls, _, _ := strings.Cut(rest, ",")
		n, err := strconv.Atoi(calls)
		if err != nil {
			t.Fatalf("INFO commandstats line %q: %v", line, err)
		}
		total += n
	}
	return total
}

// fetch GETs (or HEADs) path of srv and returns the response and its
// body.
func fetch(t testing.TB, method string, srv *httptest.Server, path string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+"/baton/"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, body
}

// maxCommandsPerRead bounds the commands, scripts' own calls included,
// of one read of the status with the default limits and no waiters: the
// role key (a script of three calls, twice), the member list (one script
// of some 60 calls for 50 members), at most 40 SCAN calls and the lease
// scripts of 51 keys, five calls each: about 370.
const maxCommandsPerRead = 450

// TestStatusCostBounded fills a private redis-server with 200 held locks,
// then 3,000, then 12,000 (each with its fencing counter) and checks that
// one read of /status and one of the page run at most
// maxCommandsPerRead commands each time, scripts' own calls included,
// answer in under 256 KB, list DefaultMaxLocks locks and count the rest:
// exactly while the server's keys fit the scan's budget, as a lower
// bound of a partial list beyond it.
// Before the status page bounded its reads, each read scanned every key
// and ran one script per lease: some 15,000 commands and 1 MB of JSON
// for 3,000 locks.
func TestStatusCostBounded(t *testing.T) {
	q := newQuietPage(t)
	q.join(t, 3)
	held := 0
	for _, n := range []int{200, 3000, 12000} {
		q.hold(t, held, n-held)
		held = n
		for _, path := range []string{"status", ""} {
			srv := q.serve(t) // a new page: nothing read yet
			before := q.commands(t)
			res, body := fetch(t, http.MethodGet, srv, path)
			cost := q.commands(t) - before
			t.Logf("%d locks: GET /%s ran %d commands and answered %d bytes", n, path, cost, len(body))
			if cost > maxCommandsPerRead {
				t.Errorf("%d locks: GET /%s ran %d commands; want at most %d, however many keys", n, path, cost, maxCommandsPerRead)
			}
			if len(body) >= 256<<10 {
				t.Errorf("%d locks: GET /%s answered %d bytes; want under 256 KB", n, path, len(body))
			}
			if path != "status" {
				if want := fmt.Sprintf(`id="locks-more">and %d more`, n-statuspage.DefaultMaxLocks); n < 12000 && !strings.Contains(string(body), want) {
					t.Errorf("%d locks: the page does not say how many more locks there are (%q)", n, want)
				}
				continue
			}
			var s statuspage.Status
			if err := json.Unmarshal(body, &s); err != nil {
				t.Fatalf("/status answered %d %q: %v", res.StatusCode, body, err)
			}
			if len(s.Locks) != statuspage.DefaultMaxLocks || s.LocksError != "" {
				t.Errorf("%d locks: /status lists %d locks (error %q); want %d", n, len(s.Locks), s.LocksError, statuspage.DefaultMaxLocks)
			}
			switch {
			case n == 12000 && (!s.LocksPartial || s.LocksMore <= 0):
				// 24,000 keys: more than the scan's budget of slots.
				t.Errorf("%d locks: /status counts %d more locks, partial %v; want a partial scan and more than 0", n, s.LocksMore, s.LocksPartial)
			case n < 12000 && (s.LocksPartial || s.LocksMore != n-statuspage.DefaultMaxLocks):
				t.Errorf("%d locks: /status counts %d more locks, partial %v; want a full scan and %d more", n, s.LocksMore, s.LocksPartial, n-statuspage.DefaultMaxLocks)
			}
			if len(s.Members) != 3 || s.MembersMore != 0 {
				t.Errorf("%d locks: /status lists %d members and %d more; want 3", n, len(s.Members), s.MembersMore)
			}
		}
	}
}

// TestStatusReadShared checks that a second GET within the refresh
// interval runs no store command, that 16 concurrent GETs of a new page
// run as many commands as one GET does (one read, shared) and that HEAD
// of /status and of the page runs none.
func TestStatusReadShared(t *testing.T) {
	q := newQuietPage(t)
	q.join(t, 2)
	q.hold(t, 0, 20)

	// A first read loads the scripts into the server: later ones run the
	// same commands as each other.
	fetch(t, http.MethodGet, q.serve(t), "status")
	one := q.serve(t, statuspage.WithRefresh(time.Hour))
	before := q.commands(t)
	fetch(t, http.MethodGet, one, "status")
	single := q.commands(t) - before
	if single == 0 {
		t.Fatalf("the first GET of /status ran no command")
	}
	for _, path := range []string{"status", ""} {
		before = q.commands(t)
		fetch(t, http.MethodGet, one, path)
		if cost := q.commands(t) - before; cost != 0 {
			t.Errorf("a GET of /%s within the refresh interval ran %d commands; want none", path, cost)
		}
	}

	many := q.serve(t, statuspage.WithRefresh(time.Hour))
	before = q.commands(t)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() { fetch(t, http.MethodGet, many, "status") })
	}
	wg.Wait()
	if cost := q.commands(t) - before; cost != single {
		t.Errorf("16 concurrent GETs of a new page ran %d commands; one GET runs %d: they should share one read", cost, single)
	}

	fresh := q.serve(t)
	before = q.commands(t)
	for _, path := range []string{"status", ""} {
		res, body := fetch(t, http.MethodHead, fresh, path)
		if res.StatusCode != http.StatusOK || len(body) != 0 {
			t.Errorf("HEAD /%s answered %d with %d bytes; want 200, no body", path, res.StatusCode, len(body))
		}
	}
	if cost := q.commands(t) - before; cost != 0 {
		t.Errorf("HEAD of /status and of the page ran %d commands; want none", cost)
	}
}

// TestMembersCapped checks that the members listed are at most the
// limit, this instance among them, and that the rest are counted: on a
// store that lists a bounded part of a group (backend.MemberLister) and
// on one that does not, whose members the elector reads in full.
func TestMembersCapped(t *testing.T) {
	in := start(t, shared, newApp(), 8081)
	waitFor(t, "a master", in.el.IsMaster)
	q := &quietPage{app: in.id.App, store: in.store}
	q.join(t, 30)
	for name, store := range map[string]backend.Store{
		"lister":        in.store,
		"registry only": registryOnly{in.store, in.store.(backend.Registry)},
	} {
		t.Run(name, func(t *testing.T) {
			page, err := statuspage.New(store, in.el, statuspage.WithLimits(3, 10), statuspage.WithRefresh(refresh))
			if err != nil {
				t.Fatal(err)
			}
			var s statuspage.Status
			waitFor(t, "this instance listed among the members", func() bool {
				s = page.Status(context.WithoutCancel(t.Context()))
				return slices.ContainsFunc(s.Members, func(m statuspage.Member) bool { return m.Self })
			})
			if len(s.Members) != 10 || s.MembersMore != 21 {
				t.Errorf("the status lists %d members and %d more; want 10 and 21 more", len(s.Members), s.MembersMore)
			}
			self, master := 0, 0
			for _, m := range s.Members {
				if m.Self {
					self++
				}
				if m.Master {
					master++
				}
			}
			if self != 1 || master != 1 {
				t.Errorf("the members listed %+v hold this instance %d times and the master %d times; want each once", s.Members, self, master)
			}
		})
	}
}

// registryOnly is a store with a member list and no bounded listing of
// it (nor of its leases).
type registryOnly struct {
	backend.Store
	backend.Registry
}
