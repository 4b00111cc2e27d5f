//go:build unix

package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-go/baton/testkit/browsertest"
	"github.com/baton-go/baton/testkit/testenv"
)

// failover bounds the wait for the page to show the new master after the
// old one was killed: the demo's role TTL is 3 s, and the machine may be
// busy.
const failover = time.Minute

// TestBrowserDemo runs the demo as a user does: it builds examples/http,
// starts it twice (two processes, one instance each) on one real
// redis-server, and loads the second's status page in headless Chromium
// (package browsertest). The page names the first as master, itself as a
// slave and both as members, and fits a phone's width. Then the master's
// process is killed with SIGKILL, and the page, reloaded until it does,
// shows the second as master and the first gone from the members, within
// a minute (the demo's role TTL is 3 s). Screenshots before and after, on
// a phone's viewport and a desktop's, are saved in the test's artifact
// directory (kept with go test -artifacts; see testing.T.ArtifactDir).
func TestBrowserDemo(t *testing.T) {
	bin := buildDemo(t)
	r := testenv.NewRedis(t)
	d := browsertest.Start(t)

	a := startDemo(t, bin, r.Addr())
	waitStatus(t, a, "a is master", func(s demoStatus) bool { return s.Master.ID == a.id })
	b := startDemo(t, bin, r.Addr())
	waitStatus(t, b, "b sees a as master and both as members", func(s demoStatus) bool {
		return s.Master.ID == a.id && len(s.Members) == 2
	})

	s := d.NewSession(t, 412, 915) // a phone's viewport
	page := b.url + "/baton/"
	s.Navigate(t, page)
	p := s.ReadPage(t)
	if p.Master != a.id {
		t.Errorf("b's page shows master %q; want a, %q", p.Master, a.id)
	}
	if p.Role != "slave" {
		t.Errorf("b's page shows b as %q; want slave", p.Role)
	}
	if got, want := slices.Sorted(slices.Values(p.Members)), slices.Sorted(slices.Values([]string{a.id, b.id})); !slices.Equal(got, want) {
		t.Errorf("b's page shows members %q; want %q", got, want)
	}
	if !p.FitsWidth {
		t.Errorf("the page is wider than a phone's viewport (412 px): it scrolls sideways")
	}
	s.Screenshot(t, "before-phone.png")

	// The master's process dies at once: it neither releases the role nor
	// leaves the members, so both run out on the server's clock.
	a.kill(t)
	killed := time.Now()
	deadline := killed.Add(failover)
	for {
		s.Navigate(t, page)
		p = s.ReadPage(t)
		if p.Master == b.id && p.Role == "master" && slices.Equal(p.Members, []string{b.id}) {
			t.Logf("b's page showed b as master and a gone %v after the kill", time.Since(killed).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v after a was killed, b's page shows master %q, b as %q, members %q; want b, master, only b",
				failover, p.Master, p.Role, p.Members)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !p.FitsWidth {
		t.Errorf("the page after the failover is wider than a phone's viewport (412 px)")
	}
	s.Screenshot(t, "after-phone.png")
	s.Resize(t, 1280, 900)
	s.Navigate(t, page)
	s.Screenshot(t, "after-desktop.png")

	// The survivor stops cleanly on SIGTERM, as on Ctrl-C.
	if err := b.stop(); err != nil {
		t.Errorf("b after SIGTERM: %v; its output:\n%s", err, b.out.String())
	}
}

// buildDemo builds examples/http into a temporary directory.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "http")
	began := time.Now()
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("built the demo in %v", time.Since(began).Round(time.Millisecond))
	return bin
}

// demo is one process of the demo, serving one instance.
type demo struct {
	id, url string // the instance's ID and base URL, as it printed them
	cmd     *exec.Cmd
	out     *output
	exited  chan struct{} // closed once the process has been reaped
	err     error         // how it ended; read after exited is closed
}

// startDemo starts bin on the Redis at addr with one instance on a free
// port, and returns once it has printed its ID and URL. t.Cleanup stops
// it if the test did not.
func startDemo(t *testing.T, bin, addr string) *demo {
	t.Helper()
	d := &demo{out: &output{urls: make(chan []string, 1)}, exited: make(chan struct{})}
	d.cmd = testenv.Command(bin, "-redis", addr, "-ports", "0")
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		if err := d.stop(); err != nil {
			t.Errorf("stopping the demo: %v", err)
		}
		if t.Failed() {
			t.Logf("the demo (pid %d) printed:\n%s", d.cmd.Process.Pid, d.out.String())
		}
	})
	select {
	case m := <-d.out.urls:
		d.id, d.url = m[1], m[2]
	case <-d.exited:
		t.Fatalf("the demo exited before printing its URL: %v; its output:\n%s", d.err, d.out.String())
	case <-time.After(browsertest.Patience):
		t.Fatalf("the demo printed no URL within %v; its output:\n%s", browsertest.Patience, d.out.String())
	}
	return d
}

// kill sends SIGKILL to the process and waits until it is reaped.
func (d *demo) kill(t *testing.T) {
	t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-d.exited
}

// stop sends SIGTERM, as Ctrl-C would, and waits for the process to end
// (killing it after browsertest.Patience). It returns how the process
// ended, or nil if it had ended already.
func (d *demo) stop() error {
	select {
	case <-d.exited:
		return nil
	default:
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.exited:
		return d.err
	case <-time.After(browsertest.Patience):
		d.cmd.Process.Signal(syscall.SIGKILL)
		<-d.exited
		return d.err
	}
}

// demoStatus is the part of /baton/status the test reads.
type demoStatus struct {
	Master struct {
		ID string `json:"id"`
	} `json:"master"`
	Members []struct {
		ID string `json:"id"`
	} `json:"members"`
}

// waitStatus polls d's /baton/status until cond holds, and fails t after
// a minute.
func waitStatus(t *testing.T, d *demo, what string, cond func(demoStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var s demoStatus
		_, body := get(t, "GET", d.url+"/baton/status")
		if json.Unmarshal([]byte(body), &s) == nil && cond(s) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after a minute waiting for: %s; last status: %s", what, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// printedURL matches the line the demo prints for each instance:
// "instance <id>: <url>/  status page <url>/baton/ ...".
var printedURL = regexp.MustCompile(`^instance (\S+): (http://\S+)/ `)

// output keeps what a demo process prints and sends the first instance
// line's ID and URL on urls.
type output struct {
	urls chan []string

	mu      sync.Mutex
	buf     strings.Builder
	partial string // the last line, until its newline
	found   bool
}

// Write implements io.Writer.
func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(p)
	lines := strings.Split(o.partial+string(p), "\n")
	o.partial = lines[len(lines)-1]
	for _, line := range lines[:len(lines)-1] {
		if m := printedURL.FindStringSubmatch(line); m != nil && !o.found {
			o.found = true
			o.urls <- m
		}
	}
	return len(p), nil
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
