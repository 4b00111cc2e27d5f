package consulconfig_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/config"
	"github.com/baton-go/baton/config/consulconfig"
	"github.com/baton-go/baton/testkit/testenv"
)

// config keeps its own copy of Consul's session bounds, to build without
// the Consul client; they must be the store's.
func TestSessionBoundsAgree(t *testing.T) {
	if config.ConsulDefaultSessionTTLMin != consulbackend.DefaultSessionTTLMin || config.ConsulMaxSessionTTL != consulbackend.MaxSessionTTL {
		t.Errorf("config's Consul session bounds %v..%v, the store's %v..%v", config.ConsulDefaultSessionTTLMin, config.ConsulMaxSessionTTL,
			consulbackend.DefaultSessionTTLMin, consulbackend.MaxSessionTTL)
	}
}

// Store makes a store on the agent the consul.* keys name, with
// their prefix, and refuses a role TTL or lock hold that Consul's
// sessions cannot hold, naming the key.
func TestStore(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cfg := config.Default()
	cfg.Consul.Address = "http://" + a.Addr()
	cfg.Consul.KeyPrefix = "cfg-test"
	s, err := consulconfig.Store(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Prefix() != "cfg-test" {
		t.Errorf("prefix %q, want cfg-test", s.Prefix())
	}
	if got := backend.StoreName(s); got != "consul" {
		t.Errorf("backend.StoreName = %q, want consul", got)
	}
	// A Consul that baton never used looks like one that lost its data:
	// the guard, as long as the longest configured lease, refuses keys.
	_, err = s.Acquire(ctx, backend.AppKey("acme", "billing", "role"), "me", cfg.Role.HeartbeatExpiration, 0)
	if held, ok := errors.AsType[*backend.HeldError](err); !ok || !held.Recovering || held.Holder.TTL != 45*time.Second {
		t.Fatalf("first Acquire on a fresh agent: %v; want a Recovering refusal for the 45s restart guard", err)
	}
	if _, err := s.Acquire(ctx, backend.AppKey("acme", "billing", "short"), "me", 5*time.Second, 0); !errors.Is(err, backend.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "session_ttl_min") {
		t.Errorf("Acquire for 5s under a 10s session minimum: %v; want ErrInvalidArgument naming session_ttl_min", err)
	}

	short := config.Default()
	short.Role.HeartbeatInterval, short.Role.HeartbeatExpiration = 2*time.Second, 5*time.Second
	short.SyncLock.HoldDuration = 3 * time.Second
	_, err = consulconfig.Store(short)
	if !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("Store with a 5s role TTL and a 3s hold under a 10s session minimum: %v; want ErrInvalid", err)
	}
	for _, key := range []string{"scheduler-lock.heartbeat-expiration-duration-in-seconds=5", "synchronized-lock.hold-duration-in-seconds=3"} {
		if !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "consul.session-ttl-min-in-seconds") {
			t.Errorf("Store error %q does not name %s and the session minimum", err, key)
		}
	}
	short.Consul.SessionTTLMin = 2 * time.Second
	s2, err := consulconfig.Store(short)
	if err != nil {
		t.Fatalf("the same with a 2s session minimum: %v", err)
	}
	s2.Close()
}

// APIConfig maps the consul.* keys onto the client's configuration.
func TestAPIConfig(t *testing.T) {
	c := config.Consul{Address: "https://consul.internal:8501", Token: "t", Datacenter: "dc2",
		CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"}
	got := consulconfig.APIConfig(c)
	if got.Address != "consul.internal:8501" || got.Scheme != "https" || got.Token != "t" || got.Datacenter != "dc2" ||
		got.TLSConfig.CAFile != "ca.pem" || got.TLSConfig.CertFile != "c.pem" || got.TLSConfig.KeyFile != "k.pem" {
		t.Errorf("APIConfig() = %+v", got)
	}
	if got := consulconfig.APIConfig(config.Consul{Address: "10.0.0.1:8500", TLS: true}); got.Address != "10.0.0.1:8500" || got.Scheme != "https" {
		t.Errorf("host:port with consul.tls: address %q scheme %q, want 10.0.0.1:8500 https", got.Address, got.Scheme)
	}
	if s := c.String(); strings.Contains(s, "consul.token=t ") || !strings.Contains(s, "consul.token=<redacted>") {
		t.Errorf("String() = %q: the token must be redacted", s)
	}
}
