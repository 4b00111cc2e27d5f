package role_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend"
	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/role"
	"github.com/baton-go/baton/testkit/consultest"
	"github.com/baton-go/baton/testkit/storetest"
	"github.com/baton-go/baton/testkit/testenv"
)

// These tests run the elector against Consul faults: the agent restarted
// empty, paused, unreachable, an operator destroying the master's session,
// a wrong ACL token.

// Consul restarted empty: the master's session and key are gone, the
// restart guard keeps the role from anyone until every lease the restart
// took has ended, and the next master's epoch is larger than every
// earlier one; no two tenures overlap.
func TestConsulRestartedEmpty(t *testing.T) {
	a := testenv.NewConsul(t)
	cfg := role.Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatExpiration: time.Second}
	var ts tenures
	var els []*role.Elector
	for i := range 3 {
		els = append(els, startElector(t, consultest.Consul(t, a, consulbackend.WithRestartGuard(0)), 7400+i, cfg, &ts))
	}
	defer stopAll(t, els...)
	var m *role.Elector
	// The agent is new: the guard holds the first grant back too.
	waitFor(t, "a master", func() bool { m = master(els); return m != nil }, els...)
	before := m.Status().Epoch
	if err := a.Restart(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a master with a larger epoch", func() bool {
		m = master(els)
		return m != nil && m.Status().Epoch > before
	}, els...)
	ts.check(t, 2)
}

// An operator destroys the master's session (consul session destroy): the
// role key goes with it, the master's next renewal is refused and it steps
// down, and another instance takes the role with a larger epoch, never
// while the old master still calls itself master. A slave that has seen
// the master waits from the master's last renewal, which it was told of
// (EventRenewed); an instance that never saw it is kept out by the
// lock-delay, which must cover the TTL for that.
func TestConsulSessionDestroyed(t *testing.T) {
	t.Run("slave watching", func(t *testing.T) { testSessionDestroyed(t, 0, false) })
	t.Run("newcomer, lock-delay", func(t *testing.T) { testSessionDestroyed(t, 2*time.Second, true) })
}

