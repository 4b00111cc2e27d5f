//go:build unix

// Package browsertest loads baton's status page in headless Chromium for
// tests: Debian's chromium and chromium-driver (which `make deps`
// installs), driven through chromedriver's WebDriver protocol over HTTP,
// with no client library.
//
//	d := browsertest.Start(t)           // chromedriver, killed when t ends
//	s := d.NewSession(t, 412, 915)      // a phone's viewport
//	s.Navigate(t, url+"/baton/")
//	p := s.ReadPage(t)                  // master, role, members as rendered
//	s.Screenshot(t, "phone.png")        // in t.ArtifactDir()
//
// A missing browser or driver fails the test, naming `make deps`; it is
// never a skip. Every call waits at most Patience; a test that waits for
// the page to change polls ReadPage under a deadline of its own.
package browsertest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/baton-go/baton/testkit/testenv"
)

// Patience bounds chromedriver's start and each WebDriver command;
// reaching it means the browser is stuck, not that the machine is slow.
const Patience = 30 * time.Second

// Driver is a running chromedriver and the chromium binary its sessions
// start.
type Driver struct {
	base     string // http://127.0.0.1:port
	chromium string
}

// lookPath finds the first of names that testenv.LookPath finds.
func lookPath(names ...string) (string, error) {
	var first error
	for _, name := range names {
		p, err := testenv.LookPath(name)
		if err == nil {
			return p, nil
		}
		if first == nil {
			first = err
		}
	}
	return "", fmt.Errorf("%w (Debian's chromium and chromium-driver)", first)
}

// Start starts chromedriver on a free loopback port, in a process group
// of its own that t.Cleanup kills with the browsers it started.
func Start(t testing.TB) *Driver {
	t.Helper()
	chromium, err := lookPath("chromium", "chromium-browser")
	if err != nil {
		t.Fatal(err)
	}
	driver, err := lookPath("chromedriver")
	if err != nil {
		t.Fatal(err)
	}
	d := &Driver{chromium: chromium}
	// A port taken between freePort and chromedriver's bind is retried.
	for try := 1; ; try++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		cmd := testenv.Command(driver, "--port="+strconv.Itoa(port), "--allowed-ips=127.0.0.1")
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting %s: %v", driver, err)
		}
		exited := make(chan struct{})
		go func() {
			cmd.Wait()
			close(exited)
		}()
		kill := func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		d.base = "http://127.0.0.1:" + strconv.Itoa(port)
		err = d.waitReady(exited)
		if err == nil {
			t.Cleanup(kill)
			return d
		}
		kill()
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
func (d *Driver) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(Patience)
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
		if err := d.call(http.MethodGet, "/status", nil, &st); err == nil && st.Value.Ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chromedriver at %s not ready after %v", d.base, Patience)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// call sends a WebDriver command and decodes the reply into out (the
// whole reply object). A WebDriver error comes back as an error.
func (d *Driver) call(method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, d.base+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	client := http.Client{Timeout: Patience}
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

// Session is one headless browser window.
type Session struct {
	d  *Driver
	id string
}

// NewSession opens a headless browser whose pages are laid out in a
// viewport of width x height CSS pixels (see Resize); t.Cleanup closes
// it.
func (d *Driver) NewSession(t testing.TB, width, height int) *Session {
	t.Helper()
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome",
		"goog:chromeOptions": map[string]any{
			"binary": d.chromium,
			"args": []string{"--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
				"--hide-scrollbars", "--window-size=1280,900"},
		},
	}}}
	var reply struct {
		Value struct {
			SessionID string `json:"sessionId"`
		} `json:"value"`
	}
	if err := d.call(http.MethodPost, "/session", caps, &reply); err != nil {
		t.Fatalf("starting %s through chromedriver: %v", d.chromium, err)
	}
	s := &Session{d: d, id: reply.Value.SessionID}
	t.Cleanup(func() { d.call(http.MethodDelete, "/session/"+s.id, nil, nil) })
	s.Resize(t, width, height)
	return s
}

