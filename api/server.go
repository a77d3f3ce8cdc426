// Package api is rollout's HTTP API: evaluation for apps on their hot path
// (GET/POST /evaluate, and OpenFeature's OFREP under /ofrep/v1), the sync API
// for apps that evaluate in their own process (/sync/v1, package client), the JSON API
// that rollout scripts and the dashboard use to change features, and health,
// readiness and Prometheus metrics for operators. Handlers decode, call the
// rollout domain, and encode. Every request is counted in the metrics and
// carries a request ID; which requests are also logged is Options.RequestLog's
// choice: by default changes, errors and slow requests, not evaluations.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/rollout/rollout/rollout"

	_ "net/http/pprof" // registers /debug/pprof/ on http.DefaultServeMux, served only with Options.Pprof
)

// MaxBodyBytes bounds every request body.
const MaxBodyBytes = 1 << 20

// Options configure the API.
type Options struct {
	Logger *slog.Logger // nil: discard
	// Metrics are served at GET /metrics; nil: New makes its own.
	Metrics *Metrics
	// Ready reports whether the database can be reached, for GET /readyz;
	// nil: it always can.
	Ready func(context.Context) error
	// Auth checks tokens and dashboard sessions; nil: everything is open.
	Auth *Auth
	// Pprof serves Go's profiler under /debug/pprof/ (admin tokens only,
	// once tokens exist).
	Pprof bool
	// Closing, when closed, ends long-lived answers (the sync stream), so
	// that a graceful shutdown need not wait for them; nil: never.
	Closing <-chan struct{}
	// RequestLog chooses the requests logged one line each; the zero value
	// is LogChanges.
	RequestLog RequestLog
	// SlowRequest is the duration over which a request is logged (unless
	// RequestLog is LogNone); 0 means DefaultSlowRequest.
	SlowRequest time.Duration
	// SampleEvaluations logs about one evaluation request in this many,
	// beside those RequestLog logs (errors, slow ones); 0 logs none.
	SampleEvaluations int
	// ExposureBatchRate and ExposureBatchBurst bound the batches of
	// POST /api/exposures each token sends this instance, a second and at
	// once; 0 means DefaultExposureBatchRate and DefaultExposureBatchBurst.
	ExposureBatchRate  float64
	ExposureBatchBurst int

	// MaxStreams bounds the open streams (GET /sync/v1/stream), and
	// MaxStreamsPerToken those of one token (see streams.go); 0 means
	// DefaultMaxStreams, and half of MaxStreams.
	MaxStreams, MaxStreamsPerToken int

	// Plans bound the planner's work; the zero value is the defaults.
	Plans PlanLimits
}

// Server holds what the handlers need.
type Server struct {
	svc     *rollout.Service
	log     *slog.Logger
	metrics *Metrics
	ready   func(context.Context) error
	closing <-chan struct{}
	snap    atomic.Pointer[snapshotState]
	sync    syncCache
	streams *streams

	events  changeEvents
	reqlog  requestLogger
	planner *planner
	// steps are what every request goes through; composed holds the
	// routes, by pattern then method, that have them composed already.
	steps    []step
	composed map[string][]string
}

// routeInfo is the route a request matched: its method, the pattern echo
// matched ("" for none) and the permission it needs.
type routeInfo struct {
	method, pattern string
	need            rollout.Permission
	// composed is set for a route whose steps are composed once, when it
	// is registered, rather than for each request: its steps may keep
	// what they look up.
	composed bool
}

func routeOf(method, pattern string) routeInfo {
	return routeInfo{method: method, pattern: pattern, need: accessOf(method, pattern)}
}

// A step is a middleware made for one route.
type step func(route routeInfo, next echo.HandlerFunc) echo.HandlerFunc

// compose returns h with the steps around it, for route.
func (s *Server) compose(route routeInfo, h echo.HandlerFunc) echo.HandlerFunc {
	for i := len(s.steps) - 1; i >= 0; i-- {
		h = s.steps[i](route, h)
	}
	return h
}

