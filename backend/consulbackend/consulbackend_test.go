package consulbackend_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"go.uber.org/goleak"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/backendtest"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const patience = 30 * time.Second

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

// config returns a client config for agent a.
func config(a *testenv.Consul) *api.Config {
	cfg := api.DefaultConfig()
	cfg.Address = a.Addr()
	cfg.Token = a.ManagementToken()
	return cfg
}

// newStore returns a store on agent a that knows the agent's short
// session minimum, closed with the test.
func newStore(t testing.TB, a *testenv.Consul, opts ...consulbackend.Option) *consulbackend.Store {
	t.Helper()
	s, err := consulbackend.New(config(a), append([]consulbackend.Option{consulbackend.WithSessionTTLMin(a.SessionTTLMin())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	a := testenv.NewConsul(t)
	backendtest.Run(t, backendtest.Harness{
		NewStore: func(t testing.TB) backend.Store { return newStore(t, a) },
		Wipe: func(t testing.TB) {
			if err := a.DeleteAll(ctxT(t)); err != nil {
				t.Fatal(err)
			}
		},
		GivenTTL: true,
		MinTTL:   a.SessionTTLMin(),
		MaxTTL:   consulbackend.MaxSessionTTL,
	})
}
