// Command quickstart is the README's first program. Run it twice on one Redis.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"

	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/schedlock"
	"github.com/baton-go/baton/synclock"
	"github.com/go-co-op/gocron/v2"
	"github.com/redis/go-redis/v9"
)

func main() {
	port := flag.Int("port", 8080, "the port to serve, part of the instance ID")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	store := must(redisbackend.New(redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})))
	id := must(instanceid.Detect(instanceid.Options{App: "billing", Port: *port, IP: os.Getenv("POD_IP")}))
	el := must(role.NewElector(store, id, role.Config{})) // role TTL 45 s, renewed every 15 s
	role.SetDefault(el)                                   // role.IsMaster() asks el
	synclock.SetDefault(must(synclock.NewLocker(store, id, synclock.Config{})))
	s, every := must(gocron.NewScheduler()), gocron.CronJob("*/3 * * * * *", true)
	must(s.NewJob(every, gocron.NewTask(func() { log.Print("report sent (master only)") }), schedlock.MasterOnly(el)))
	must(s.NewJob(every, gocron.NewTask(func() { log.Print("cache warmed (slaves only)") }), schedlock.SlaveOnly(el)))
	must(s.NewJob(every, gocron.NewTask(closeInvoices)))
	s.Start()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if role.IsMaster() {
			fmt.Fprintln(w, id, "is the master")
		} else {
			fmt.Fprintln(w, id, "is a slave; the master is", el.Status().Master)
		}
	})
	go func() { log.Fatal(http.ListenAndServe(fmt.Sprint(":", *port), nil)) }()
	if err := el.Run(ctx); err != nil { // until Ctrl-C, which hands the role over at once
		log.Fatal(err)
	}
}

// closeInvoices runs on one instance at a time: synclock.Do locks it by its name.
func closeInvoices(ctx context.Context) error {
	return synclock.Do(ctx, func(context.Context) error { log.Print("invoices closed under the lock"); return nil })
}

func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}
