package api

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rollout/rollout/api/internal/readmostly"
	"github.com/rollout/rollout/rollout/feature"
)

// Metrics are the service's Prometheus metrics, in a registry of their own,
// served by the API at GET /metrics. Create them with NewMetrics before the
// service when the store's errors are to be counted in their Registry (see
// package internal/storemetrics), and give them to New in Options; one
// Metrics serves one API. Safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	evaluations *prometheus.CounterVec   // feature, bucket, reason
	requests    *prometheus.CounterVec   // method, route, status
	latency     *prometheus.HistogramVec // method, route
	changes     *prometheus.CounterVec   // kind

	// The children of the vectors above, by label values: looking a child
	// up allocates nothing and takes no lock, unlike WithLabelValues.
	evalChildren    *readmostly.Map[evalLabels, prometheus.Counter]
	requestChildren *readmostly.Map[requestLabels, requestMetrics]

	server atomic.Pointer[Server] // the API whose snapshot the gauges show
}

type evalLabels struct{ feature, bucket, reason string }

type requestLabels struct {
	method, route string
	status        int
}

// requestMetrics are what one request counts: the request, by status, and
// its latency, by route, found with one look-up.
type requestMetrics struct {
	requests prometheus.Counter
	latency  prometheus.Observer
}

// latencyBuckets suit an API whose evaluations take microseconds and whose
// changes write to SQLite in milliseconds.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// NewMetrics returns the service's metrics, with the Go runtime's and the
// process's, in a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.evaluations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollout_evaluations_total",
		Help: "Evaluations served, by feature, bucket (empty: no bucket) and reason (ring, override, disabled).",
	}, []string{"feature", "bucket", "reason"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollout_http_requests_total",
		Help: "HTTP requests answered, by method, route pattern and status.",
	}, []string{"method", "route", "status"})
	m.latency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rollout_http_request_duration_seconds",
		Help:    "Time to answer an HTTP request, by method and route pattern.",
		Buckets: latencyBuckets,
	}, []string{"method", "route"})
	m.changes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollout_changes_applied_total",
		Help: "Changes applied to features (dry runs excluded), by kind.",
	}, []string{"kind"})
	m.evalChildren = readmostly.New(func(l evalLabels) prometheus.Counter {
		return m.evaluations.WithLabelValues(l.feature, l.bucket, l.reason)
	})
	m.requestChildren = readmostly.New(func(l requestLabels) requestMetrics {
		return requestMetrics{
			requests: m.requests.WithLabelValues(l.method, l.route, strconv.Itoa(l.status)),
			latency:  m.latency.WithLabelValues(l.method, l.route),
		}
	})
	snapshotFeatures := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rollout_snapshot_features",
		Help: "Features in the snapshot that evaluations read.",
	}, func() float64 {
		return m.snapshot(func(snap *feature.Snapshot, _ uint64, _ time.Time) float64 { return float64(snap.Len()) })
	})
	snapshotVersion := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rollout_snapshot_version",
		Help: "Snapshots this process has served, the one loaded at start included: one more with every applied change.",
	}, func() float64 {
		return m.snapshot(func(_ *feature.Snapshot, seq uint64, _ time.Time) float64 { return float64(seq) })
	})
	snapshotAge := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rollout_snapshot_age_seconds",
		Help: "Seconds since the snapshot that evaluations read was swapped in (or loaded at start).",
	}, func() float64 {
		return m.snapshot(func(_ *feature.Snapshot, _ uint64, seen time.Time) float64 { return time.Since(seen).Seconds() })
	})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.evaluations, m.requests, m.latency, m.changes,
		snapshotFeatures, snapshotVersion, snapshotAge,
	)
	return m
}

// Handler serves the metrics in the Prometheus exposition formats.
// A scrape first takes in the newest snapshot, so that the series of
// features deleted by then are gone from it.
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := m.server.Load(); s != nil {
			s.eval.Snapshot()
		}
		h.ServeHTTP(w, r)
	})
}

// forgetFeatures deletes the evaluation series of the features keys, which
// were deleted, so that a service whose features come and go does not keep
// their series for ever. An evaluation still under way on an older snapshot
// may count once more, in a series of its own.
func (m *Metrics) forgetFeatures(keys []string) {
	if len(keys) == 0 {
		return
	}
	gone := make(map[string]bool, len(keys))
	for _, k := range keys {
		gone[k] = true
	}
	m.evalChildren.DeleteIf(func(l evalLabels) bool { return gone[l.feature] })
	for _, k := range keys {
		m.evaluations.DeletePartialMatch(prometheus.Labels{"feature": k})
	}
}

// Registry returns the registry the metrics are in, for other packages to
// add theirs.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

func (m *Metrics) snapshot(f func(snap *feature.Snapshot, seq uint64, seen time.Time) float64) float64 {
	s := m.server.Load()
	if s == nil {
		return 0
	}
	return f(s.eval.Snapshot())
}

// evaluationMetrics are the metrics package evaluation's Server counts
// (evaluation.Metrics): comparable, and equal for the same Metrics.
type evaluationMetrics struct{ m *Metrics }

func (em evaluationMetrics) Evaluations(key, bucket, reason string) prometheus.Counter {
	return em.m.evalChildren.Get(evalLabels{key, bucket, reason})
}

func (em evaluationMetrics) ForgetFeatures(keys []string) { em.m.forgetFeatures(keys) }

// answered counts one HTTP request. route is the pattern the request
// matched ("" when none did: "unmatched"), so that the labels stay few.
func (m *Metrics) answered(method, route string, status int, d time.Duration) {
	m.requestMetrics(method, route, status).observe(d)
}

func (m *Metrics) requestMetrics(method, route string, status int) requestMetrics {
	method = knownMethod(method)
	if route == "" {
		route = "unmatched"
	}
	return m.requestChildren.Get(requestLabels{method, route, status})
}

func (rm requestMetrics) observe(d time.Duration) {
	rm.requests.Inc()
	rm.latency.Observe(d.Seconds())
}

// answeredOK is answered for a 200 answer of a declared route (see
// Server.register), whose metrics ok keeps once looked up.
func (m *Metrics) answeredOK(ok *atomic.Pointer[requestMetrics], method, route string, d time.Duration) {
	rm := ok.Load()
	if rm == nil {
		v := m.requestMetrics(method, route, http.StatusOK)
		rm = &v
		ok.Store(rm)
	}
	rm.observe(d)
}

// CountLogDrops counts the log lines w dropped (a *logwriter.Writer, say)
// in rollout_log_lines_dropped_total. Call it once.
func (m *Metrics) CountLogDrops(w interface{ Dropped() uint64 }) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "rollout_log_lines_dropped_total",
		Help: "Log lines dropped because the log's destination could not keep up (its queue was full) or failed.",
	}, func() float64 { return float64(w.Dropped()) }))
}

// changed counts one applied change.
func (m *Metrics) changed(kind string) { m.changes.WithLabelValues(kind).Inc() }

func knownMethod(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}
