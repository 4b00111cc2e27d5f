package metrics_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/metrics"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/synclock"
)

// One Metrics feeds on the elector, the locker and a job gate; three
// lines wire it in. An instance is elected, takes a lock, skips a
// slave-only job, and stops.
func Example() {
	store := membackend.New() // redisbackend.New(client) in production
	defer store.Close()
	id, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)
	quiet := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry() // prometheus.DefaultRegisterer in production, served by promhttp.Handler()

	m, _ := metrics.New(reg, metrics.WithLockKeys("nightly-export"))
	el, _ := role.NewElector(store, id, role.Config{}, role.WithLogger(quiet), m.Role(id))
	lk, _ := synclock.NewLocker(store, id, synclock.Config{}, synclock.WithLogger(quiet), m.Lock(id))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { el.Run(ctx); close(done) }()
	for !el.IsMaster() {
		time.Sleep(time.Millisecond)
	}
	lk.DoKey(context.Background(), "nightly-export", func(ctx context.Context) error { return nil })

	s, _ := gocron.NewScheduler()
	skipped := make(chan struct{})
	s.NewJob(gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()),
		gocron.NewTask(func() {}),
		gocron.WithName("warm-cache"),
		schedlock.SlaveOnly(el, schedlock.WithLogger(quiet), m.Job(id)),
		gocron.WithEventListeners(gocron.AfterLockError(func(uuid.UUID, string, error) { close(skipped) })))
	s.Start()
	<-skipped
	s.Shutdown()
	cancel()
	<-done // Run returns once the elector's reports are in

	printSeries(reg, "baton_role_is_master", "baton_role_transitions_total",
		"baton_lock_acquired_total", "baton_job_skipped_total")
	// Output:
	// baton_job_skipped_total{job="warm-cache",reason="not-slave"} 1
	// baton_lock_acquired_total{lock="nightly-export"} 1
	// baton_role_is_master 0
	// baton_role_transitions_total{to="master"} 1
	// baton_role_transitions_total{to="slave"} 1
}

// printSeries prints the counters and gauges of the named families,
// without the app, tenant and instance_id labels.
func printSeries(g prometheus.Gatherer, names ...string) {
	fams, _ := g.Gather()
	for _, f := range fams {
		if !slices.Contains(names, f.GetName()) {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "app", "tenant", "instance_id":
				default:
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
			}
			name := f.GetName()
			if len(labels) > 0 {
				name += "{" + strings.Join(labels, ",") + "}"
			}
			fmt.Println(name, m.GetCounter().GetValue()+m.GetGauge().GetValue())
		}
	}
}
