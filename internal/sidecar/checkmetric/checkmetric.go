// Package checkmetric is raterlimiter_checks_total, the one family of
// series that counts every check the sidecar answers, whichever way it
// arrived: each face (the HTTP API's single checks, its batches, /auth,
// the Envoy RLS) registers a Vec of its own, labelled with its via, and
// the registry gathers them as one family. Alerts, the Grafana dashboard
// and /dashboard read this family only.
package checkmetric

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	rl "github.com/raterlimiter/raterlimiter"
	"github.com/raterlimiter/raterlimiter/internal/check"
)

// Name and Help are the family's; every Vec has them, as the registry
// requires of collectors that share a name.
const (
	Name = "raterlimiter_checks_total"
	Help = "Checks answered, by the way they arrived (via: http, batch, auth, rls), algorithm and result (allowed, denied, invalid, unavailable)."
)

// The ways a check arrives, the values of the label via.
const (
	ViaHTTP  = "http"  // GET or POST /check_rate
	ViaBatch = "batch" // one check of POST /check_rates
	ViaAuth  = "auth"  // one matched policy of /auth
	ViaRLS   = "rls"   // one descriptor of Envoy's ShouldRateLimit
)

// Result is what became of a check, the label result.
type Result uint8

// The results.
const (
	Allowed Result = iota
	Denied
	// Invalid is a request refused as malformed: counted once, whatever
	// the number of checks it meant to carry.
	Invalid
	// Unavailable is a check the backend did not answer (a 503, gRPC
	// Unavailable).
	Unavailable
	NumResults
)

// ResultNames are the label values of the results, by Result.
var ResultNames = [NumResults]string{"allowed", "denied", "invalid", "unavailable"}

// Vec is one via's share of the family, with every (algo, result) child
// resolved at creation, so counting touches no map. It is a
// prometheus.Collector, and safe for concurrent use.
type Vec struct {
	vec *prometheus.CounterVec
	c   [rl.Leaky + 1][NumResults]prometheus.Counter // by algorithm, as check.ValidAlgo bounds them
}

// New returns via's Vec. Its series exist, at zero, from the start, so a
// rate over them is defined before the first check.
func New(via string) *Vec {
	v := &Vec{vec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: Name, Help: Help, ConstLabels: prometheus.Labels{"via": via},
	}, []string{"algo", "result"})}
	for _, a := range check.Algos {
		for r := range NumResults {
			v.c[a][r] = v.vec.WithLabelValues(a.String(), ResultNames[r])
		}
	}
	return v
}

// Inc counts one check of algorithm a with result r (an invalid a counts
// as fixed: the request did not say a valid one).
func (v *Vec) Inc(a rl.Algo, r Result) {
	if !check.ValidAlgo(a) {
		a = rl.Fixed
	}
	v.c[a][r].Inc()
}

// Totals returns the checks answered allowed or denied, and the denied
// ones alone: what /dashboard draws.
func (v *Vec) Totals() (checks, denied float64) {
	var m dto.Metric
	for _, a := range check.Algos {
		for _, r := range []Result{Allowed, Denied} {
			m.Reset()
			if err := v.c[a][r].Write(&m); err != nil {
				continue
			}
			n := m.GetCounter().GetValue()
			checks += n
			if r == Denied {
				denied += n
			}
		}
	}
	return checks, denied
}

// Describe implements prometheus.Collector.
func (v *Vec) Describe(ch chan<- *prometheus.Desc) { v.vec.Describe(ch) }

// Collect implements prometheus.Collector.
func (v *Vec) Collect(ch chan<- prometheus.Metric) { v.vec.Collect(ch) }

var _ prometheus.Collector = (*Vec)(nil)
