//go:build !linux

package bench

import "errors"

func splitCPUs() (server int, clients []int, ok bool) { return 0, nil, false }

func pinProcess(int, []int) error { return errors.New("bench: pinning to CPUs needs Linux") }
