package testenv

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Batonctl builds cmd/batonctl into t's temporary directory with the go
// command on PATH and returns the binary's path, for the examples' tests
// to run the command line an example prints. cmd/batonctl is a module of
// its own, so it is built in its directory, found from this file's.
func Batonctl(t testing.TB) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testenv: cannot tell where the checkout is to build cmd/batonctl")
	}
	bin := filepath.Join(t.TempDir(), "batonctl")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(filepath.Dir(self), "..", "..", "cmd", "batonctl")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/batonctl: %v\n%s", err, out)
	}
	return bin
}

// RunBatonctl runs the batonctl binary bin with args, bounded by a
// minute, and returns its exit code, stdout and stderr.
func RunBatonctl(t testing.TB, bin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := Command(bin, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatalf("batonctl: %v", err)
	}
	timer := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("batonctl: %v", err)
	}
	return code, out.String(), errOut.String()
}
