package metrics_test

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/baton-go/baton/instanceid"
	"github.com/baton-go/baton/metrics"
	"github.com/baton-go/baton/role"
)

// Handler serves the metrics of a Metrics made without a registry.
func TestHandler(t *testing.T) {
	m, err := metrics.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := instanceid.New("127.0.0.1", "acme", "billing", 8080)
	if err != nil {
		t.Fatal(err)
	}
	observe := m.RoleObserver(id)
	observe(role.Event{Kind: role.EventElected, Epoch: 42})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Result().Body)
	if rec.Code != 200 {
		t.Fatalf("GET /metrics: %d %s", rec.Code, body)
	}
	for _, want := range []string{
		`baton_role_is_master{app="billing",instance_id="127.0.0.1:acme:billing:8080",tenant="acme"} 1`,
		`baton_role_epoch{app="billing",instance_id="127.0.0.1:acme:billing:8080",tenant="acme"} 42`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("GET /metrics lacks %q:\n%s", want, body)
		}
	}
}
