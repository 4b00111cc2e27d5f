//go:build !unix

package testenv

import (
	"errors"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(int, signal) error {
	return errors.New("testenv: process control needs a unix system")
}

func signalProcess(int, signal) error {
	return errors.New("testenv: process control needs a unix system")
}
