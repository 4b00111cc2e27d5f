package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/internal/testenv"
)

// runMainEnv makes the test binary run main instead of the tests, so that
// a test can run the quick start as processes and signal them.
const runMainEnv = "QUICKSTART_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		os.Args = append([]string{"quickstart"}, strings.Fields(os.Getenv(runMainEnv+"_ARGS"))...)
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// instance is one quick start process.
type instance struct {
	t     *testing.T
	cmd   *exec.Cmd
	port  int
	lines chan string // its log (stderr), line by line
	seen  []string
}

// start runs the quick start as a process on the Redis at addr, serving
// on a free port, and returns once it runs.
func start(t *testing.T, addr string) *instance {
	t.Helper()
	in := &instance{t: t, port: freePort(t), lines: make(chan string, 1024)}
	in.cmd = exec.Command(os.Args[0])
	in.cmd.Env = append(os.Environ(), runMainEnv+"=1", runMainEnv+"_ARGS=-port "+strconv.Itoa(in.port),
		"REDIS_ADDR="+addr, "POD_IP=127.0.0.1") // the test needs no network interface
	stderr, err := in.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go scan(stderr, in.lines)
	t.Cleanup(func() {
		if in.cmd.ProcessState == nil {
			in.cmd.Process.Kill()
			for range in.lines {
			}
			in.cmd.Wait()
		}
		if t.Failed() {
			t.Logf("log of the instance on port %d:\n%s", in.port, strings.Join(in.seen, "\n"))
		}
	})
	return in
}

func scan(r io.Reader, out chan<- string) {
	defer close(out)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		out <- sc.Text()
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// id is the instance ID the process computes.
func (in *instance) id() string { return "127.0.0.1:default:billing:" + strconv.Itoa(in.port) }

// waitLog reads the instance's log until each of want has appeared in a
// line read since the last call.
func (in *instance) waitLog(want ...string) {
	in.t.Helper()
	missing := map[string]bool{}
	for _, w := range want {
		missing[w] = true
	}
	deadline := time.After(2 * time.Minute)
	for len(missing) > 0 {
		select {
		case line, ok := <-in.lines:
			if !ok {
				in.t.Fatalf("the instance on port %d ended before %v appeared in its log", in.port, missing)
			}
			in.seen = append(in.seen, line)
			for w := range missing {
				if strings.Contains(line, w) {
					delete(missing, w)
				}
			}
		case <-deadline:
			in.t.Fatalf("%v did not appear in the log of the instance on port %d within 2 minutes", missing, in.port)
		}
	}
}

// waitPage asks the instance's handler until its answer holds want.
func (in *instance) waitPage(want string) {
	in.t.Helper()
	var got string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(in.port) + "/")
		if err != nil {
			got = err.Error()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got = string(body); strings.Contains(got, want) {
			return
		}
	}
	in.t.Fatalf("GET / of the instance on port %d: %q, want %q", in.port, got, want)
}

// stop interrupts the instance (Ctrl-C) and waits for it to exit 0.
func (in *instance) stop() {
	in.t.Helper()
	if err := in.cmd.Process.Signal(syscall.SIGINT); err != nil {
		in.t.Fatal(err)
	}
	for line := range in.lines {
		in.seen = append(in.seen, line)
	}
	if err := in.cmd.Wait(); err != nil {
		in.t.Fatalf("the instance on port %d after Ctrl-C: %v", in.port, err)
	}
}

// The README's first program does what the README says, on a real Redis:
// the first instance is elected and runs the master-only job, the second
// runs the slave-only job, both run the locked section, each handler
// branches on role.IsMaster, and Ctrl-C on the master hands the role to
// the other at once.
func TestQuickstartElectsGatesAndLocks(t *testing.T) {
	r := testenv.NewRedis(t)
	// A fresh server: declare it whole, as batonctl init does, so that
	// the restart guard does not wait out a role TTL.
	store, err := redisbackend.New(r.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := store.DeclareIntact(ctx, backend.AppKey("default", "billing")); err != nil {
		t.Fatal(err)
	}

	a := start(t, r.Addr())
	a.waitLog("report sent (master only)", "invoices closed under the lock")
	a.waitPage(a.id() + " is the master")

	b := start(t, r.Addr())
	b.waitLog("cache warmed (slaves only)", "invoices closed under the lock")
	b.waitPage(b.id() + " is a slave; the master is " + a.id())

	a.stop()
	b.waitPage(b.id() + " is the master")
	b.waitLog("report sent (master only)")
	b.stop()
}

// The README's first program is this file, verbatim, on its first screen,
// and its code after the imports is at most 40 lines.
func TestReadmeQuickStartIsMain(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	main, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	before, code, ok := strings.Cut(string(readme), "```go\n")
	if !ok {
		t.Fatal("README.md has no ```go block")
	}
	if n := strings.Count(before, "\n"); n > 30 {
		t.Errorf("the README's first ```go block starts at line %d; the quick start belongs on its first screen (by line 30)", n+1)
	}
	code, _, ok = strings.Cut(code, "```\n")
	if !ok {
		t.Fatal("the README's first ```go block is not closed")
	}
	if code != string(main) {
		t.Fatalf("the README's first ```go block differs from examples/quickstart/main.go (first difference at line %d); copy the file into the README",
			firstDiff(code, string(main)))
	}
	_, body, ok := strings.Cut(string(main), "\n)\n")
	if !ok {
		t.Fatal("main.go has no import block")
	}
	if n := strings.Count(strings.TrimSpace(body), "\n") + 1; n > 40 {
		t.Errorf("the quick start's code after its imports is %d lines; keep it at most 40", n)
	}
}

func firstDiff(a, b string) int {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return i + 1
		}
	}
	return min(len(al), len(bl)) + 1
}
