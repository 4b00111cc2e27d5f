package consulbackend_test

import (
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/baton-go/baton/backend/consulbackend"
	"github.com/baton-go/baton/testkit/testenv"
)

// A Service registers with the role's tag, passes its check while
// announced, registers again when the agent forgot it (restarted), and
// is gone after Withdraw.
func TestServiceLifecycle(t *testing.T) {
	a := testenv.NewConsul(t)
	ctx := ctxT(t)
	svc, err := consulbackend.NewService(config(a), consulbackend.ServiceOptions{
		ID: "127.0.0.1:acme:billing:8080", Name: "billing", Tenant: "acme", Address: "127.0.0.1", Port: 8080})
	if err != nil {
		t.Fatal(err)
	}
	cli, err := api.NewClient(config(a))
	if err != nil {
		t.Fatal(err)
	}
	tags := func() []string {
		s, _, err := cli.Agent().Service("127.0.0.1:acme:billing:8080", nil)
		if err != nil {
			return nil
		}
		return s.Tags
	}
	for _, master := range []bool{false, false, true} {
		if err := svc.Announce(ctx, master); err != nil {
			t.Fatal(err)
		}
		want := consulbackend.TagSlave
		if master {
			want = consulbackend.TagMaster
		}
		if got := tags(); len(got) != 1 || got[0] != want {
			t.Fatalf("after Announce(master %v): tags %v, want [%s]", master, got, want)
		}
	}
	status, _, err := cli.Agent().AgentHealthServiceByID("127.0.0.1:acme:billing:8080")
	if err != nil || status != api.HealthPassing {
		t.Fatalf("health %q, %v; want passing", status, err)
	}

	if err := a.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := tags(); got != nil {
		t.Fatalf("the restarted agent still has the service: %v", got)
	}
	// The first Announce after the restart finds its check gone and
	// registers again at once.
	if err := svc.Announce(ctx, true); err != nil {
		t.Fatalf("first Announce after the restart: %v", err)
	}
	if got := tags(); len(got) != 1 || got[0] != consulbackend.TagMaster {
		t.Fatalf("after the restart: tags %v, want [master]", got)
	}

	if err := svc.Withdraw(ctx); err != nil {
		t.Fatal(err)
	}
	if got := tags(); got != nil {
		t.Fatalf("after Withdraw: tags %v, want no service", got)
	}
	if err := svc.Withdraw(ctx); err != nil {
		t.Errorf("a second Withdraw: %v", err)
	}
}

func TestNewServiceRejectsBadInput(t *testing.T) {
	for _, o := range []consulbackend.ServiceOptions{
		{Name: "billing", Port: 1},
		{ID: "x", Port: 1},
		{ID: "x", Name: "bill ing", Port: 1},
		{ID: "x", Name: "billing", Port: 0},
		{ID: "x", Name: "billing", Port: 70000},
		{ID: "x", Name: "billing", Port: 1, Address: "not-an-ip"},
		{ID: "x", Name: "billing", Port: 1, CheckTTL: 10},
	} {
		if _, err := consulbackend.NewService(nil, o); err == nil {
			t.Errorf("NewService(%+v) accepted", o)
		}
	}
}

// AdvertiseAddr reads the agent's LAN address, for instanceid.
func TestAdvertiseAddr(t *testing.T) {
	a := testenv.NewConsul(t)
	got, err := consulbackend.AdvertiseAddr(ctxT(t), config(a))
	if err != nil || got != "127.0.0.1" {
		t.Fatalf("AdvertiseAddr = %q, %v; want 127.0.0.1", got, err)
	}
}
