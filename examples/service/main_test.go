package main

import (
	"bufio"
	"context"
	"io"
	"log"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-go/baton/internal/ctlline"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/synclock"
	"github.com/baton-go/baton/testkit/testenv"
)

// runMainEnv makes the test binary run main instead of the tests, so that
// a test can run the service as a process and signal it.
const runMainEnv = "SERVICE_TEST_RUN_MAIN" // not BATON_: Env reports unknown BATON_ variables

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Args = append([]string{"service"}, strings.Fields(os.Getenv(runMainEnv+"_ARGS"))...)
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// setEnv clears every BATON_ variable for the test and sets vars; the
// instance advertises 127.0.0.1, so the test needs no network interface.
func setEnv(t *testing.T, vars ...string) {
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "BATON_") {
			t.Setenv(name, "")
			os.Unsetenv(name)
		}
	}
	t.Setenv("BATON_INSTANCE_IP", "127.0.0.1")
	for i := 0; i+1 < len(vars); i += 2 {
		t.Setenv(vars[i], vars[i+1])
	}
}

// lines passes every line written to it to a channel.
type lines struct {
	w  *io.PipeWriter
	ch chan string
}

func newLines(t *testing.T) *lines {
	r, w := io.Pipe()
	l := &lines{w: w, ch: make(chan string, 1024)}
	go func() {
		defer close(l.ch)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			l.ch <- sc.Text()
		}
	}()
	t.Cleanup(func() { w.Close() })
	return l
}

// waitFor reads lines until each of want has appeared in one, and returns
// what it read.
func waitFor(t *testing.T, ch <-chan string, within time.Duration, want ...string) []string {
	t.Helper()
	missing := map[string]bool{}
	for _, w := range want {
		missing[w] = true
	}
	var seen []string
	deadline := time.After(within)
	for len(missing) > 0 {
		select {
		case line, ok := <-ch:
			if !ok {
				t.Fatalf("output ended before %v appeared; output:\n%s", keys(missing), strings.Join(seen, "\n"))
			}
			seen = append(seen, line)
			for w := range missing {
				if strings.Contains(line, w) {
					delete(missing, w)
				}
			}
		case <-deadline:
			t.Fatalf("%v did not appear within %v; output:\n%s", keys(missing), within, strings.Join(seen, "\n"))
		}
	}
	return seen
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The service runs on the embedded Redis with no setup: the critical
// section runs, the single instance becomes master, so the master-only
// job runs and the slave-only job is skipped, and the locked job runs
// and is skipped on the fires its lockAtLeastFor covers. It returns
// cleanly when its context ends, after giving up the role.
func TestServiceRuns(t *testing.T) {
	setEnv(t)
	t.Cleanup(func() { role.SetDefault(nil); synclock.SetDefault(nil) })
	out := newLines(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, "", "", log.New(out.w, "", 0)) }()

	waitFor(t, out.ch, time.Minute,
		"section close-invoices ran under the lock (token ",
		"127.0.0.1:default:billing:8080 is master (epoch ",
		"job send-report ran on the master (epoch ",
		"job warm-cache skipped: not-slave",
		"job export ran under the job lock (token ",
		"job export skipped: locked")
	cancel()
	waitFor(t, out.ch, time.Minute, "stopping", "127.0.0.1:default:billing:8080 is no longer master")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("run did not return within a minute of its context's end")
	}
}

// The service runs on a real Redis with -redis; a configuration file
// and BATON_ variables reach it. The short role TTL and lock hold keep the restart guard of
// the fresh test server short.
func TestServiceOnRealRedis(t *testing.T) {
	r := testenv.NewRedis(t)
	file := t.TempDir() + "/baton.yaml"
	yml := "instance:\n  tenant: acme\nsynchronized-lock:\n  hold-duration-in-seconds: 2\n  claim-window-in-milliseconds: 1000\n"
	if err := os.WriteFile(file, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	setEnv(t, "BATON_INSTANCE_PORT", "9090", "BATON_REDIS_KEY_PREFIX", "service",
		"BATON_SCHEDULER_LOCK_HEARTBEAT_EXPIRATION_DURATION_IN_SECONDS", "2",
		"BATON_SCHEDULER_LOCK_TOUCH_HEARTBEAT_INTERVAL_IN_MILLISECONDS", "500")
	t.Cleanup(func() { role.SetDefault(nil); synclock.SetDefault(nil) })
	out := newLines(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, file, r.Addr(), log.New(out.w, "", 0)) }()

	seen := waitFor(t, out.ch, time.Minute,
		"section close-invoices ran under the lock",
		"127.0.0.1:acme:billing:9090 is master",
		"job send-report ran on the master",
		"inspect it from the repository: go run ./cmd/batonctl --redis "+r.Addr()+" --prefix service --tenant acme --app billing status")
	n, err := r.Client(t).Exists(ctx, "service:{acme:billing}:role").Result()
	if err != nil || n != 1 {
		t.Errorf("role key under the configured prefix: exists %d, %v", n, err)
	}
	// The batonctl line it printed reaches that key and names the master.
	args, err := ctlline.Args(strings.Join(seen, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := testenv.RunBatonctl(t, testenv.Batonctl(t), args...)
	if code != 0 || !strings.Contains(stdout, "master   127.0.0.1:acme:billing:9090 (epoch ") {
		t.Errorf("batonctl %s: exit %d, stdout:\n%s\nstderr:\n%s\nwant the master 127.0.0.1:acme:billing:9090", strings.Join(args, " "), code, stdout, stderr)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// The service as a process: it stops on SIGTERM, gives up the role
// and exits 0.
func TestServiceStopsOnSIGTERM(t *testing.T) {
	setEnv(t)
	t.Setenv(runMainEnv, "1")
	cmd := exec.Command(os.Args[0])
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			cmd.Process.Kill()
			cmd.Wait() // stderr is complete once Wait returns
			t.Logf("stderr of the service:\n%s", stderr.String())
		}
	})
	out := make(chan string, 1024)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			out <- sc.Text()
		}
	}()
	waitFor(t, out, time.Minute, "started; stop with Ctrl-C or SIGTERM", "job send-report ran on the master")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, time.Minute, "stopping", "is no longer master")
	for range out { // drain until the process closes its output
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("service after SIGTERM: %v; stderr:\n%s", err, stderr.String())
	}
}
