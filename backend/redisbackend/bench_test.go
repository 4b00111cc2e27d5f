package redisbackend_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

// BenchmarkUncontendedCycle runs AcquireQueued and Release of one key, as
// synclock does when nobody else wants it, and reports beside ns/op the
// time the server spent in the two scripts (server-µs/op, from INFO
// commandstats), which the network's round trips do not blur: compare it
// across changes to the scripts.
func BenchmarkUncontendedCycle(b *testing.B) {
	rdb, s := benchStore(b)
	ctx := ctxT(b)
	cycle := func() {
		if _, err := s.AcquireQueued(ctx, "bench", "me", time.Minute, 0, time.Second); err != nil {
			b.Fatal(err)
		}
		if err := s.Release(ctx, "bench", "me", 0); err != nil {
			b.Fatal(err)
		}
	}
	cycle() // loads the scripts
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		cycle()
		n++
	}
	b.ReportMetric(evalshaMicros(b, rdb)/float64(n), "server-µs/op")
}

// BenchmarkHandoverCycle runs what a contended acquisition costs the
// server in a line of three: the holder's Release hands the key to the
// first waiter, and the old holder joins the back of the line again
// (AcquireQueued, refused), and reports the server's µs in the two
// scripts per acquisition (server-µs/op).
func BenchmarkHandoverCycle(b *testing.B) {
	rdb, s := benchStore(b)
	ctx := ctxT(b)
	owners := []string{"a", "b", "c"}
	join := func(owner string) {
		if _, err := s.AcquireQueued(ctx, "bench", owner, time.Minute, 0, time.Minute); !errors.Is(err, backend.ErrHeld) {
			b.Fatalf("%s joining the line: %v, want ErrHeld", owner, err)
		}
	}
	if _, err := s.AcquireQueued(ctx, "bench", "a", time.Minute, 0, time.Minute); err != nil {
		b.Fatal(err)
	}
	join("b")
	join("c")
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		b.Fatal(err)
	}
	n := 0
	for b.Loop() {
		holder := owners[n%3]
		if err := s.Release(ctx, "bench", holder, 0); err != nil {
			b.Fatal(err)
		}
		join(holder)
		n++
	}
	b.ReportMetric(evalshaMicros(b, rdb)/float64(n), "server-µs/op")
}

// benchStore returns a client of a private server and a store on it, with
// the scripts as they ship (no test shim).
func benchStore(b *testing.B) (*redis.Client, *redisbackend.Store) {
	rdb := testenv.NewRedis(b).Client(b)
	s, err := redisbackend.New(rdb, redisbackend.WithoutRestartGuard())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return rdb, s
}

// evalshaMicros returns the µs the server spent in EVALSHA since the last
// CONFIG RESETSTAT.
func evalshaMicros(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(ctxT(b), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	us, found := 0.0, false
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_evalsha:"); ok {
			for field := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(field, "usec="); ok {
					us, err = strconv.ParseFloat(v, 64)
					found = err == nil
				}
			}
		}
	}
	if !found {
		b.Fatalf("no usec of cmdstat_evalsha in INFO commandstats:\n%s", info)
	}
	return us
}
