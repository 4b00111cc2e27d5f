//go:build !(linux || freebsd || netbsd || openbsd || dragonfly)

package bench

import "time"

func nanosleep(d time.Duration) { time.Sleep(d) }