// New returns the API's echo router over svc. Other packages (the dashboard)
// may add their routes to it.
func New(svc *rollout.Service, opts Options) *echo.Echo {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	metrics := opts.Metrics
	if metrics == nil {
		metrics = NewMetrics()
	}
	slow := opts.SlowRequest
	if slow <= 0 {
		slow = DefaultSlowRequest
	}
	s := &Server{svc: svc, log: log, metrics: metrics, ready: opts.Ready, closing: opts.Closing,
		reqlog: requestLogger{mode: opts.RequestLog, slow: slow, sample: uint64(max(opts.SampleEvaluations, 0))}}
	s.planner = newPlanner(opts.Plans)
	s.snapshotState()
	metrics.server.Store(s)
	s.streams = newStreams(opts, log, metrics)

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(log)
	// Every request goes through these steps, first to last. Each is made
	// for the route it serves (its method, pattern and permission), so
	// that no step looks the route's permission up per request. The apps'
	// routes (evaluation, OFREP, sync) have their steps composed once, when
	// registered (s.route); every other route, the dashboard's included,
	// gets them from s.middleware, composed anew for each request as echo
	// does with e.Use.
	recoverStep := middleware.RecoverWithConfig(middleware.RecoverConfig{DisablePrintStack: true})
	s.steps = []step{
		s.observe,
		func(_ routeInfo, next echo.HandlerFunc) echo.HandlerFunc { return recoverStep(next) },
		evaluationCORS(),
		bodies,
		limitBody,
		crossOrigin(),
	}
	if opts.Auth != nil {
		s.steps = append(s.steps, opts.Auth.step)
	}
	s.steps = append(s.steps, s.streams.step)
	s.steps = append(s.steps, s.idempotency)
	e.Use(s.middleware)
	if opts.Pprof {
		e.GET("/debug/pprof/*", echo.WrapHandler(http.DefaultServeMux))
	}

	s.composed = map[string][]string{}
	s.route(e, http.MethodGet, "/evaluate", s.evaluateOne)
	s.route(e, http.MethodPost, "/evaluate", s.evaluateMany)
	s.route(e, http.MethodPost, "/ofrep/v1/evaluate/flags/:key", s.ofrepEvaluate)
	s.route(e, http.MethodPost, "/ofrep/v1/evaluate/flags", s.ofrepEvaluateAll)
	s.route(e, http.MethodGet, "/sync/v1/snapshot", s.syncSnapshot)
	s.route(e, http.MethodGet, "/sync/v1/stream", s.syncStream)
	e.Match([]string{http.MethodGet, http.MethodHead}, "/healthz", s.healthz)
	e.Match([]string{http.MethodGet, http.MethodHead}, "/readyz", s.readyz)
	e.GET("/metrics", echo.WrapHandler(metrics.Handler()))

	g := e.Group("/api")
	g.GET("/features", s.listFeatures)
	g.POST("/features", s.createFeature)
	g.GET("/features/:key", s.getFeature)
	g.PATCH("/features/:key", s.patchFeature)
	g.DELETE("/features/:key", s.deleteFeature)
	g.POST("/features/:key/buckets", s.addBucket)
	g.PUT("/features/:key/buckets", s.setBuckets)
	g.POST("/features/:key/plan", s.plan)
	g.PUT("/features/:key/buckets/:name", s.updateBucket)
	g.DELETE("/features/:key/buckets/:name", s.removeBucket)
	g.PUT("/features/:key/overrides/:user", s.setOverride)
	g.DELETE("/features/:key/overrides/:user", s.clearOverride)
	g.POST("/features/:key/preview", s.preview)
	g.POST("/features/:key/reshuffle", s.reshuffle)
	g.POST("/features/:key/rollback", s.rollback)
	g.GET("/features/:key/versions", s.listVersions)
	g.GET("/changes", s.listChanges)
	g.GET("/features/:key/versions/:version", s.getVersion)
	g.GET("/features/:key/users/:user", s.userHistory)
	g.GET("/features/:key/exposures", s.exposures)
	s.route(e, http.MethodPost, "/api/exposures", exposureLimit(opts.ExposureBatchRate, opts.ExposureBatchBurst, s.addExposures))
	g.GET("/ramps", s.listRamps)
	g.GET("/features/:key/ramps", s.listRamps)
	g.POST("/features/:key/ramps", s.createRamp)
	g.GET("/features/:key/ramps/:id", s.getRamp)
	g.POST("/features/:key/ramps/:id/pause", s.pauseRamp)
	g.POST("/features/:key/ramps/:id/resume", s.resumeRamp)
	g.POST("/features/:key/ramps/:id/cancel", s.cancelRamp)
	return e
}

// route registers h for method and path with the steps composed around it
// once, rather than for every request.
func (s *Server) route(e *echo.Echo, method, path string, h echo.HandlerFunc) {
	route := routeOf(method, path)
	route.composed = true
	e.Add(method, path, s.compose(route, h))
	s.composed[path] = append(s.composed[path], method)
}

// middleware runs the steps around the request's handler, unless route
// composed them already: a route registered any other way, or none, gets
// them here, for the pattern echo matched (never the path's text).
func (s *Server) middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		method, pattern := c.Request().Method, c.Path()
		if slices.Contains(s.composed[pattern], method) {
			return next(c)
		}
		return s.compose(routeOf(method, pattern), next)(c)
	}
}

// limitBody bounds the request body; reading past the bound fails with an
// error that decode answers with 413. The evaluation routes that read
// their body through a buffer (readsBounded) are bounded by its reading,
// without a reader of their own to allocate.
func limitBody(route routeInfo, next echo.HandlerFunc) echo.HandlerFunc {
	bounded := readsBounded[route.method+" "+route.pattern]
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength > MaxBodyBytes {
			return rollout.Errorf(codeTooLarge, "the request body is larger than %d bytes", MaxBodyBytes)
		}
		if r.Body != http.NoBody && r.Body != nil && !bounded { // nothing to bound in a GET's
			r.Body = http.MaxBytesReader(c.Response(), r.Body, MaxBodyBytes)
		}
		return next(c)
	}
}

// readsBounded are the routes whose handlers read the body with
// buffer.readFrom, which stops past MaxBodyBytes.
var readsBounded = map[string]bool{
	"POST /evaluate":                     true,
	"POST /ofrep/v1/evaluate/flags/:key": true,
	"POST /ofrep/v1/evaluate/flags":      true,
}

// crossOrigin refuses state-changing requests that a browser sends from
// another site (cross-site request forgery), using the Sec-Fetch-Site and
// Origin headers browsers set. Requests without them, from curl or other
// programs, pass. Evaluation (/evaluate, /ofrep/) and sync are left open to
// browsers on other sites: they change nothing. POST /api/exposures is not:
// it adds counts, and only programs (package client) send it.
func crossOrigin() step {
	p := http.NewCrossOriginProtection()
	return func(route routeInfo, next echo.HandlerFunc) echo.HandlerFunc {
		if route.need == rollout.PermEvaluate && route.pattern != "/api/exposures" {
			return next
		}
		return func(c echo.Context) error {
			if err := p.Check(c.Request()); err != nil {
				return rollout.Errorf(codeForbidden, "cross-origin request refused: changes are accepted only from this server's own pages or from programs such as curl")
			}
			return next(c)
		}
	}
}
