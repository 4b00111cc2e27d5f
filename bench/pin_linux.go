//go:build linux

package bench

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// splitCPUs divides the CPUs this process may run on: the highest for
// redis-server, the rest for the benchmark's processes. ok is false when
// there are fewer than two.
func splitCPUs() (server int, clients []int, ok bool) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return 0, nil, false
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		return 0, nil, false
	}
	return cpus[len(cpus)-1], cpus[:len(cpus)-1], true
}

// pinProcess restricts every thread of process pid to cpus. Threads
// started later inherit the restriction from the thread that starts
// them. The threads are walked twice, for any started during the first
// walk.
func pinProcess(pid int, cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	for range 2 {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			return fmt.Errorf("bench: pin process %d: %w", pid, err)
		}
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
				return fmt.Errorf("bench: pin thread %d of process %d to CPUs %v: %w", tid, pid, cpus, err)
			}
		}
	}
	return nil
}
