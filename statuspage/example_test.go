package statuspage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/statuspage"
	"github.com/baton-go/baton/synclock"
)

// One instance serves its health and status beside its own handlers; a
// lock it holds shows on the page with its holder.
func Example() {
	store := membackend.New() // redisbackend.New(client) in production
	defer store.Close()
	id, _ := instanceid.New("10.0.0.7", "acme", "billing", 8080)

	events := statuspage.NewEvents(0)
	opts := append(events.RoleOptions(), role.WithLogger(slog.New(slog.DiscardHandler)))
	el, _ := role.NewElector(store, id, role.Config{}, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { el.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	lk, _ := synclock.NewLocker(store, id, synclock.Config{}, synclock.WithObserver(events.Lock))

	page, _ := statuspage.New(store, el, statuspage.WithEvents(events))
	mux := http.NewServeMux()
	mux.Handle("/baton/", http.StripPrefix("/baton", page))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// Wait until the instance is master and has sent its first heartbeat.
	for !el.IsMaster() {
		time.Sleep(time.Millisecond)
	}
	for ms, _ := el.Members(context.Background()); len(ms) == 0; ms, _ = el.Members(context.Background()) {
		time.Sleep(time.Millisecond)
	}

	res, _ := http.Get(srv.URL + "/baton/healthz")
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	fmt.Printf("healthz: %d %s", res.StatusCode, body)

	lk.DoKey(context.Background(), "invoice:42", func(ctx context.Context) error {
		res, err := http.Get(srv.URL + "/baton/status")
		if err != nil {
			return err
		}
		defer res.Body.Close()
		var s statuspage.Status
		json.NewDecoder(res.Body).Decode(&s)
		fmt.Println("service:", s.Service.Tenant+"/"+s.Service.App)
		fmt.Println("master:", s.Master.ID)
		fmt.Println("members:", len(s.Members), "- this one is master:", s.Members[0].Master)
		fmt.Println("lock:", s.Locks[0].Kind, s.Locks[0].Name, "held by", s.Locks[0].Holder)
		return nil
	})

	res, _ = http.Get(srv.URL + "/baton/")
	res.Body.Close()
	fmt.Println("page:", res.StatusCode, res.Header.Get("Content-Type"))
	// Output:
	// healthz: 200 ok
	// service: acme/billing
	// master: 10.0.0.7:acme:billing:8080
	// members: 1 - this one is master: true
	// lock: lock invoice:42 held by 10.0.0.7:acme:billing:8080
	// page: 200 text/html; charset=utf-8
}
