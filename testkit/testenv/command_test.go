//go:build unix

package testenv_test

import (
	"syscall"
	"testing"

	"github.com/baton-go/baton/testkit/testenv"
)

// A program started with Command leads a process group of its own, so
// that a signal to the group reaches what it forks and nothing else.
func TestCommandOwnProcessGroup(t *testing.T) {
	cmd := testenv.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pgid, err := syscall.Getpgid(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	if pgid != cmd.Process.Pid {
		t.Errorf("the command's process group is %d; want its own, %d", pgid, cmd.Process.Pid)
	}
}
