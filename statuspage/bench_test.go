package statuspage_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/statuspage"
)

// BenchmarkStatus measures the status page of a service with 100,000
// held locks (each with its fencing counter) and 20,000 members on a
// private redis-server: one read of /status and of the page (a new read
// per request), reporting ms/op, the response's bytes and the Redis
// commands per request (scripts' own calls included, from INFO
// commandstats); and, with 16 clients polling /status every 10 ms on a
// page that reads once a second, the latency of an unrelated
// client's GET (mean, p99 and max in ms), which the page must not raise
// above 1 ms, and the slowest command the server ran meanwhile.
//
//	go test -run '^$' -bench BenchmarkStatus -benchtime 20x ./statuspage
func BenchmarkStatus(b *testing.B) {
	q := newQuietPage(b)
	q.hold(b, 0, 100_000)
	q.join(b, 20_000)
	fetch(b, http.MethodGet, q.serve(b), "status") // loads the scripts

	b.Run("UnrelatedIdle", func(b *testing.B) { report(b, unrelated(b, q)) })
	for _, path := range []string{"status", ""} {
		b.Run("GET/"+path, func(b *testing.B) {
			srv := q.serve(b, statuspage.WithRefresh(time.Nanosecond)) // a read per request
			slowlog(b, q, "0")
			defer slowlog(b, q, "10000")
			before, size := q.commands(b), 0
			start := time.Now()
			for b.Loop() {
				_, body := fetch(b, http.MethodGet, srv, path)
				size += len(body)
			}
			n := float64(b.N)
			b.ReportMetric(time.Since(start).Seconds()*1000/n, "ms/op")
			b.ReportMetric(float64(size)/n, "resp-bytes/op")
			b.ReportMetric(float64(q.commands(b)-before)/n, "redis-cmds/op")
			reportSlowest(b, q)
		})
	}

	// 16 clients poll /status every 10 ms; the page reads the store
	// once a second, or (the control) not at all after its first read.
	// The unrelated client's latency is measured in this process, which
	// the pollers share on a small machine, so it counts their CPU too:
	// compare the two. The slowest command the server ran meanwhile
	// (SLOWLOG) is how long the page's reads can hold that client up.
	for _, every := range []time.Duration{time.Second, time.Hour} {
		b.Run(fmt.Sprintf("Unrelated16Polling/refresh=%v", every), func(b *testing.B) {
			srv := q.serve(b, statuspage.WithRefresh(every))
			slowlog(b, q, "0")
			defer slowlog(b, q, "10000")
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 16 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						case <-time.After(10 * time.Millisecond):
							fetch(b, http.MethodGet, srv, "status")
						}
					}
				})
			}
			lat := unrelated(b, q)
			close(stop)
			wg.Wait()
			report(b, lat)
			entries, err := q.admin.SlowLogGet(b.Context(), -1).Result()
			if err != nil {
				b.Fatal(err)
			}
			var slowest time.Duration
			for _, e := range entries {
				slowest = max(slowest, e.Duration)
			}
			b.ReportMetric(float64(slowest.Microseconds())/1000, "slowest-cmd-ms")
		})
	}
}

// reportSlowest reports the slowest command in the server's SLOWLOG, and
// the 99th percentile of their durations, in ms.
func reportSlowest(b *testing.B, q *quietPage) {
	entries, err := q.admin.SlowLogGet(b.Context(), -1).Result()
	if err != nil {
		b.Fatal(err)
	}
	var ds []time.Duration
	for _, e := range entries {
		ds = append(ds, e.Duration)
	}
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)-1].Microseconds())/1000, "slowest-cmd-ms")
	b.ReportMetric(float64(ds[len(ds)*99/100].Microseconds())/1000, "p99-cmd-ms")
}

// slowlog makes the server log the commands slower than µs microseconds
// (0: all of them) and empties its log.
func slowlog(b *testing.B, q *quietPage, us string) {
	if err := q.admin.ConfigSet(b.Context(), "slowlog-log-slower-than", us).Err(); err != nil {
		b.Fatal(err)
	}
	if err := q.admin.ConfigSet(b.Context(), "slowlog-max-len", "100000").Err(); err != nil {
		b.Fatal(err)
	}
	if err := q.admin.SlowLogReset(b.Context()).Err(); err != nil {
		b.Fatal(err)
	}
}

// unrelated measures the latency of another client's GETs, 200 a
// millisecond apart per op.
func unrelated(b *testing.B, q *quietPage) []time.Duration {
	other := q.srv.Client(b)
	var lat []time.Duration
	for b.Loop() {
		for range 200 {
			t0 := time.Now()
			if err := other.Get(b.Context(), "unrelated").Err(); err != nil && !errors.Is(err, redis.Nil) {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
			time.Sleep(time.Millisecond)
		}
	}
	return lat
}

// report reports the mean, p99 and max of lat in ms.
func report(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(sum/time.Duration(len(lat))), "mean-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
}
