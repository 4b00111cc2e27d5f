//go:build linux

package bench

import (
	"os"
	"os/exec"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// affinity returns the CPUs thread (or process) pid may run on.
func affinity(t *testing.T, pid int) []int {
	t.Helper()
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		t.Fatalf("CPUs of %d: %v", pid, err)
	}
	var cpus []int
	for c := range 1024 {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
}

// A pinning Run undoes its placement for the unpinned uncontended phase
// and puts it back after: the server on its CPU and this process on the
// others while pinned, both on every CPU while unpinned, pinned again
// for the contended runs, and on every CPU when Run is done.
func TestPlacementUnpinnedAndBack(t *testing.T) {
	all := affinity(t, 0)
	if len(all) < 2 {
		t.Skip("fewer than two CPUs: Run does not pin")
	}
	server := exec.Command("sleep", "60") // stands in for redis-server
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	pid := server.Process.Pid

	var setup Setup
	place, err := pin(pid, &setup)
	if err != nil || place == nil {
		t.Fatalf("pin: %v, %v", place, err)
	}
	t.Cleanup(func() { _ = place.spread() })
	pinned := func(when string) {
		t.Helper()
		if got := affinity(t, pid); !slices.Equal(got, []int{all[len(all)-1]}) {
			t.Errorf("%s: the server on CPUs %v, want %v", when, got, all[len(all)-1:])
		}
		if got := affinity(t, os.Getpid()); !slices.Equal(got, all[:len(all)-1]) {
			t.Errorf("%s: this process on CPUs %v, want %v", when, got, all[:len(all)-1])
		}
	}
	pinned("pinned")
	ran := false
	err = place.unpinned(func() error {
		ran = true
		for _, p := range []int{pid, os.Getpid()} {
			if got := affinity(t, p); !slices.Equal(got, all) {
				t.Errorf("unpinned: process %d on CPUs %v, want %v", p, got, all)
			}
		}
		return nil
	})
	if err != nil || !ran {
		t.Fatalf("unpinned: ran %v, error %v", ran, err)
	}
	pinned("pinned again")
	if err := place.spread(); err != nil {
		t.Fatal(err)
	}
	if got := affinity(t, os.Getpid()); !slices.Equal(got, all) {
		t.Errorf("after Run: this process on CPUs %v, want %v", got, all)
	}
}
