//go:build unix

package statuspage_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBrowser loads the status page in headless Chromium (Debian's
// chromium and chromium-driver, which `make deps` installs) through
// chromedriver's WebDriver protocol: two instances of a service run on a
// real redis-server; the page of the second shows the first as master and
// both as members, with a lock the first holds and the second waits for;
// then the master's store is closed (a crash: it never releases) and the
// page, reloaded, shows the second instance as master and the first gone
// from the members. It checks that the page fits a phone's width and saves
// screenshots before and after in the test's artifact directory (kept
// with go test -artifacts; see testing.T.ArtifactDir).
func TestBrowser(t *testing.T) {
	wd := startChromedriver(t)
	app := newApp()
	a := start(t, nil, app, 8081)
	waitFor(t, "a is master", a.el.IsMaster)
	b := start(t, nil, app, 8082)
	waitFor(t, "b sees a as master", func() bool { return b.el.Master() == a.id.String() })
	waitFor(t, "both members listed", func() bool { ms, _ := b.el.Members(t.Context()); return len(ms) == 2 })

	// a holds a lock that b waits for, so the page has one to show.
	endSections := holdWithWaiter(t, a, b)
	waitFor(t, "b in the lock's line", func() bool {
		s := status(t, b)
		return len(s.Locks) == 1 && len(s.Locks[0].Waiters) == 1
	})

	s := wd.newSession(t, 412, 915) // a phone's viewport
	url := b.srv.URL + "/baton/"
	s.navigate(t, url)
	if got := s.text(t, "#master-id"); got != a.id.String() {
		t.Errorf("the page shows master %q; want %q", got, a.id)
	}
	if got := s.text(t, "#self-role"); got != "slave" {
		t.Errorf("the page shows this instance as %q; want slave", got)
	}
	if got, want := s.texts(t, ".member-id"), []string{a.id.String(), b.id.String()}; !slices.Equal(sorted(got), want) {
		t.Errorf("the page shows members %q; want %q", got, want)
	}
	if got := s.text(t, "#locks"); !strings.Contains(got, "invoice:42") || !strings.Contains(got, a.id.String()) || !strings.Contains(got, b.id.String()) {
		t.Errorf("the page's locks read %q; want invoice:42 held by a with b waiting", got)
	}
	if fits := s.script(t, "return document.documentElement.scrollWidth <= window.innerWidth"); fits != true {
		t.Errorf("the page is wider than a phone's viewport (412 px): it scrolls sideways")
	}
	s.screenshot(t, "before-phone.png")

	endSections()

	// The master crashes: its store is closed, so it never renews nor
	// releases, and the role key runs out on the server's clock.
	if err := a.store.Close(); err != nil {
		t.Fatal(err)
	}
	// The store names b before b's elector has taken the tenure, and the
	// callback that records the election runs after that: the page shows
	// each as it comes.
	waitFor(t, "the page shows b as master, itself as master with its election, and a gone", func() bool {
		s.navigate(t, url)
		return s.text(t, "#master-id") == b.id.String() && s.text(t, "#self-role") == "master" &&
			strings.Contains(s.text(t, "#transitions"), "elected") &&
			slices.Equal(s.texts(t, ".member-id"), []string{b.id.String()})
	})
	s.screenshot(t, "after-phone.png")
	s.resize(t, 1280, 900)
	s.navigate(t, url)
	s.screenshot(t, "after-desktop.png")
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// chromedriver is a running chromedriver and the chromium it drives.
type chromedriver struct {
	base     string // http://127.0.0.1:port
	chromium string // the browser binary
}

// browserBinary finds one of names on PATH or in /usr/bin, or says to
// run make deps.
func browserBinary(names ...string) (string, error) {
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		if p := filepath.Join("/usr/bin", name); isExecutable(p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found: run `make deps`, which installs Debian's chromium and chromium-driver", strings.Join(names, " or "))
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// startChromedriver starts chromedriver on a free loopback port, in a
// process group of its own that t.Cleanup kills (the browser with it).
func startChromedriver(t *testing.T) *chromedriver {
	t.Helper()
	chromium, err := browserBinary("chromium", "chromium-browser")
	if err != nil {
		t.Fatal(err)
	}
	driver, err := browserBinary("chromedriver")
	if err != nil {
		t.Fatal(err)
	}
	wd := &chromedriver{chromium: chromium}
	// A port taken between freePort and chromedriver's bind is retried.
	for try := 1; ; try++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		cmd := exec.Command(driver, "--port="+strconv.Itoa(port), "--allowed-ips=127.0.0.1")
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", driver, err)
		}
		exited := make(chan struct{})
		go func() {
			cmd.Wait()
			close(exited)
		}()
		t.Cleanup(func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		})
		wd.base = "http://127.0.0.1:" + strconv.Itoa(port)
		err = wd.waitReady(exited)
		if err == nil {
			return wd
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if try == 3 {
			t.Fatalf("chromedriver did not start: %v; its output: %s", err, out.String())
		}
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady waits until chromedriver answers /status ready.
func (wd *chromedriver) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(patience)
	for {
		select {
		case <-exited:
			return fmt.Errorf("chromedriver exited")
		default:
		}
		var st struct {
			Value struct {
				Ready bool `json:"ready"`
			} `json:"value"`
		}
		if err := wd.call(http.MethodGet, "/status", nil, &st); err == nil && st.Value.Ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chromedriver at %s not ready after %v", wd.base, patience)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// call sends a WebDriver command and decodes the reply into out (the
// whole reply object). A WebDriver error comes back as an error.
func (wd *chromedriver) call(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, wd.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	client := http.Client{Timeout: patience}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		var e struct {
			Value struct {
				Error   string `json:"error"`
				Message string `json:"message"`
			} `json:"value"`
		}
		json.Unmarshal(raw, &e)
		return fmt.Errorf("webdriver %s %s: %d %s: %s", method, path, res.StatusCode, e.Value.Error, e.Value.Message)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// session is one browser session.
type session struct {
	wd *chromedriver
	id string
}

// newSession opens a headless browser with a window of width x height
// CSS pixels; t.Cleanup closes it.
func (wd *chromedriver) newSession(t *testing.T, width, height int) *session {
	t.Helper()
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome",
		"goog:chromeOptions": map[string]any{
			"binary": wd.chromium,
			"args": []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
				"--hide-scrollbars", "--window-size=" + strconv.Itoa(width) + "," + strconv.Itoa(height)},
		},
	}}}
	var reply struct {
		Value struct {
			SessionID string `json:"sessionId"`
		} `json:"value"`
	}
	if err := wd.call(http.MethodPost, "/session", caps, &reply); err != nil {
		t.Fatalf("starting %s through chromedriver: %v", wd.chromium, err)
	}
	s := &session{wd: wd, id: reply.Value.SessionID}
	t.Cleanup(func() { wd.call(http.MethodDelete, "/session/"+s.id, nil, nil) })
	return s
}

func (s *session) do(t *testing.T, method, path string, in, out any) {
	t.Helper()
	if err := s.wd.call(method, "/session/"+s.id+path, in, out); err != nil {
		t.Fatal(err)
	}
}

// navigate loads url and waits for it, as WebDriver does.
func (s *session) navigate(t *testing.T, url string) {
	t.Helper()
	s.do(t, http.MethodPost, "/url", map[string]string{"url": url}, nil)
}

// resize sets the window's size.
func (s *session) resize(t *testing.T, width, height int) {
	t.Helper()
	s.do(t, http.MethodPost, "/window/rect", map[string]int{"width": width, "height": height}, nil)
}

// elementKey is the WebDriver name of an element reference.
const elementKey = "element-6066-11e4-a52e-4f735466cecf"

// texts returns the rendered text of every element matching the CSS
// selector, in document order.
func (s *session) texts(t *testing.T, selector string) []string {
	t.Helper()
	var reply struct {
		Value []map[string]string `json:"value"`
	}
	s.do(t, http.MethodPost, "/elements", map[string]string{"using": "css selector", "value": selector}, &reply)
	var out []string
	for _, el := range reply.Value {
		var text struct {
			Value string `json:"value"`
		}
		s.do(t, http.MethodGet, "/element/"+el[elementKey]+"/text", nil, &text)
		out = append(out, text.Value)
	}
	return out
}

// text returns the rendered text of the one element matching selector.
func (s *session) text(t *testing.T, selector string) string {
	t.Helper()
	got := s.texts(t, selector)
	if len(got) != 1 {
		t.Fatalf("the page has %d elements matching %q; want one", len(got), selector)
	}
	return got[0]
}

// script runs JavaScript in the page and returns its result.
func (s *session) script(t *testing.T, js string) any {
	t.Helper()
	var reply struct {
		Value any `json:"value"`
	}
	s.do(t, http.MethodPost, "/execute/sync", map[string]any{"script": js, "args": []any{}}, &reply)
	return reply.Value
}

// screenshot saves a PNG of the whole page, as name in the test's
// artifact directory, and logs where. It makes the window as tall as the
// page for the shot (WebDriver shoots the viewport only), then restores
// it.
func (s *session) screenshot(t *testing.T, name string) {
	t.Helper()
	var rect struct {
		Value struct {
			Width  float64 `json:"width"`
			Height float64 `json:"height"`
		} `json:"value"`
	}
	s.do(t, http.MethodGet, "/window/rect", nil, &rect)
	tall, _ := s.script(t, "return document.documentElement.scrollHeight + window.outerHeight - window.innerHeight").(float64)
	if tall > rect.Value.Height {
		s.resize(t, int(rect.Value.Width), int(tall))
		defer s.resize(t, int(rect.Value.Width), int(rect.Value.Height))
	}
	var reply struct {
		Value string `json:"value"`
	}
	s.do(t, http.MethodGet, "/screenshot", nil, &reply)
	png, err := base64.StdEncoding.DecodeString(reply.Value)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("the screenshot is not a PNG (%v)", err)
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
