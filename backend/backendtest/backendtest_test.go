package backendtest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/backendtest"
	"github.com/baton-go/baton/backend/membackend"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memHarness runs the suite on one in-memory store shared by every
// "client", as the clients of one server share its data.
func memHarness(t *testing.T, opts ...membackend.Option) backendtest.Harness {
	s := membackend.New(opts...)
	t.Cleanup(func() { s.Close() })
	return backendtest.Harness{
		NewStore: func(testing.TB) backend.Store { return s },
		Wipe:     func(testing.TB) { s.Reset() },
		Restart:  func(testing.TB) { s.Restart() },
	}
}

func TestMembackend(t *testing.T) {
	backendtest.Run(t, memHarness(t))
}

// TestMembackendWithoutHandover runs the suite on a store that keeps a
// released key for the first waiter instead of handing it over, as a Redis
// store that waits for replicas does.
func TestMembackendWithoutHandover(t *testing.T) {
	backendtest.Run(t, memHarness(t, membackend.WithoutHandover()))
}
