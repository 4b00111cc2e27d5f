//go:build linux || freebsd || netbsd || openbsd || dragonfly

package bench

import (
	"syscall"
	"time"
)

// nanosleep blocks the calling thread for d; the runtime hands the
// thread's P to other goroutines meanwhile.
func nanosleep(d time.Duration) {
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	_ = syscall.Nanosleep(&ts, nil)
}
