// Package storetest is the table of stores that the integration tests of
// role, synclock and schedlock run on: the in-memory store, Redis and
// Consul, each on a private server that the test starts (testkit/testenv).
// A test written once against backend.Store runs on every entry:
//
//	storetest.Each(t, func(t *testing.T, b storetest.Backend) {
//		newStore := b.Open(t)       // a private server for this test
//		a, c := newStore(t), newStore(t) // two clients, as two processes
//		...
//	})
//
// Tests that take the server away and bring it back call Serve, which
// also returns the Server (the in-memory store has none):
//
//	newStore, srv := b.Serve(t)
//	srv.Kill()
//
// The servers accept short leases (Consul's session minimum is lowered
// for them), and the stores skip the restart guard, since the servers
// are started for the test.
//
// The Consul store is a module of its own (backend/consulbackend), which
// this module does not require, so the "consul" entry is a slot its
// package consultest fills when a test binary links it (SetConsul). The
// root module's tests skip that entry; make test runs them a second time
// with the Consul leg linked in (the Makefile's consul-leg target, from
// testkit/all/consulleg), so every test still runs on every store.
package storetest

import (
	"testing"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/membackend"
	"github.com/baton-go/baton/backend/redisbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

// Factory returns a new client of one store: every client it returns sees
// the same data, as separate processes do. The client is closed when t
// ends.
type Factory func(t testing.TB) backend.Store

// Backend is one kind of store of the table.
type Backend struct {
	// Name is the subtest's name: "mem", "redis" or "consul".
	Name string
	// Open starts a private server for t (closed when t ends) and returns
	// a Factory of clients of it. For the in-memory store every client is
	// the one store Open made.
	Open func(t testing.TB) Factory
	// Serve is Open that also returns the server, for tests that kill
	// and restart it; nil for the in-memory store, which has no server.
	Serve func(t testing.TB) (Factory, Server)
	// ExpiryFactor is how many times its TTL a lease that nobody renews
	// may last at most: 1, but 2 on Consul, which keeps a session up to
	// twice its TTL.
	ExpiryFactor int
}

// Server is the private server behind a Factory's clients:
// *testenv.Redis or *testenv.Consul.
type Server interface {
	// Kill ends the server at once with SIGKILL, as a crash does.
	Kill() error
	// Restart starts it again on the same port, without the data it had
	// (a Redis without AppendOnly, a Consul dev agent).
	Restart() error
}

// Backends are the stores every integration test runs on. The "consul"
// entry skips its subtest unless SetConsul filled it.
var Backends = []Backend{
	{Name: "mem", Open: openMem, ExpiryFactor: 1},
	{Name: "redis", Open: open(serveRedis), Serve: serveRedis, ExpiryFactor: 1},
	{Name: "consul", Open: open(serveConsul), Serve: serveConsul, ExpiryFactor: 2},
}

// consulServe is the Serve of the Consul store, set by SetConsul.
var consulServe func(testing.TB) (Factory, Server)

// onlyConsul is set by SetConsul's only: the other entries skip.
var onlyConsul bool

// SetConsul fills the table's "consul" entry with serve, a Serve of
// Consul stores. Package consultest calls it from its init, so that a
// test binary that links consultest runs the Consul leg. With only set,
// the other entries skip their subtests: the binary runs the Consul leg
// alone (the consul-leg target, which runs the root's tests again).
func SetConsul(serve func(testing.TB) (Factory, Server), only bool) {
	consulServe, onlyConsul = serve, only
}

// SkipUnlinked skips t, a subtest that runs entry name of the table, when this
// test binary does not run that entry; Each and EachServer call it, and
// so do tests that run the table's stores by name: the Consul leg when consultest is not linked, the
// others when only the Consul leg runs.
func SkipUnlinked(t testing.TB, name string) {
	t.Helper()
	switch {
	case name == "consul" && consulServe == nil:
		t.Skip("storetest: the Consul leg runs from testkit/all/consulleg (make consul-leg), where the Consul store's module is linked")
	case name != "consul" && onlyConsul:
		t.Skip("storetest: this binary runs the Consul leg alone; the root module's run covers " + name)
	}
}

// Each runs f as a subtest for every backend of the table.
func Each(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range Backends {
		t.Run(b.Name, func(t *testing.T) {
			SkipUnlinked(t, b.Name)
			f(t, b)
		})
	}
}

// EachServer runs f as a subtest for every backend of the table that has
// a server (Serve is not nil): Redis and Consul.
func EachServer(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range Backends {
		if b.Serve != nil {
			t.Run(b.Name, func(t *testing.T) {
				SkipUnlinked(t, b.Name)
				f(t, b)
			})
		}
	}
}

func openMem(t testing.TB) Factory {
	s := membackend.New()
	t.Cleanup(func() { s.Close() })
	return func(testing.TB) backend.Store { return s }
}

// open returns the Open of a Serve: the Factory without the Server.
func open(serve func(testing.TB) (Factory, Server)) func(testing.TB) Factory {
	return func(t testing.TB) Factory {
		f, _ := serve(t)
		return f
	}
}

func serveRedis(t testing.TB) (Factory, Server) {
	r := testenv.NewRedis(t)
	return func(t testing.TB) backend.Store { return Redis(t, r) }, r
}

func serveConsul(t testing.TB) (Factory, Server) {
	t.Helper()
	SkipUnlinked(t, "consul")
	return consulServe(t)
}

// Redis returns a new store on r, without the restart guard (the server
// is started for the test), closed when t ends.
func Redis(t testing.TB, r *testenv.Redis, opts ...redisbackend.Option) *redisbackend.Store {
	t.Helper()
	s, err := redisbackend.New(r.Client(t), append([]redisbackend.Option{redisbackend.WithoutRestartGuard()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// ByName returns the backend of the table called name, or fails t.
func ByName(t testing.TB, name string) Backend {
	t.Helper()
	for _, b := range Backends {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("storetest: no backend called %q", name)
	return Backend{}
}
