package consulbackend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/consul/api"
)

// Tags a Service carries to say the instance's role.
const (
	TagMaster = "master"
	TagSlave  = "slave"
)

// Defaults of ServiceOptions.
const (
	DefaultCheckTTL        = 45 * time.Second
	DefaultDeregisterAfter = time.Minute
)

// ServiceOptions describes the service a Service registers. ID, Name and
// Port are required; the others have defaults.
type ServiceOptions struct {
	// ID is the service ID: the instance ID ("10.0.0.7:acme:billing:8080").
	ID string
	// Name is the service name: the app ("billing").
	Name string
	// Tenant goes into the service's meta as "tenant" (with the ID as
	// "instance-id").
	Tenant string
	// Address and Port are where the instance serves: the instance ID's
	// IP and port. An empty Address lets Consul use the node's.
	Address string
	Port    int
	// Tags are added to the role's tag, "master" or "slave".
	Tags []string
	// Meta is added to the service's meta.
	Meta map[string]string
	// CheckTTL is the TTL of the service's health check, which every
	// Announce passes: it goes critical if the instance stops announcing
	// for this long (default DefaultCheckTTL; make it a few heartbeat
	// intervals).
	CheckTTL time.Duration
	// DeregisterAfter is how long the check may stay critical before
	// Consul removes the service, as after a crash (default and minimum
	// DefaultDeregisterAfter).
	DeregisterAfter time.Duration
}

// Service registers an instance as a service of the local Consul agent,
// tagged "master" or "slave", and passes its TTL health check. It
// implements role.Announcer: give it to the elector with
// role.WithAnnouncer, whatever the elector's lease store (Redis or
// Consul), and the catalog shows who is master:
//
//	svc, err := consulbackend.NewService(cfg, consulbackend.ServiceOptions{
//		ID: id.String(), Name: id.App, Tenant: id.Tenant, Address: id.IP.String(), Port: int(id.Port)})
//	el, err := role.NewElector(store, id, roleCfg, role.WithAnnouncer(svc))
type Service struct {
	agent *api.Agent
	addr  string
	reg   api.AgentServiceRegistration
	check string

	mu         sync.Mutex
	registered bool
	master     bool
}

// NewService returns a Service that registers opts with the agent cfg
// describes (nil: api.DefaultConfig). It does not talk to Consul until
// the first Announce.
func NewService(cfg *api.Config, opts ServiceOptions) (*Service, error) {
	if opts.ID == "" || opts.Name == "" || strings.ContainsAny(opts.Name, " /") {
		return nil, fmt.Errorf("consulbackend: service: ID %q and Name %q must be set, the name without spaces or '/'", opts.ID, opts.Name)
	}
	if opts.Port <= 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("consulbackend: service %q: port %d is not in 1..65535", opts.ID, opts.Port)
	}
	if opts.Address != "" && net.ParseIP(opts.Address) == nil {
		return nil, fmt.Errorf("consulbackend: service %q: address %q is not an IP address", opts.ID, opts.Address)
	}
	if opts.CheckTTL == 0 {
		opts.CheckTTL = DefaultCheckTTL
	}
	if opts.CheckTTL < time.Second {
		return nil, fmt.Errorf("consulbackend: service %q: check TTL %v must be at least 1s", opts.ID, opts.CheckTTL)
	}
	opts.DeregisterAfter = max(opts.DeregisterAfter, DefaultDeregisterAfter)
	if cfg == nil {
		cfg = api.DefaultConfig()
	}
	c := *cfg
	if err := checkAddress(c.Address); err != nil {
		return nil, err
	}
	client, err := api.NewClient(&c)
	if err != nil {
		return nil, fmt.Errorf("consulbackend: service %q: client for the agent at %s: %w", opts.ID, c.Address, err)
	}
	meta := map[string]string{"instance-id": opts.ID}
	if opts.Tenant != "" {
		meta["tenant"] = opts.Tenant
	}
	for k, v := range opts.Meta {
		meta[k] = v
	}
	s := &Service{agent: client.Agent(), addr: c.Address, check: "baton:" + opts.ID}
	s.reg = api.AgentServiceRegistration{
		ID:      opts.ID,
		Name:    opts.Name,
		Address: opts.Address,
		Port:    opts.Port,
		Tags:    slices.Clone(opts.Tags),
		Meta:    meta,
		Check: &api.AgentServiceCheck{
			CheckID:                        s.check,
			Name:                           "baton heartbeat",
			TTL:                            opts.CheckTTL.String(),
			Status:                         api.HealthPassing,
			DeregisterCriticalServiceAfter: opts.DeregisterAfter.String(),
		},
	}
	return s, nil
}

// Announce implements role.Announcer: it registers the service with the
// role's tag when it is not registered yet or the role changed, and
// otherwise passes its health check. After a failure (an agent that
// restarted has forgotten the service) the next call registers again.
func (s *Service) Announce(ctx context.Context, master bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.registered && s.master == master {
		err := s.agent.UpdateTTLOpts(s.check, "", api.HealthPassing, (&api.QueryOptions{}).WithContext(ctx))
		if err == nil {
			return nil
		}
		s.registered = false // register again, now
	}
	reg := s.reg
	tag := TagSlave
	if master {
		tag = TagMaster
	}
	reg.Tags = append([]string{tag}, s.reg.Tags...)
	check := *s.reg.Check
	reg.Check = &check
	if err := s.agent.ServiceRegisterOpts(&reg, api.ServiceRegisterOpts{ReplaceExistingChecks: true}.WithContext(ctx)); err != nil {
		return fmt.Errorf("consulbackend: register service %q (%s) with the agent at %s: %w", s.reg.ID, tag, s.addr, err)
	}
	s.registered, s.master = true, master
	return nil
}

// Withdraw implements role.Announcer: it deregisters the service.
func (s *Service) Withdraw(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.registered = false
	err := s.agent.ServiceDeregisterOpts(s.reg.ID, (&api.QueryOptions{}).WithContext(ctx))
	var se api.StatusError
	if errors.As(err, &se) && se.Code == 404 {
		return nil // not registered
	}
	if err != nil {
		return fmt.Errorf("consulbackend: deregister service %q from the agent at %s: %w", s.reg.ID, s.addr, err)
	}
	return nil
}

// AdvertiseAddr returns the address the local Consul agent advertises to
// its cluster (its LAN address), for instanceid.Options.AdvertiseAddr:
// an instance then uses the address its node is known by.
func AdvertiseAddr(ctx context.Context, cfg *api.Config) (string, error) {
	if cfg == nil {
		cfg = api.DefaultConfig()
	}
	c := *cfg
	client, err := api.NewClient(&c)
	if err != nil {
		return "", fmt.Errorf("consulbackend: client for the agent at %s: %w", c.Address, err)
	}
	var self struct {
		Member struct{ Addr string }
	}
	if _, err := client.Raw().Query("/v1/agent/self", &self, (&api.QueryOptions{}).WithContext(ctx)); err != nil {
		return "", fmt.Errorf("consulbackend: ask the agent at %s for its address: %w", c.Address, err)
	}
	if net.ParseIP(self.Member.Addr) == nil {
		return "", fmt.Errorf("consulbackend: the agent at %s advertises %q, not an IP address", c.Address, self.Member.Addr)
	}
	return self.Member.Addr, nil
}
