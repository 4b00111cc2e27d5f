// Package consultest is the Consul leg of the table of stores
// (testkit/storetest) that the integration tests of role, synclock,
// schedlock, statuspage and metrics run on. It is a module of its own
// (it requires the Consul store's), so that the root module builds
// without the Consul client: a test binary that imports it, even blank,
// runs the table's "consul" entry on a private Consul agent
// (testkit/testenv).
//
// It is test support, not part of baton's API.
package consultest

import (
	"os"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/testkit/storetest"
	"github.com/baton-go/baton/testkit/testenv"
)

// OnlyEnv names the environment variable that, set to 1, makes a test
// binary that links this package run the table's Consul leg alone: the
// consul-leg target sets it when it runs the root module's tests again.
const OnlyEnv = "BATON_CONSUL_LEG_ONLY"

func init() {
	storetest.SetConsul(serve, os.Getenv(OnlyEnv) == "1")
}

func serve(t testing.TB) (storetest.Factory, storetest.Server) {
	a := testenv.NewConsul(t)
	return func(t testing.TB) backend.Store { return Consul(t, a) }, a
}

// Consul returns a new store on agent a that knows the agent's session
// minimum, without the restart guard (the agent is started for the
// test), closed when t ends.
func Consul(t testing.TB, a *testenv.Consul, opts ...consulbackend.Option) *consulbackend.Store {
	t.Helper()
	cfg := api.DefaultConfig()
	cfg.Address = a.Addr()
	cfg.Token = a.ManagementToken()
	base := []consulbackend.Option{consulbackend.WithSessionTTLMin(a.SessionTTLMin()), consulbackend.WithoutRestartGuard()}
	s, err := consulbackend.New(cfg, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
