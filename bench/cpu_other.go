//go:build !unix

package bench

// processCPU reports 0: the process's CPU time is read on unix systems
// only.
func processCPU() float64 { return 0 }
