//go:build unix

package browsertest_test

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"go.uber.org/goleak"

	"github.com/baton-go/baton/testkit/browsertest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// page serves a page shaped like the status page's, with a block of
// width px and height px inside.
func page(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!doctype html><meta name="viewport" content="width=device-width, initial-scale=1">
<body style="margin:0"><code id="master-id">m:1</code> <span id="self-role">slave</span>
<code class="member-id">m:2</code> <code class="member-id">m:1</code>
<section id="locks">No locks</section><section id="transitions">elected</section>
<div style="width:%spx;height:%spx;background:#ccc"></div>`, r.FormValue("w"), r.FormValue("h"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// pngSize reads the width and height from a PNG's header.
func pngSize(t *testing.T, path string) (int, int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 24 {
		t.Fatalf("%s is too short for a PNG", path)
	}
	return int(binary.BigEndian.Uint32(b[16:20])), int(binary.BigEndian.Uint32(b[20:24]))
}

// A phone's viewport is 412 CSS pixels wide, not Chromium's smallest
// window (500): ReadPage reads the rendered fields, FitsWidth tells a
// page that fits from one that scrolls sideways, and the screenshot is
// as wide as the viewport and as tall as the page. Resized to a
// desktop's width, the wide page fits.
func TestPhoneViewport(t *testing.T) {
	srv := page(t)
	d := browsertest.Start(t)
	s := d.NewSession(t, 412, 915)

	s.Navigate(t, srv.URL+"/?w=400&h=2000")
	var inner float64
	s.Script(t, "return window.innerWidth", &inner)
	if inner != 412 {
		t.Errorf("window.innerWidth = %v; want 412", inner)
	}
	p := s.ReadPage(t)
	want := browsertest.Page{Master: "m:1", Role: "slave", Members: []string{"m:2", "m:1"}, Locks: "No locks", Transitions: "elected", FitsWidth: true}
	if p.Master != want.Master || p.Role != want.Role || !slices.Equal(p.Members, want.Members) ||
		p.Locks != want.Locks || p.Transitions != want.Transitions || p.FitsWidth != want.FitsWidth {
		t.Errorf("ReadPage = %+v; want %+v", p, want)
	}
	s.Screenshot(t, "tall.png")
	if w, h := pngSize(t, filepath.Join(t.ArtifactDir(), "tall.png")); w != 412 || h < 2000 {
		t.Errorf("the screenshot is %d x %d; want 412 wide and at least 2000 tall", w, h)
	}

	s.Navigate(t, srv.URL+"/?w=600&h=10")
	if s.ReadPage(t).FitsWidth {
		t.Errorf("a page with a 600 px block fits a 412 px viewport, says FitsWidth")
	}
	s.Resize(t, 1280, 900)
	s.Navigate(t, srv.URL+"/?w=600&h=10")
	if !s.ReadPage(t).FitsWidth {
		t.Errorf("a page with a 600 px block does not fit a 1280 px viewport, says FitsWidth")
	}
	s.Screenshot(t, "desktop.png")
	if w, _ := pngSize(t, filepath.Join(t.ArtifactDir(), "desktop.png")); w != 1280 {
		t.Errorf("the desktop screenshot is %d wide; want 1280", w)
	}
}
