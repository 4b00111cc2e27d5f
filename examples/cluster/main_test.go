package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-go/baton/internal/ctlline"
	"github.com/baton-go/baton/statuspage"
	"github.com/baton-go/baton/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The demo runs end to end on the embedded Redis; run checks its own
// outcome (three tenures, increasing epochs, no overlap). The demo expects
// each master to keep the role until it stops or crashes it, so the TTL
// leaves a renewal over a second to land (heartbeat TTL/3, safety margin
// TTL/10): a shorter one lets a busy machine cost a master its role, and
// the demo then crashes an instance that is no longer master.
func TestDemoRuns(t *testing.T) {
	var out testenv.SyncBuffer
	if err := run(func() (conn, error) { return connectRedis("") }, options{ttl: 2 * time.Second, out: &out}); err != nil {
		t.Fatal(err)
	}
	checkSlavesNameMaster(t, out.String())
}

// On a redis-server the demo has not used before, the restart guard
// keeps the role from everyone for a TTL first; the slaves then name the
// master all the same, as `go run ./examples/cluster -redis ADDR` shows.
func TestDemoRunsOnAFreshRedis(t *testing.T) {
	srv := testenv.NewRedis(t)
	var out testenv.SyncBuffer
	if err := run(func() (conn, error) { return connectRedis(srv.Addr()) }, options{ttl: 2 * time.Second, out: &out}); err != nil {
		t.Fatal(err)
	}
	checkSlavesNameMaster(t, out.String())
	if t.Failed() {
		t.Log(out.String())
	}
}

// checkSlavesNameMaster checks that the timeline's lines about the
// slaves, after the first election, name the master they see (on a fresh
// store a slave has not always seen it yet when the master is elected).
func checkSlavesNameMaster(t *testing.T, timeline string) {
	t.Helper()
	slaves := 0
	for line := range strings.Lines(timeline) {
		if _, seen, ok := strings.Cut(strings.TrimSpace(line), "is a slave and sees master"); ok {
			slaves++
			if !strings.HasPrefix(seen, " 127.0.0.1:acme:billing:") {
				t.Errorf("a slave names no master: %q", line)
			}
		}
	}
	if slaves != 2 {
		t.Errorf("the timeline has %d lines about slaves, want 2:\n%s", slaves, timeline)
	}
}

// The demo runs end to end on a Consul dev agent it starts, as
// `go run ./examples/cluster -consul` does; the batonctl command line it
// prints names the master while it runs.
func TestDemoRunsOnConsul(t *testing.T) {
	ctl := testenv.Batonctl(t)
	var out testenv.SyncBuffer
	held := false
	hold := func(string) {
		held = true
		checkBatonctl(t, ctl, out.String(), "127.0.0.1:acme:billing:")
	}
	if err := run(func() (conn, error) { return connectConsul("", 0) }, options{ttl: 2 * time.Second, out: &out, http: "127.0.0.1:0", hold: hold}); err != nil {
		t.Fatal(err)
	}
	checkSlavesNameMaster(t, out.String())
	if !held {
		t.Error("the demo never held its pages up")
	}
}

// checkBatonctl runs the batonctl command line the demo printed, as
// printed, and checks that it names a master whose ID starts with
// master. The demo printed no such line, and batonctl had no flags to
// reach the demo's keys.
func checkBatonctl(t *testing.T, ctl, output, master string) {
	t.Helper()
	args, err := ctlline.Args(output)
	if err != nil {
		t.Fatalf("%v:\n%s", err, output)
	}
	code, stdout, stderr := testenv.RunBatonctl(t, ctl, args...)
	if code != 0 || !strings.Contains(stdout, "master   "+master) {
		t.Errorf("batonctl %s: exit %d, stdout:\n%s\nstderr:\n%s\nwant the master %s", strings.Join(args, " "), code, stdout, stderr, master)
	}
}

// With -http, the demo serves each instance's status page; once the
// timeline is over (where -http holds the pages up), the index links the
// three pages; one instance reports itself master, the first master's
// page says its elector is not running (it was stopped) and names the
// master with its epoch, as the master's own page does, and the crashed
// instance's page says that its store is unreachable.
func TestDemoServesPages(t *testing.T) {
	ctl := testenv.Batonctl(t)
	var out testenv.SyncBuffer
	held := false
	hold := func(url string) {
		held = true
		body := fetch(t, url)
		for _, port := range []string{"8081", "8082", "8083"} {
			if !strings.Contains(body, `href="/`+port+`/"`) {
				t.Errorf("the index %s does not link /%s/", url, port)
			}
		}
		var master, stopped, crashed []string
		var named []statuspage.Status
		for _, port := range []string{"8081", "8082", "8083"} {
			var s statuspage.Status
			if err := json.Unmarshal([]byte(fetch(t, url+port+"/status")), &s); err != nil {
				t.Fatalf("/%s/status: %v", port, err)
			}
			problems := strings.Join(s.Problems, "; ")
			switch {
			case strings.Contains(problems, "store unreachable"):
				crashed = append(crashed, s.Instance.ID)
			case problems == "the elector is not running":
				stopped = append(stopped, s.Instance.ID)
				named = append(named, s)
			case s.Healthy && s.Instance.Role == "master":
				master = append(master, s.Instance.ID)
				named = append(named, s)
			default:
				t.Errorf("/%s/status: role %s, problems %q; want the master, the stopped or the crashed instance", port, s.Instance.Role, s.Problems)
			}
			if page := fetch(t, url+port+"/"); !strings.Contains(page, s.Instance.ID) {
				t.Errorf("the page /%s/ does not name its instance %s", port, s.Instance.ID)
			}
		}
		if len(master) != 1 || len(stopped) != 1 || len(crashed) != 1 {
			t.Fatalf("the pages report masters %q, stopped instances %q and crashed instances %q; want one of each", master, stopped, crashed)
		}
		checkBatonctl(t, ctl, out.String(), master[0]+" (epoch ")
		for _, s := range named {
			if s.Master == nil || s.Master.ID != master[0] || s.Master.Epoch == 0 {
				t.Errorf("%s's page names master %+v; want %s with its epoch", s.Instance.ID, s.Master, master[0])
			}
			if s.MembersError != "" || s.LocksError != "" || len(s.Members) == 0 {
				t.Errorf("%s's page: members %+v (error %q), locks error %q; want the members listed and the locks read",
					s.Instance.ID, s.Members, s.MembersError, s.LocksError)
			}
		}
	}
	err := run(func() (conn, error) { return connectRedis("") }, options{ttl: 2 * time.Second, http: "127.0.0.1:0", hold: hold, out: &out})
	if err != nil {
		t.Fatal(err)
	}
	if !held {
		t.Error("the demo never held its pages up")
	}
}

// fetch GETs url and returns the body, failing t on a transport error.
func fetch(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return string(body)
}
