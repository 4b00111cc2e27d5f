package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-go/baton/internal/ctlline"
	"github.com/baton-go/baton/testkit/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// get returns the status and body of a request to url.
func get(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// Two instances on the embedded Redis and on a real redis-server: one is
// master and says so, /report runs there and is refused on the slave with
// the master's name, a lock section runs under a token, and each
// instance's health, status JSON and metrics agree on who is master.
func TestService(t *testing.T) {
	ctl := testenv.Batonctl(t)
	for name, addr := range map[string]func(t *testing.T) string{
		"Embedded": func(*testing.T) string { return "" },
		"Redis":    func(t *testing.T) string { return testenv.NewRedis(t).Addr() },
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			ready := make(chan []string, 1)
			done := make(chan error, 1)
			var out strings.Builder
			go func() { done <- run(ctx, addr(t), []int{0, 0}, &out, ready) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("run: %v", err)
				}
			}()
			var urls []string
			select {
			case urls = <-ready:
			case err := <-done:
				t.Fatalf("run ended early: %v", err)
			case <-time.After(time.Minute):
				t.Fatal("the instances did not start within a minute")
			}

			// Wait for a master that the other instance has seen too.
			master, slave := -1, -1
			deadline := time.Now().Add(time.Minute)
			for master < 0 || slave < 0 {
				if time.Now().After(deadline) {
					t.Fatalf("no master seen by both instances within a minute")
				}
				master, slave = -1, -1
				for i, u := range urls {
					_, body := get(t, "GET", u+"/")
					switch {
					case strings.Contains(body, "is master"):
						master = i
					case strings.Contains(body, "the master is 127.0.0.1:"):
						slave = i
					}
				}
				time.Sleep(20 * time.Millisecond)
			}
			_, who := get(t, "GET", urls[master]+"/")
			masterID, _, _ := strings.Cut(who, " is master")

			if code, body := get(t, "POST", urls[master]+"/report"); code != 200 || !strings.Contains(body, "under epoch") {
				t.Errorf("POST /report on the master: %d %q", code, body)
			}
			if code, body := get(t, "POST", urls[slave]+"/report"); code != http.StatusConflict || !strings.Contains(body, masterID) {
				t.Errorf("POST /report on the slave: %d %q; want 409 naming %s", code, body, masterID)
			}
			if code, body := get(t, "POST", urls[slave]+"/invoices/42/close"); code != 200 || !strings.Contains(body, "invoice:42 closed by") || !strings.Contains(body, "token") {
				t.Errorf("POST /invoices/42/close: %d %q", code, body)
			}
			for _, u := range urls {
				if code, body := get(t, "GET", u+"/baton/healthz"); code != 200 {
					t.Errorf("GET %s/baton/healthz: %d %q", u, code, body)
				}
				code, body := get(t, "GET", u+"/baton/status")
				var st struct {
					Master struct {
						ID string `json:"id"`
					} `json:"master"`
				}
				if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 || st.Master.ID != masterID {
					t.Errorf("GET %s/baton/status: %d, master %q (%v); want %s", u, code, st.Master.ID, err, masterID)
				}
				if code, body := get(t, "GET", u+"/baton/"); code != 200 || !strings.Contains(body, masterID) {
					t.Errorf("GET %s/baton/: %d, page without the master %s", u, code, masterID)
				}
			}
			checkBatonctl(t, ctl, out.String(), masterID)
			_, metricsText := get(t, "GET", urls[master]+"/metrics")
			if want := `baton_role_is_master{app="billing",instance_id="` + masterID + `",tenant="acme"} 1`; !strings.Contains(metricsText, want) {
				t.Errorf("GET /metrics lacks %q:\n%s", want, metricsText)
			}
		})
	}
}

// checkBatonctl runs the batonctl command line the example printed, as
// printed and with locks for status: status names the master, locks
// answers. batonctl could not reach the example's keys before it had
// --redis and --prefix, and the example printed no such line.
func checkBatonctl(t *testing.T, ctl, output, masterID string) {
	t.Helper()
	args, err := ctlline.Args(output)
	if err != nil {
		t.Fatalf("%v:\n%s", err, output)
	}
	code, stdout, stderr := testenv.RunBatonctl(t, ctl, args...)
	if code != 0 || !strings.Contains(stdout, "master   "+masterID+" (epoch ") {
		t.Errorf("batonctl %s: exit %d, stdout:\n%s\nstderr:\n%s\nwant the master %s", strings.Join(args, " "), code, stdout, stderr, masterID)
	}
	args[len(args)-1] = "locks"
	if code, stdout, stderr := testenv.RunBatonctl(t, ctl, args...); code != 0 {
		t.Errorf("batonctl %s: exit %d, stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
	}
}
