// Package api is rollout's HTTP API: the JSON API that rollout scripts and
// the dashboard use to change features, evaluation for apps on their hot
// path (GET/POST /evaluate, OpenFeature's OFREP under /ofrep/v1), the sync
// API for apps that evaluate in their own process (/sync/v1, package
// client), and health, readiness and Prometheus metrics for operators.
// Handlers decode, call the rollout domain, and encode; every error is
// answered by one handler (errors.go) with the one status of its code, and
// the field it is about. Three packages hold handlers of routes declared
// here with the others: evaluation those apps call on their hot path,
// stream the streams (/sync/v1/stream, /api/events), experiments the
// metrics, tracked events and experiments. Every
// request is counted in the metrics and carries a request ID; which
// requests are also logged is Options.RequestLog's choice: by default
// changes, errors and slow requests, not evaluations.
//
// The files:
//
//   - server.go: Options, Server and New, which wires the routes and the
//     middleware.
//   - routes.go: the route table, each route declared once (method, path,
//     access, body limit, handler), and the middleware made from it.
//   - errors.go: the one error handler, the one map from error codes to
//     statuses, and the JSON decoder of request bodies.
//   - auth.go, access.go: tokens, sessions and what each route needs.
//   - observe.go, requestlog.go, metrics.go: request IDs, CORS of the
//     evaluation routes, the request log and the Prometheus metrics.
//   - bodies.go: how long a route waits for its request body.
//   - exposurelimit.go: the rate limit of POST /api/exposures and
//     /api/track.
//   - idempotency.go: Idempotency-Key on changes.
//   - features.go: features, their buckets, overrides, versions, history
//     and the guards of changes.
//   - rules.go, segments.go, userlists.go: targeting rules, segments and
//     user lists (with the bounds of their uploads).
//   - prerequisites.go: PUT /api/features/K/prerequisites.
//   - ramp.go: ramps of a feature's buckets.
//   - schedules.go: scheduled changes, and the parser of their bodies (ScheduledChange).
//   - plan.go: the planner of buckets' moves, and its bounds.
//   - ascode.go: rollouts as code: export, plan and apply of documents.
//   - requests.go: settings and change requests.
//   - tokens.go, sessions.go, webhooks.go, audit.go: API tokens, people's
//     single sign-on sessions, webhooks and the audit trail.
//   - health.go: GET /healthz and /readyz.
package api

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/api/evaluation"
	"github.com/rollout/rollout/api/stream"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/webhook"

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

	// MaxStreams bounds the open streams (GET /sync/v1/stream and
	// /api/events), and MaxStreamsPerToken those of one token (see package
	// stream); 0 means stream.DefaultMax, and half of MaxStreams.
	MaxStreams, MaxStreamsPerToken int

	// Plans bound the planner's work; the zero value is the defaults.
	Plans PlanLimits

	// Costly bounds the costly evaluations that run at once (see
	// package evaluation); the zero value is the defaults.
	Costly evaluation.CostlyLimits

	// Environments are the environments served, svc being one of them
	// (production's); nil: svc's alone, which cannot be changed.
	Environments *rollout.Environments

	// Webhooks are what /api/webhooks manages; nil: those routes answer
	// 404.
	Webhooks *webhook.Hooks
	// Experiments are those of each environment, which serve the routes
	// of metrics, tracked events and experiments (package experiments) and
	// record the users of each environment's evaluations; nil: none.
	Experiments *experiment.EnvironmentExperiments

	// Routes are served beside the API's own, with the same access
	// control, metrics and logs: the dashboard's (web.Routes).
	Routes []Route
}

// Server holds what the handlers need.
type Server struct {
	svc     *rollout.Service // the default environment's (production)
	envs    *rollout.Environments
	evals   evaluators // the evaluation servers of other environments
	log     *slog.Logger
	metrics *Metrics
	ready   func(context.Context) error
	eval    *evaluation.Server                 // the routes apps call on their hot path
	exps    *experiment.EnvironmentExperiments // nil: no experiments' routes
	streams *stream.Server                     // the streams' handlers and budget

	reqlog  requestLogger
	planner *planner
	auth    *Auth               // nil: everything is open
	hooks   *webhook.Hooks      // nil: no webhooks
	cors    echo.MiddlewareFunc // evaluationCORS
	csrf    *http.CrossOriginProtection
	// declared holds the declared routes, by method then pattern (see
	// unlisted).
	declared map[string]map[string]bool
}

// New returns the API's echo router over svc, serving the API's routes and
// opts.Routes (the dashboard's).
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
	s := &Server{svc: svc, exps: opts.Experiments, log: log, metrics: metrics, ready: opts.Ready, auth: opts.Auth, hooks: opts.Webhooks,
		reqlog: requestLogger{mode: opts.RequestLog, slow: slow, sample: uint64(max(opts.SampleEvaluations, 0))},
		cors:   evaluationCORS(), csrf: http.NewCrossOriginProtection(),
		declared: map[string]map[string]bool{}}
	s.planner = newPlanner(opts.Plans)
	streamOpts := stream.Options{Log: log, Registerer: metrics.reg, Max: opts.MaxStreams, PerToken: opts.MaxStreamsPerToken, Closing: opts.Closing}
	if opts.Auth != nil && opts.Auth.tokens != nil {
		streamOpts.Access = streamAccess{opts.Auth}
	}
	s.streams = stream.New(streamOpts)
	evalOpts := evaluation.Options{Metrics: evaluationMetrics{metrics}, Decode: decode,
		WriteWindow: s.streams.WriteWindow(), Costly: opts.Costly}
	s.evals.make = func(svc *rollout.Service) *evaluation.Server {
		opts := evalOpts
		if s.exps != nil {
			opts.Experiments = s.exps.Of(svc)
		}
		return evaluation.New(svc, opts)
	}
	s.eval = s.evals.make(svc)
	s.envs = opts.Environments
	if s.envs == nil {
		s.envs = rollout.OneEnvironment(svc)
	}
	metrics.server.Store(s)

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = errorHandler(log)
	e.Use(s.unlisted)
	s.register(e, s.routes(opts))
	s.register(e, opts.Routes)
	return e
}

// limitBody bounds the request body; reading past the bound fails with an
// error that decode answers with 413. The evaluation routes that read
// their body through a buffer (Route.BoundedRead) are bounded by its
// reading, without a reader of their own to allocate.
func limitBody(route Route) echo.MiddlewareFunc {
	bounded := route.BoundedRead
	limit := int64(MaxBodyBytes)
	if route.MaxBody > 0 {
		limit = route.MaxBody
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			if r.ContentLength > limit {
				return feature.Errorf(codeTooLarge, "the request body is larger than %d bytes", limit)
			}
			if r.Body != http.NoBody && r.Body != nil && !bounded { // nothing to bound in a GET's
				r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
			}
			return next(c)
		}
	}
}

// crossOrigin refuses state-changing requests that a browser sends from
// another site (cross-site request forgery), using the Sec-Fetch-Site and
// Origin headers browsers set. Requests without them, from curl or other
// programs, pass. Evaluation (/evaluate, /ofrep/) is left open to browsers
// on other sites: it changes nothing. POST /api/exposures is not: it adds
// counts, and only programs (package client) send it.
func (s *Server) crossOrigin(route Route) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if route.Access == auth.PermEvaluate {
			return next
		}
		return func(c echo.Context) error {
			if err := s.csrf.Check(c.Request()); err != nil {
				return feature.Errorf(codeForbidden, "cross-origin request refused: changes are accepted only from this server's own pages or from programs such as curl")
			}
			return next(c)
		}
	}
}
