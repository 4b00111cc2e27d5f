package testenv

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// WaitStopped waits until the process pid can run none of its own code
// until SIGCONT: it is in the stopped state (after SIGSTOP), or in an
// uninterruptible kernel wait such as an fsync, from which it returns
// straight into the pending stop, or it exited. It fails when timeout
// passes first. kill(2) returns before the kernel has stopped the target;
// a test that pauses a process to play a frozen host and then acts on that
// freeze waits here first. Outside Linux, where the state cannot be read
// from /proc, it returns at once.
func WaitStopped(pid int, timeout time.Duration) error {
	if runtime.GOOS != "linux" {
		return nil
	}
	deadline := time.Now().Add(timeout)
	for {
		state, err := procState(pid)
		if err != nil || strings.IndexByte("TtDZX", state) >= 0 {
			return nil // stopped, held in the kernel, or gone: none of its code runs
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testenv: process %d is still in state %q %v after SIGSTOP", pid, state, timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// procState reads the state letter of /proc/<pid>/stat: the field after
// the parenthesised command name, which may itself hold spaces and
// parentheses.
func procState(pid int) (byte, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0, fmt.Errorf("testenv: unexpected /proc/%d/stat: %q", pid, s)
	}
	return s[i+2], nil
}
