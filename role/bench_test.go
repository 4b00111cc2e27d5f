package role

import (
	"context"
	"testing"
	"time"
)

var sinkBool bool
var sinkDur time.Duration

// BenchmarkMonotonicClock is the floor IsMaster is measured against: one
// read of the monotonic clock.
func BenchmarkMonotonicClock(b *testing.B) {
	base := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		sinkDur = time.Since(base)
	}
}

// electedMaster returns a started elector that is master, stopped when
// the benchmark ends.
func electedMaster(b *testing.B) *Elector {
	el, err := NewElector(newStoreB(b), mustID(b, 1), fast, quiet)
	if err != nil {
		b.Fatal(err)
	}
	if err := el.Launch(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		el.Halt(ctx)
	})
	eventually(b, "elected", el.IsMaster)
	return el
}

// BenchmarkIsMaster measures IsMaster on a master. Goal: at most 1.2x
// BenchmarkMonotonicClock in the same run, 0 allocs.
func BenchmarkIsMaster(b *testing.B) {
	el := electedMaster(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		sinkBool = el.IsMaster()
	}
	if !sinkBool {
		b.Fatal("lost mastership during the benchmark")
	}
}

// BenchmarkIsMasterParallel measures IsMaster read from every core at once.
func BenchmarkIsMasterParallel(b *testing.B) {
	el := electedMaster(b)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var v bool
		for pb.Next() {
			v = el.IsMaster()
		}
		_ = v
	})
}
