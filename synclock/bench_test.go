package synclock_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/baton-go/baton/synclock"
)

// The benchmarks below run on a store that grants at once and allocates
// nothing (grantingStore), so they measure what synclock itself adds to a
// lock cycle: the local queue, the grant and its section context, the
// lease deadline and the release. bench/ measures whole cycles on Redis.

func BenchmarkMutexCycle(b *testing.B) {
	lk := lockerOn(b, 1, &grantingStore{}, synclock.Config{})
	ctx := context.Background()
	m := lk.Mutex("bench")
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Lock(ctx); err != nil {
			b.Fatal(err)
		}
		if err := m.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDoKeyCycle(b *testing.B) {
	lk := lockerOn(b, 1, &grantingStore{}, synclock.Config{})
	ctx := context.Background()
	section := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		if err := lk.DoKey(ctx, "bench", section); err != nil {
			b.Fatal(err)
		}
	}
}

// Goroutines holding different keys of one Locker at once share its
// lease-deadline timer and its queue map.
func BenchmarkMutexCycleParallel(b *testing.B) {
	lk := lockerOn(b, 1, &grantingStore{}, synclock.Config{})
	var n atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		m := lk.Mutex("bench-" + strconv.FormatInt(n.Add(1), 10))
		ctx := context.Background()
		for pb.Next() {
			if err := m.Lock(ctx); err != nil {
				b.Error(err)
				return
			}
			if err := m.Unlock(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
