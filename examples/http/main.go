// Command http is a web service whose handlers branch on the role: two
// instances of service acme/billing, each with its own HTTP server and its
// own connection to the store (as two processes would have), elect a
// master and serve
//
//	GET  /                  who this instance is, and who is master
//	POST /report            runs on the master only; a slave answers 409 and names the master
//	POST /invoices/{id}/close  a section under a cross-instance lock on invoice:{id}
//	GET  /baton/            the status page (statuspage): master, members, locks, recent events
//	GET  /baton/healthz     200 ok, or 503 with the reason
//	GET  /baton/status      the same as the page, as JSON
//	GET  /metrics           Prometheus metrics (package metrics)
//
// It prints each instance's URL and the batonctl command line that shows
// its master, members and locks, and runs until Ctrl-C; stop it and
// start it again to see the other instance take over, or open the two
// status pages side by side.
//
//	go run ./examples/http                        # embedded in-process Redis, ports 8080 and 8081
//	go run ./examples/http -redis 127.0.0.1:6379  # a real Redis
//	go run ./examples/http -ports 9000,9001,9002  # three instances on other ports
//
// Two processes on one Redis, one instance each, show a crash: kill -9
// one and the other's status page names it master within the role TTL.
//
//	go run ./examples/http -redis 127.0.0.1:6379 -ports 8080  # and, in another terminal, -ports 8081
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/examples/internal/embedredis"
	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/internal/ctlline"
	"github.com/baton-go/baton/metrics"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/statuspage"
	"github.com/baton-go/baton/synclock"
)

func main() {
	addr := flag.String("redis", "", "host:port of a Redis server; empty runs an embedded in-process Redis")
	ports := flag.String("ports", "8080,8081", "comma-separated ports, one instance each (0 picks a free one)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var list []int
	for _, p := range strings.Split(*ports, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 || n > 65535 {
			fmt.Fprintf(os.Stderr, "-ports: %q is not a port\n", p)
			os.Exit(2)
		}
		list = append(list, n)
	}
	if err := run(ctx, *addr, list, os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, "http example failed:", err)
		os.Exit(1)
	}
}

// run serves one instance per port on the Redis at addr (an embedded one
// when empty) until ctx ends. It writes the instances' URLs to out and,
// if ready is not nil, sends their base URLs on it once all serve.
func run(ctx context.Context, addr string, ports []int, out io.Writer, ready chan<- []string) error {
	if addr == "" {
		m, err := embedredis.Start(10 * time.Millisecond)
		if err != nil {
			return err
		}
		defer m.Close()
		addr = m.Addr()
	}
	// One Metrics for the process; each instance's series carry its ID.
	m, err := metrics.New(nil)
	if err != nil {
		return err
	}
	var urls []string
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.close()
		}
	}()
	for _, port := range ports {
		s, err := startServer(addr, port, m)
		if err != nil {
			return err
		}
		servers = append(servers, s)
		urls = append(urls, s.url)
		fmt.Fprintf(out, "instance %s: %s/  status page %s/baton/  metrics %s/metrics\n", s.id, s.url, s.url, s.url)
	}
	fmt.Fprintf(out, "inspect it with batonctl: %s\n", ctlline.Redis(addr, keyPrefix, "acme", "billing"))
	fmt.Fprintln(out, "Ctrl-C stops.")
	if ready != nil {
		ready <- urls
	}
	<-ctx.Done()
	return nil
}

// keyPrefix starts the example's keys in Redis, apart from other users'.
const keyPrefix = "baton-http-example"

// server is one instance: its client and store, elector, locker and HTTP
// server.
type server struct {
	id    instanceid.ID
	url   string
	rdb   *redis.Client
	store *redisbackend.Store
	el    *role.Elector
	endEl context.CancelFunc // ends el's Run, which then releases the role
	elRun chan error         // el's Run returned
	http  *http.Server
	done  chan error
}

