// Package consulconfig makes a Consul store from baton's configuration:
// the consul.* keys that package config reads, checked against the leases
// the configuration keeps.
//
//	cfg, err := config.Load(config.File("baton.yaml"), config.Env("BATON_"))
//	...
//	store, err := consulconfig.Store(*cfg)
//	defer store.Close()
//
// It is a module of its own (github.com/baton-go/baton/config/consulconfig,
// which requires the Consul store's module) so that package config, and a
// service that uses Redis only, build without the Consul client. It
// belongs to the wiring layer, beside config: it imports config and
// consulbackend, and nothing imports it but programs.
package consulconfig

import (
	"cmp"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/config"
)

// APIConfig returns the Consul client configuration for c: the Consul
// client's defaults (and its CONSUL_* environment variables) with c's
// settings over them. Every call returns a new configuration the caller
// may change.
func APIConfig(c config.Consul) *api.Config {
	cfg := api.DefaultConfig()
	if c.Address != "" {
		cfg.Address = c.Address
		if rest, ok := strings.CutPrefix(c.Address, "https://"); ok {
			cfg.Address, cfg.Scheme = rest, "https"
		} else if rest, ok := strings.CutPrefix(c.Address, "http://"); ok {
			cfg.Address, cfg.Scheme = rest, "http"
		}
	}
	if c.TLS {
		cfg.Scheme = "https"
	}
	if c.Token != "" {
		cfg.Token = c.Token
	}
	if c.Datacenter != "" {
		cfg.Datacenter = c.Datacenter
	}
	if c.CAFile != "" {
		cfg.TLSConfig.CAFile = c.CAFile
	}
	if c.CertFile != "" {
		cfg.TLSConfig.CertFile, cfg.TLSConfig.KeyFile = c.CertFile, c.KeyFile
	}
	return cfg
}

// Store returns a Consul store for c: on the agent c.Consul names, with
// its key prefix, session minimum and lock-delay, and a restart guard as
// long as the longest lease the configuration keeps (c.LongestLease; see
// consulbackend.WithRestartGuard). It refuses, with the *config.Error of
// c.CheckConsul, a configuration whose leases Consul cannot hold and
// consul.* keys that Validate refuses, such as an address with
// credentials. The caller closes the store.
func Store(c config.Config) (*consulbackend.Store, error) {
	if err := c.CheckConsul(); err != nil {
		return nil, err
	}
	opts := []consulbackend.Option{
		consulbackend.WithSessionTTLMin(cmp.Or(c.Consul.SessionTTLMin, consulbackend.DefaultSessionTTLMin)),
		consulbackend.WithLockDelay(c.Consul.LockDelay),
		consulbackend.WithRestartGuard(c.LongestLease()),
	}
	if c.Consul.KeyPrefix != "" {
		opts = append(opts, consulbackend.WithPrefix(c.Consul.KeyPrefix))
	}
	return consulbackend.New(APIConfig(c.Consul), opts...)
}
