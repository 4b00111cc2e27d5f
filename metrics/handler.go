package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves m's metrics in Prometheus's exposition format, for a
// program that keeps no registry of its own (metrics.New(nil)); a program
// that has one serves that, with promhttp. It serves m alone, with no Go
// runtime or process metrics.
func (m *Metrics) Handler() http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m) // a new registry: m cannot be there already
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
