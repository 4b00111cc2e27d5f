package testenv_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine or a child process outlives the
// tests: every server must have been cleaned up.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if kids := childProcesses(); len(kids) > 0 {
			fmt.Fprintf(os.Stderr, "testenv: child processes left running: %s\n", strings.Join(kids, "; "))
			if code == 0 {
				code = 1
			}
		}
		os.Exit(code)
	}))
}

// childProcesses lists the processes whose parent is this test binary, as
// "pid command". It knows only Linux's /proc and returns nil elsewhere.
func childProcesses() []string {
	if runtime.GOOS != "linux" {
		return nil
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	self := os.Getpid()
	var kids []string
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may contain spaces.
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil && ppid == self {
			kids = append(kids, s[:end+1])
		}
	}
	return kids
}
