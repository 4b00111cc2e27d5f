//go:build unix

package statuspage_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/testkit/browsertest"
	"github.com/baton-go/baton/testkit/storetest"
)

// TestBrowser loads the status page in headless Chromium (package
// browsertest), on a real redis-server and on a Consul dev agent: two
// instances of a service run in the test process; the page of the second
// shows the first as master and both as members, with a lock the first
// holds and the second waits for; then the master's store is closed (a
// crash: it never releases) and the page, reloaded, shows the second
// instance as master and the first gone from the members: about 3 s
// after the crash on Redis with a role TTL of 3 s, about 7 s on Consul,
// whose sessions last up to twice their TTL. It checks that the page
// fits a phone's width and saves screenshots before and after in each
// subtest's artifact directory (kept with go test -artifacts; see
// testing.T.ArtifactDir). The demo's own processes are loaded and killed
// by examples/http's TestBrowserDemo.
func TestBrowser(t *testing.T) {
	d := browsertest.Start(t)
	storetest.EachServer(t, func(t *testing.T, st storetest.Backend) { testBrowser(t, d, st) })
}

func testBrowser(t *testing.T, d *browsertest.Driver, st storetest.Backend) {
	newStore := st.Open(t)
	app := newApp()
	a := start(t, newStore, app, 8081)
	waitFor(t, "a is master", a.el.IsMaster)
	b := start(t, newStore, app, 8082)
	waitFor(t, "b sees a as master", func() bool { return b.el.Status().Master == a.id.String() })
	waitFor(t, "both members listed", func() bool { ms, _ := b.el.Members(t.Context()); return len(ms) == 2 })

	// a holds a lock that b waits for, so the page has one to show.
	endSections := holdWithWaiter(t, a, b)
	waitFor(t, "b in the lock's line", func() bool {
		s := status(t, b)
		return len(s.Locks) == 1 && len(s.Locks[0].Waiters) == 1
	})

	s := d.NewSession(t, 412, 915) // a phone's viewport
	url := b.srv.URL + "/baton/"
	s.Navigate(t, url)
	p := s.ReadPage(t)
	if p.Master != a.id.String() {
		t.Errorf("the page shows master %q; want %q", p.Master, a.id)
	}
	if p.Role != "slave" {
		t.Errorf("the page shows this instance as %q; want slave", p.Role)
	}
	if got, want := slices.Sorted(slices.Values(p.Members)), []string{a.id.String(), b.id.String()}; !slices.Equal(got, want) {
		t.Errorf("the page shows members %q; want %q", got, want)
	}
	if !strings.Contains(p.Locks, "invoice:42") || !strings.Contains(p.Locks, a.id.String()) || !strings.Contains(p.Locks, b.id.String()) {
		t.Errorf("the page's locks read %q; want invoice:42 held by a with b waiting", p.Locks)
	}
	if !p.FitsWidth {
		t.Errorf("the page is wider than a phone's viewport (412 px): it scrolls sideways")
	}
	s.Screenshot(t, "before-phone.png")

	endSections()

	// The master crashes: its store is closed, so it never renews nor
	// releases, and the role key runs out on the server's clock.
	a.crash(t)
	crashed := time.Now()
	// The store names b before b's elector has taken the tenure, and the
	// callback that records the election runs after that: the page shows
	// each as it comes.
	waitFor(t, "the page shows b as master, itself as master with its election, and a gone", func() bool {
		s.Navigate(t, url)
		p := s.ReadPage(t)
		return p.Master == b.id.String() && p.Role == "master" && strings.Contains(p.Transitions, "elected") &&
			slices.Equal(p.Members, []string{b.id.String()})
	})
	t.Logf("the page showed b as master and a gone %v after the crash (role TTL %v)", time.Since(crashed).Round(time.Millisecond), fastRole.HeartbeatExpiration)
	s.Screenshot(t, "after-phone.png")
	s.Resize(t, 1280, 900)
	s.Navigate(t, url)
	s.Screenshot(t, "after-desktop.png")
}