func (s *Session) do(t testing.TB, method, path string, in, out any) {
	t.Helper()
	if err := s.d.call(method, "/session/"+s.id+path, in, out); err != nil {
		t.Fatal(err)
	}
}

// Navigate loads url and returns once the page has loaded, as WebDriver
// does.
func (s *Session) Navigate(t testing.TB, url string) {
	t.Helper()
	s.do(t, http.MethodPost, "/url", map[string]string{"url": url}, nil)
}

// Resize lays pages out in a viewport of width x height CSS pixels, one
// device pixel each. It emulates the screen rather than resizing the
// window, since Chromium keeps a window at least 500 pixels wide: a
// phone's 412 would silently become 500.
func (s *Session) Resize(t testing.TB, width, height int) {
	t.Helper()
	s.cdp(t, "Emulation.setDeviceMetricsOverride", map[string]any{
		"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false,
	}, nil)
}

// cdp runs a Chrome DevTools Protocol command through chromedriver and
// decodes its result into out, if not nil.
func (s *Session) cdp(t testing.TB, cmd string, params map[string]any, out any) {
	t.Helper()
	var reply struct {
		Value json.RawMessage `json:"value"`
	}
	s.do(t, http.MethodPost, "/goog/cdp/execute", map[string]any{"cmd": cmd, "params": params}, &reply)
	if out != nil {
		if err := json.Unmarshal(reply.Value, out); err != nil {
			t.Fatalf("the result of %s, %s: %v", cmd, reply.Value, err)
		}
	}
}

// Script runs JavaScript in the page and decodes what it returns into
// out (a pointer, as for json.Unmarshal).
func (s *Session) Script(t testing.TB, js string, out any) {
	t.Helper()
	var reply struct {
		Value json.RawMessage `json:"value"`
	}
	s.do(t, http.MethodPost, "/execute/sync", map[string]any{"script": js, "args": []any{}}, &reply)
	if err := json.Unmarshal(reply.Value, out); err != nil {
		t.Fatalf("the script's result %s: %v", reply.Value, err)
	}
}

// Page is what the status page in the window shows, as rendered text.
type Page struct {
	Master      string   // #master-id: the master's instance ID, or the sentence saying there is none
	Role        string   // #self-role: this instance's role, master or slave
	Members     []string // .member-id: the members' instance IDs, in the page's order
	Locks       string   // #locks: the locks section
	Transitions string   // #transitions: the recent transitions section
	// FitsWidth is false if the page is wider than the window, so that a
	// reader would scroll sideways.
	FitsWidth bool
}

// readPage is the script ReadPage runs: one round trip reads it all.
const readPage = `
const text = sel => { const e = document.querySelector(sel); return e ? e.innerText.trim() : ""; };
return {
	master: text("#master-id"),
	role: text("#self-role"),
	members: Array.from(document.querySelectorAll(".member-id"), e => e.innerText.trim()),
	locks: text("#locks"),
	transitions: text("#transitions"),
	fits: document.documentElement.scrollWidth <= window.innerWidth,
};`

// ReadPage returns what the status page loaded in the window shows.
func (s *Session) ReadPage(t testing.TB) Page {
	t.Helper()
	var r struct {
		Master      string   `json:"master"`
		Role        string   `json:"role"`
		Members     []string `json:"members"`
		Locks       string   `json:"locks"`
		Transitions string   `json:"transitions"`
		Fits        bool     `json:"fits"`
	}
	s.Script(t, readPage, &r)
	return Page{Master: r.Master, Role: r.Role, Members: r.Members, Locks: r.Locks, Transitions: r.Transitions, FitsWidth: r.Fits}
}

// Screenshot saves a PNG of the whole page, as wide as the viewport and
// as tall as the page, as name in t.ArtifactDir() (kept with go test
// -artifacts) and logs where.
func (s *Session) Screenshot(t testing.TB, name string) {
	t.Helper()
	var shot struct {
		Data string `json:"data"`
	}
	s.cdp(t, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("the screenshot is not a PNG (%v)", err)
	}
	path := filepath.Join(t.ArtifactDir(), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}
