//go:build unix

package testenv

import (
	"errors"
	"fmt"
	"syscall"
)

func toSyscall(sig signal) syscall.Signal {
	switch sig {
	case sigTerm:
		return syscall.SIGTERM
	case sigStop:
		return syscall.SIGSTOP
	case sigCont:
		return syscall.SIGCONT
	default:
		return syscall.SIGKILL
	}
}

func signalGroup(pid int, sig signal) error {
	s := toSyscall(sig)
	if err := syscall.Kill(-pid, s); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("testenv: send %v to process group %d: %w", s, pid, err)
	}
	return nil
}

func signalProcess(pid int, sig signal) error {
	s := toSyscall(sig)
	if err := syscall.Kill(pid, s); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("testenv: send %v to process %d: %w", s, pid, err)
	}
	return nil
}