func testSessionDestroyed(t *testing.T, lockDelay time.Duration, newcomer bool) {
	a := testenv.NewConsul(t)
	cfg := role.Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatExpiration: 2 * time.Second}
	var ts tenures
	var els []*role.Elector
	add := func(i int) *role.Elector {
		el := startElector(t, consultest.Consul(t, a, consulbackend.WithLockDelay(lockDelay)), 7500+i, cfg, &ts)
		els = append(els, el)
		return el
	}
	m := add(0)
	defer func() { stopAll(t, els...) }()
	waitFor(t, "a master", m.IsMaster, m)
	before := m.Status().Epoch
	if !newcomer {
		s := add(1)
		waitFor(t, "the slave to see the master", func() bool { return s.Status().Master == m.Status().Instance }, els...)
	}

	cli, err := api.NewClient(&api.Config{Address: a.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	key := "baton/lease/" + backend.AppKey("acme", "billing", "role")
	p, _, err := cli.KV().Get(key, nil)
	if err != nil || p == nil || p.Session == "" {
		t.Fatalf("the role key %s: %+v, %v; want it locked by a session", key, p, err)
	}
	if err := a.DestroySession(t.Context(), p.Session); err != nil {
		t.Fatal(err)
	}
	if newcomer {
		add(1)
	}
	waitFor(t, "a master with a larger epoch", func() bool {
		n := master(els)
		return n != nil && n.Status().Epoch > before
	}, els...)
	ts.check(t, 2)
}

// Consul paused (SIGSTOP): the master cannot renew and stops calling
// itself master from TTL less the safety margin after its last successful
// renewal was sent, before its session could end on the server.
func TestConsulPausedMasterStepsDown(t *testing.T) {
	a := testenv.NewConsul(t)
	cfg := role.Config{HeartbeatInterval: 300 * time.Millisecond, HeartbeatExpiration: 1500 * time.Millisecond, SafetyMargin: 200 * time.Millisecond}
	s := &grantTimes{Store: consultest.Consul(t, a)}
	var ended atomic.Bool
	el, err := role.NewElector(s, id(t, 7600), cfg, quiet, role.OnElected(func(ctx context.Context) {
		<-ctx.Done()
		ended.Store(true)
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := el.Launch(); err != nil {
		t.Fatal(err)
	}
	defer stopAll(t, el)
	waitFor(t, "elected", el.IsMaster)
	if err := a.Pause(); err != nil {
		t.Fatal(err)
	}
	defer a.Resume()
	last := s.lastBefore(t, time.Now())
	time.Sleep(time.Until(last.Add(cfg.HeartbeatExpiration - cfg.SafetyMargin)))
	if el.IsMaster() {
		t.Fatalf("IsMaster is true %v after the last successful renewal was sent, past TTL %v less the safety margin %v",
			time.Since(last), cfg.HeartbeatExpiration, cfg.SafetyMargin)
	}
	waitFor(t, "tenure context cancelled", ended.Load)
}

// Nothing listens where the agent should be: the elector stays a slave,
// reports an error that names the address and says what to check, and
// stops cleanly (TestMain checks that no goroutine is left).
func TestConsulUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s, err := consulbackend.New(&api.Config{Address: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	el, err := role.NewElector(s, id(t, 7700), role.Config{HeartbeatInterval: 100 * time.Millisecond, HeartbeatExpiration: 10 * time.Second}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if err := el.Launch(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "an error naming the agent", func() bool {
		err := el.Status().LastError
		return err != nil && strings.Contains(err.Error(), addr) && strings.Contains(err.Error(), "is the Consul agent running")
	}, el)
	if el.IsMaster() {
		t.Error("master without a reachable store")
	}
	stopAll(t, el)
}

// A token the agent does not know: every call is refused, and the error
// names the agent and says to check the ACL token.
func TestConsulWrongToken(t *testing.T) {
	a := testenv.NewConsul(t, testenv.ConsulOptions{ACLMasterToken: "b2f5a1d4-7c1e-4c55-9f0e-1d2c3b4a5e6f"})
	s, err := consulbackend.New(&api.Config{Address: a.Addr(), Token: "00000000-0000-0000-0000-000000000001"},
		consulbackend.WithSessionTTLMin(a.SessionTTLMin()), consulbackend.WithoutRestartGuard())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	_, err = s.Acquire(ctx, backend.AppKey("acme", "billing", "role"), "me", time.Second, 0)
	if err == nil || !strings.Contains(err.Error(), "check consul.token") || !strings.Contains(err.Error(), a.Addr()) ||
		strings.Contains(err.Error(), "is the Consul agent running") {
		t.Fatalf("Acquire with a wrong token: %v; want an error that names the agent and the ACL token", err)
	}
	if !errors.Is(err, backend.ErrAuth) {
		t.Errorf("Acquire with a wrong token: %v; want an error wrapping backend.ErrAuth", err)
	}
	// With the right token the same store works.
	good := consultest.Consul(t, a)
	if _, err := good.Acquire(ctx, backend.AppKey("acme", "billing", "role"), "me", time.Second, 0); err != nil {
		t.Fatalf("Acquire with the management token: %v", err)
	}
}

// Electors on a Redis store announce themselves in Consul's catalog: each
// is a passing service tagged with its role, the tags follow a handover,
// and a stopped instance is deregistered. Members and IsMasterOf answer
// on a Consul store too.
func TestConsulServiceAnnouncesRole(t *testing.T) {
	a := testenv.NewConsul(t)
	r := testenv.NewRedis(t)
	cfg := role.Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatExpiration: 2 * time.Second}
	var els []*role.Elector
	for i := range 2 {
		iid := id(t, 7800+i)
		svc, err := consulbackend.NewService(&api.Config{Address: a.Addr()}, consulbackend.ServiceOptions{
			ID: iid.String(), Name: iid.App, Tenant: iid.Tenant, Address: iid.IP.String(), Port: int(iid.Port), CheckTTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		els = append(els, startElector(t, storetest.Redis(t, r), 7800+i, cfg, nil, role.WithAnnouncer(svc)))
	}
	defer stopAll(t, els...)
	cli, err := api.NewClient(&api.Config{Address: a.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	// catalog returns, for each registered instance of billing whose
	// check passes, its role tag.
	catalog := func() map[string]string {
		entries, _, err := cli.Health().Service("billing", "", true, nil)
		if err != nil {
			t.Fatal(err)
		}
		tags := map[string]string{}
		for _, e := range entries {
			if e.Service.Meta["tenant"] != "acme" || e.Service.Meta["instance-id"] != e.Service.ID {
				t.Fatalf("service %s has meta %v; want tenant acme and its instance ID", e.Service.ID, e.Service.Meta)
			}
			tags[e.Service.ID] = strings.Join(e.Service.Tags, ",")
		}
		return tags
	}
	var m *role.Elector
	waitFor(t, "a master", func() bool { m = master(els); return m != nil }, els...)
	other := els[0]
	if other == m {
		other = els[1]
	}
	waitFor(t, "the catalog to show the master and the slave", func() bool {
		c := catalog()
		return c[m.Status().Instance] == "master" && c[other.Status().Instance] == "slave"
	}, els...)

	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if ok, err := m.IsMasterOf(ctx, "billing", m.Status().Instance); err != nil || !ok {
		t.Errorf("IsMasterOf(master) = %v, %v", ok, err)
	}
	if err := m.Halt(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the catalog to show the new master alone", func() bool {
		c := catalog()
		return len(c) == 1 && c[other.Status().Instance] == "master"
	}, els...)
}

// Members and IsMasterOf read the Registry and the role key of a Consul
// store as of a Redis one.
func TestConsulMembers(t *testing.T) {
	a := testenv.NewConsul(t)
	cfg := role.Config{HeartbeatInterval: 200 * time.Millisecond, HeartbeatExpiration: 2 * time.Second}
	var els []*role.Elector
	for i := range 2 {
		els = append(els, startElector(t, consultest.Consul(t, a), 7900+i, cfg, nil))
	}
	defer stopAll(t, els...)
	var m *role.Elector
	waitFor(t, "a master", func() bool { m = master(els); return m != nil }, els...)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	waitFor(t, "both members listed, the master marked", func() bool {
		ms, err := els[0].Members(ctx)
		if err != nil || len(ms) != 2 {
			return false
		}
		masters := 0
		for _, x := range ms {
			if x.Master {
				masters++
				if x.ID != m.Status().Instance {
					return false
				}
			}
		}
		return masters == 1
	}, els...)
	for _, el := range els {
		ok, err := els[0].IsMasterOf(ctx, "billing", el.Status().Instance)
		if err != nil || ok != (el == m) {
			t.Errorf("IsMasterOf(%s) = %v, %v; want %v", el.Status().Instance, ok, err, el == m)
		}
	}
}
