package testenv

import "os/exec"

// Command returns the command that runs program name with args for a
// test, like the servers testenv starts: in a process group of its own
// (on unix), so that a signal to the group reaches every child it forks,
// and, on Linux, killed by the kernel if the test binary dies without
// running its cleanups (a `go test -timeout` abort). Tests use it for the
// other programs they start: a browser's driver, an example they built.
func Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = sysProcAttr()
	return cmd
}
