package testenv

import "syscall"

// sysProcAttr puts the child in its own process group and asks the kernel to
// kill it if the test binary dies without running its cleanups (for example
// when `go test -timeout` aborts it).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