// startServer starts the instance for port on the Redis at addr.
func startServer(addr string, port int, m *metrics.Metrics) (*server, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("listen on port %d (pick others with -ports): %w", port, err)
	}
	port = ln.Addr().(*net.TCPAddr).Port
	s := &server{url: "http://" + ln.Addr().String(), done: make(chan error, 1)}
	if s.id, err = instanceid.New("127.0.0.1", "acme", "billing", port); err != nil {
		ln.Close()
		return nil, err
	}
	s.rdb = redis.NewClient(&redis.Options{Addr: addr})
	if s.store, err = redisbackend.New(s.rdb, redisbackend.WithPrefix(keyPrefix)); err != nil {
		s.rdb.Close()
		ln.Close()
		return nil, err
	}
	quiet := slog.New(slog.DiscardHandler)
	events := statuspage.NewEvents(0) // recent transitions and lock troubles, for the page
	cfg := role.Config{HeartbeatInterval: time.Second, HeartbeatExpiration: 3 * time.Second}
	opts := append(events.RoleOptions(), m.Role(s.id), role.WithLogger(quiet))
	if s.el, err = role.NewElector(s.store, s.id, cfg, opts...); err != nil {
		s.store.Close()
		s.rdb.Close()
		ln.Close()
		return nil, err
	}
	var elCtx context.Context
	elCtx, s.endEl = context.WithCancel(context.Background())
	s.elRun = make(chan error, 1)
	go func() { s.elRun <- s.el.Run(elCtx) }()
	lk, err := synclock.NewLocker(s.store, s.id, synclock.Config{},
		m.Lock(s.id), synclock.WithObserver(events.Lock), synclock.WithLogger(quiet))
	if err != nil {
		s.close()
		ln.Close()
		return nil, err
	}
	page, err := statuspage.New(s.store, s.el, statuspage.WithEvents(events))
	if err != nil {
		s.close()
		ln.Close()
		return nil, err
	}

	s.http = &http.Server{Handler: s.routes(m, lk, page), ReadHeaderTimeout: 10 * time.Second}
	go func() { s.done <- s.http.Serve(ln) }()
	return s, nil
}

// routes returns the instance's handlers: its own pages, the status page
// under /baton/ and the metrics.
func (s *server) routes(m *metrics.Metrics, lk *synclock.Locker, page http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/baton/", http.StripPrefix("/baton", page))
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /{$}", s.home)
	mux.HandleFunc("POST /report", s.report)
	mux.HandleFunc("POST /invoices/{id}/close", func(w http.ResponseWriter, r *http.Request) {
		key := "invoice:" + r.PathValue("id")
		err := lk.DoKey(r.Context(), key, func(ctx context.Context) error {
			token, _ := synclock.Token(ctx) // pass it with every write
			fmt.Fprintf(w, "%s closed by %s under token %d\n", key, s.id, token)
			return nil
		})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	return mux
}

// home says who this instance is, and who is master.
func (s *server) home(w http.ResponseWriter, r *http.Request) {
	if s.el.IsMaster() {
		fmt.Fprintf(w, "%s is master (epoch %d)\n", s.id, s.el.Status().Epoch)
		return
	}
	fmt.Fprintf(w, "%s is a slave; the master is %s\n", s.id, orNone(s.el.Status().Master))
}

// report runs on the master only; a slave answers 409 and names the
// master.
func (s *server) report(w http.ResponseWriter, r *http.Request) {
	// The tenure's context ends with the mastership: pass it down, and
	// the epoch with every write, so that a stale master is refused.
	ctx, epoch, ok := s.el.Tenure()
	if !ok {
		http.Error(w, fmt.Sprintf("not the master; send reports to %s", orNone(s.el.Status().Master)), http.StatusConflict)
		return
	}
	if ctx.Err() == nil {
		fmt.Fprintf(w, "report made by the master %s under epoch %d\n", s.id, epoch)
	}
}

// close stops the HTTP server, gives up the role at once and closes the
// store and client.
func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if s.http != nil {
		_ = s.http.Shutdown(ctx)
		if err := <-s.done; err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintln(os.Stderr, "serve:", err)
		}
	}
	s.endEl()
	select {
	case <-s.elRun:
	case <-ctx.Done():
	}
	s.store.Close()
	s.rdb.Close()
}

func orNone(id string) string {
	if id == "" {
		return "not known yet"
	}
	return id
}
