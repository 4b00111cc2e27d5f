package testenv

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Batonctl builds cmd/batonctl into t's temporary directory with the go
// command on PATH and returns the binary's path, for the examples' tests
// to run the command line an example prints.
func Batonctl(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "batonctl")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/baton-go/baton/cmd/batonctl").CombinedOutput()
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
