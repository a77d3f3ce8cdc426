package api

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/rollout/rollout/api/evaluation"
	"github.com/rollout/rollout/api/experiments"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/document"
)

// Route is one route of the server, declared once: what it serves, what it
// needs and how it treats its request. New registers the API's routes and
// those given in Options.Routes (the dashboard's, from package web) with
// the middleware each needs, made from this declaration: access, body
// window and bound, change log, streams' budget, and the metrics and log
// line every request gets.
//
// A Method of echo.RouteNotFound declares the answer to the methods Path
// does not serve (404 rather than echo's 405), as echo's groups do; such a
// request is served as an undeclared route (see Server.unlisted), with
// only the route's own Middleware added.
type Route struct {
	Method, Path string // Path is an echo route pattern
	// Access is what a token needs to use the route (Public: nothing).
	// It is decided by the pattern echo matched, never the request path's
	// text, so that escapes such as %2F, dot segments or doubled slashes
	// cannot make a request look like another route.
	Access auth.Permission
	// QueryAccess, when not nil, is what a token needs instead of Access
	// when the request's query turns its parameter on (any value but ""
	// and "false"): DELETE /api/features/K?purge=true needs an admin.
	QueryAccess *QueryAccess
	// Change names the kind of change the route applies, for the change
	// log and rollout_changes_applied_total ("": none, or "other").
	Change string
	// AppBody marks a route taking an app's small body: it is waited for
	// only a short window (see bodies.go). Routes of GET, HEAD and
	// OPTIONS take no body; the others wait longer for theirs.
	AppBody bool
	// BoundedRead marks a handler that reads its body through a buffer
	// that stops past evaluation.MaxEvaluateBodyBytes (its MaxBody): the
	// route needs no reader of its own to bound the body.
	BoundedRead bool
	// MaxBody bounds the route's request body, in bytes; 0 means
	// MaxBodyBytes.
	MaxBody int64
	// Stream marks a route whose answer is a stream, with a budget of its
	// own (package stream's Server.Admit).
	Stream bool
	// SignIn marks a dashboard page: a GET without credentials is
	// redirected to the sign-in page rather than answered 401.
	SignIn bool
	// Unresolved, when not nil, answers a request whose environment does
	// not resolve (an unknown ?env=) in the route's own form: a dashboard
	// page's HTML rather than the API's JSON.
	Unresolved echo.HandlerFunc
	// Handler answers the route's requests, inside Middleware, which runs
	// after the API's own (access included).
	Handler    echo.HandlerFunc
	Middleware []echo.MiddlewareFunc
}

// QueryAccess is a permission a query parameter calls for (see
// Route.QueryAccess).
type QueryAccess struct {
	Param  string
	Access auth.Permission
}

// on reports whether the request's query turns q's parameter on.
func (q *QueryAccess) on(r *http.Request) bool {
	if q == nil {
		return false
	}
	v := r.URL.Query().Get(q.Param)
	return v != "" && v != "false"
}

// routes declares the API's routes.
func (s *Server) routes(opts Options) []Route {
	exposures := exposureLimit(opts.ExposureBatchRate, opts.ExposureBatchBurst)
	lists := newListUploads()
	routes := []Route{
		{Method: http.MethodGet, Path: "/healthz", Access: Public, Handler: s.healthz},
		{Method: http.MethodHead, Path: "/healthz", Access: Public, Handler: s.healthz},
		{Method: http.MethodGet, Path: "/readyz", Access: Public, Handler: s.readyz},
		{Method: http.MethodHead, Path: "/readyz", Access: Public, Handler: s.readyz},

		// Apps' evaluation.
		{Method: http.MethodGet, Path: "/evaluate", Access: auth.PermEvaluate, Handler: s.evaluate((*evaluation.Server).EvaluateOne)},
		{Method: http.MethodPost, Path: "/evaluate", Access: auth.PermEvaluate, AppBody: true, BoundedRead: true, MaxBody: evaluation.MaxEvaluateBodyBytes, Handler: s.evaluate((*evaluation.Server).EvaluateMany)},
		{Method: http.MethodPost, Path: "/ofrep/v1/evaluate/flags/:key", Access: auth.PermEvaluate, AppBody: true, BoundedRead: true, MaxBody: evaluation.MaxEvaluateBodyBytes, Handler: s.evaluate((*evaluation.Server).OFREPEvaluate)},
		{Method: http.MethodPost, Path: "/ofrep/v1/evaluate/flags", Access: auth.PermEvaluate, AppBody: true, BoundedRead: true, MaxBody: evaluation.MaxEvaluateBodyBytes, Handler: s.evaluate((*evaluation.Server).OFREPEvaluateAll)},
		// The sync API and the counts of apps that evaluate in process
		// (package client): tokens of the sdk role, not the client role of
		// browsers. The snapshot holds every feature's configuration.
		{Method: http.MethodGet, Path: "/sync/v1/snapshot", Access: auth.PermSync, Handler: func(c echo.Context) error { return s.evalIn(c).SyncSnapshot(c) }},
		{Method: http.MethodGet, Path: "/sync/v1/stream", Access: auth.PermSync, Stream: true, Handler: func(c echo.Context) error { return s.streams.Sync(c, s.in(c)) }},
		{Method: http.MethodPost, Path: "/api/exposures", Access: auth.PermSync, AppBody: true, Handler: func(c echo.Context) error { return s.evalIn(c).AddExposures(c) },
			Middleware: []echo.MiddlewareFunc{exposures}},

		{Method: http.MethodGet, Path: "/metrics", Access: auth.PermRead, Handler: echo.WrapHandler(s.metrics.Handler())},

		// Features, their history and ramps.
		{Method: http.MethodGet, Path: "/api/features", Access: auth.PermRead, Handler: s.listFeatures}, // ?archived=true: the archived ones
		{Method: http.MethodPost, Path: "/api/features", Access: auth.PermWrite, Change: "create", Handler: s.createFeature},
		{Method: http.MethodGet, Path: "/api/features/:key", Access: auth.PermRead, Handler: s.getFeature},
		{Method: http.MethodPatch, Path: "/api/features/:key", Access: auth.PermWrite, Change: "patch", Handler: s.patchFeature},
		// DELETE archives (as POST …/archive does); with ?purge=true it
		// purges an archived feature, which only an admin may.
		{Method: http.MethodDelete, Path: "/api/features/:key", Access: auth.PermWrite, Change: "archive", Handler: s.deleteFeature,
			QueryAccess: &QueryAccess{Param: "purge", Access: auth.PermAdmin}},
		{Method: http.MethodPost, Path: "/api/features/:key/archive", Access: auth.PermWrite, Change: "archive", Handler: s.archiveFeature},
		{Method: http.MethodPost, Path: "/api/features/:key/restore", Access: auth.PermWrite, Change: "restore", Handler: s.restoreFeature},
		{Method: http.MethodPost, Path: "/api/features/:key/buckets", Access: auth.PermWrite, Change: "add_bucket", Handler: s.addBucket},
		{Method: http.MethodPut, Path: "/api/features/:key/buckets", Access: auth.PermWrite, Handler: s.setBuckets},
		{Method: http.MethodPost, Path: "/api/features/:key/plan", Access: auth.PermRead, Handler: s.plan}, // changes nothing
		{Method: http.MethodPut, Path: "/api/features/:key/buckets/:name", Access: auth.PermWrite, Change: "update_bucket", Handler: s.updateBucket},
		{Method: http.MethodDelete, Path: "/api/features/:key/buckets/:name", Access: auth.PermWrite, Change: "remove_bucket", Handler: s.removeBucket},
		{Method: http.MethodPut, Path: "/api/features/:key/overrides/:user", Access: auth.PermWrite, Change: "set_override", Handler: s.setOverride},
		{Method: http.MethodDelete, Path: "/api/features/:key/overrides/:user", Access: auth.PermWrite, Change: "clear_override", Handler: s.clearOverride},
		{Method: http.MethodPut, Path: "/api/features/:key/rules", Access: auth.PermWrite, Change: "set_rules", Handler: s.setRules},
		{Method: http.MethodPut, Path: "/api/features/:key/prerequisites", Access: auth.PermWrite, Change: "set_prerequisites", MaxBody: maxPrerequisitesBody, Handler: s.setPrerequisites},
		{Method: http.MethodPost, Path: "/api/features/:key/preview", Access: auth.PermRead, Handler: s.preview}, // changes nothing
		{Method: http.MethodPost, Path: "/api/features/:key/reshuffle", Access: auth.PermWrite, Change: "reshuffle", Handler: s.reshuffle},
		{Method: http.MethodPost, Path: "/api/features/:key/rollback", Access: auth.PermWrite, Change: "rollback", Handler: s.rollback},
		{Method: http.MethodGet, Path: "/api/features/:key/versions", Access: auth.PermRead, Handler: s.listVersions},
		{Method: http.MethodGet, Path: "/api/changes", Access: auth.PermRead, Handler: s.listChanges},
		// The audit trail: pages of JSON, or JSON lines (Accept:
		// application/x-ndjson), at most maxAuditExport a request.
		{Method: http.MethodGet, Path: "/api/audit", Access: auth.PermRead, Handler: s.listAudit},
		// API tokens: only admins see or change them.
		{Method: http.MethodGet, Path: "/api/tokens", Access: auth.PermAdmin, Handler: s.listTokens},
		{Method: http.MethodPost, Path: "/api/tokens", Access: auth.PermAdmin, Handler: s.createToken,
			Middleware: []echo.MiddlewareFunc{tokenCreateLimit()}},
		{Method: http.MethodDelete, Path: "/api/tokens/:id", Access: auth.PermAdmin, Handler: s.revokeToken},
		// People's single sign-on sessions (sessions.go): admins list and revoke them.
		{Method: http.MethodGet, Path: "/api/sessions", Access: auth.PermAdmin, Handler: s.listSessions},
		{Method: http.MethodDelete, Path: "/api/sessions/:id", Access: auth.PermAdmin, Handler: s.revokeSession},
		// Organisation settings: everyone who reads features reads them,
		// admins change them.
		{Method: http.MethodGet, Path: "/api/settings", Access: auth.PermRead, Handler: s.getSettings},
		{Method: http.MethodPut, Path: "/api/settings", Access: auth.PermAdmin, Handler: s.putSettings},
		// Change requests: editors' changes where approvals are required.
		{Method: http.MethodGet, Path: "/api/requests", Access: auth.PermRead, Handler: s.listRequests},
		{Method: http.MethodGet, Path: "/api/requests/:id", Access: auth.PermRead, Handler: s.getRequest},
		{Method: http.MethodPost, Path: "/api/requests/:id/approve", Access: auth.PermWrite, Change: "approve", Handler: s.approveRequest},
		{Method: http.MethodPost, Path: "/api/requests/:id/reject", Access: auth.PermWrite, Handler: s.rejectRequest},
		{Method: http.MethodPost, Path: "/api/requests/:id/cancel", Access: auth.PermWrite, Handler: s.cancelRequest},
		// Webhooks: only admins see or change them (their URLs reach
		// wherever the server can connect).
		{Method: http.MethodGet, Path: "/api/webhooks", Access: auth.PermAdmin, Handler: s.listWebhooks},
		{Method: http.MethodPost, Path: "/api/webhooks", Access: auth.PermAdmin, Handler: s.createWebhook},
		{Method: http.MethodGet, Path: "/api/webhooks/:id", Access: auth.PermAdmin, Handler: s.getWebhook},
		{Method: http.MethodDelete, Path: "/api/webhooks/:id", Access: auth.PermAdmin, Handler: s.deleteWebhook},
		{Method: http.MethodPost, Path: "/api/webhooks/:id/resume", Access: auth.PermAdmin, Handler: s.resumeWebhook},
		// The dashboard's stream of changes (package stream): sessions and read tokens.
		{Method: http.MethodGet, Path: "/api/events", Access: auth.PermRead, Stream: true, Handler: func(c echo.Context) error { return s.streams.Dashboard(c, s.in(c)) }},
		{Method: http.MethodGet, Path: "/api/features/:key/versions/:version", Access: auth.PermRead, Handler: s.getVersion},
		{Method: http.MethodGet, Path: "/api/features/:key/users/:user", Access: auth.PermRead, Handler: s.userHistory},
		{Method: http.MethodGet, Path: "/api/features/:key/exposures", Access: auth.PermRead, Handler: s.exposures},
		// Segments of targeting rules (segments.go).
		{Method: http.MethodGet, Path: "/api/segments", Access: auth.PermRead, Handler: s.listSegments},
		// POST and PUT take user lists too (userlists.go), bounded apart.
		{Method: http.MethodPost, Path: "/api/segments", Access: auth.PermWrite, Change: "segment", MaxBody: MaxListBodyBytes, Handler: s.createSegment,
			Middleware: []echo.MiddlewareFunc{lists.middleware(false)}},
		{Method: http.MethodGet, Path: "/api/segments/:key", Access: auth.PermRead, Handler: s.getSegment},
		{Method: http.MethodPut, Path: "/api/segments/:key", Access: auth.PermWrite, Change: "segment", MaxBody: MaxListBodyBytes, Handler: s.updateSegment,
			Middleware: []echo.MiddlewareFunc{lists.middleware(false)}},
		{Method: http.MethodPost, Path: "/api/segments/:key/users", Access: auth.PermWrite, Change: "segment", MaxBody: MaxListBodyBytes, Handler: s.editUserList,
			Middleware: []echo.MiddlewareFunc{lists.middleware(true)}},
		{Method: http.MethodDelete, Path: "/api/segments/:key", Access: auth.PermWrite, Change: "segment", Handler: s.deleteSegment},
		{Method: http.MethodGet, Path: "/api/segments/:key/versions", Access: auth.PermRead, Handler: s.listSegmentVersions},
		{Method: http.MethodGet, Path: "/api/ramps", Access: auth.PermRead, Handler: s.listRamps},
		{Method: http.MethodGet, Path: "/api/features/:key/ramps", Access: auth.PermRead, Handler: s.listRamps},
		{Method: http.MethodPost, Path: "/api/features/:key/ramps", Access: auth.PermWrite, Handler: s.createRamp},
		{Method: http.MethodGet, Path: "/api/features/:key/ramps/:id", Access: auth.PermRead, Handler: s.getRamp},
		{Method: http.MethodPost, Path: "/api/features/:key/ramps/:id/pause", Access: auth.PermWrite, Handler: s.pauseRamp},
		{Method: http.MethodPost, Path: "/api/features/:key/ramps/:id/resume", Access: auth.PermWrite, Handler: s.resumeRamp},
		{Method: http.MethodPost, Path: "/api/features/:key/ramps/:id/cancel", Access: auth.PermWrite, Handler: s.cancelRamp},
		// Scheduled changes (schedules.go).
		{Method: http.MethodGet, Path: "/api/schedules", Access: auth.PermRead, Handler: s.listSchedules},
		{Method: http.MethodGet, Path: "/api/features/:key/schedules", Access: auth.PermRead, Handler: s.listSchedules},
		{Method: http.MethodPost, Path: "/api/features/:key/schedules", Access: auth.PermWrite, MaxBody: maxScheduleRequest, Handler: s.createSchedule,
			Middleware: []echo.MiddlewareFunc{scheduleCreateLimit()}},
		{Method: http.MethodPost, Path: "/api/features/:key/schedules/:id/cancel", Access: auth.PermWrite, Handler: s.cancelSchedule},

		// Environments (environments.go): admins with tokens of every
		// environment change them; promotions are a change of the target.
		{Method: http.MethodGet, Path: "/api/environments", Access: auth.PermRead, Handler: s.listEnvironments},
		{Method: http.MethodPost, Path: "/api/environments", Access: auth.PermAdmin, MaxBody: 4 << 10, Handler: s.createEnvironment},
		{Method: http.MethodGet, Path: "/api/environments/compare", Access: auth.PermRead, Handler: s.compareEnvironments},
		{Method: http.MethodPost, Path: "/api/environments/promote", Access: auth.PermWrite, Change: "promote", MaxBody: 64 << 10, Handler: s.promoteFeatures},
		{Method: http.MethodPatch, Path: "/api/environments/:env", Access: auth.PermAdmin, MaxBody: 4 << 10, Handler: s.patchEnvironment},
		{Method: http.MethodDelete, Path: "/api/environments/:env", Access: auth.PermAdmin, Handler: s.deleteEnvironment},
		{Method: http.MethodGet, Path: "/api/features/:key/environments", Access: auth.PermRead, Handler: s.featureEnvironments},
		{Method: http.MethodPost, Path: "/api/features/:key/promote", Access: auth.PermWrite, Change: "promote", MaxBody: 4 << 10, Handler: s.promoteFeature},

		// Rollouts as code (ascode.go): a document of features exported,
		// planned against the server, applied as one batch.
		{Method: http.MethodGet, Path: "/api/export", Access: auth.PermRead, Handler: s.exportDocument},
		{Method: http.MethodPost, Path: "/api/plan", Access: auth.PermRead, MaxBody: document.MaxBytes, Handler: s.planDocument}, // changes nothing
		{Method: http.MethodPost, Path: "/api/apply", Access: auth.PermWrite, Change: "apply", MaxBody: document.MaxBytes, Handler: s.applyDocument},
	}
	routes = append(routes, experimentRoutes(experiments.New(experimentRequests{s}), opts)...)
	if opts.Pprof {
		routes = append(routes, Route{Method: http.MethodGet, Path: "/debug/pprof/*", Access: auth.PermAdmin,
			Handler: echo.WrapHandler(http.DefaultServeMux)})
	}
	return routes
}

// experimentRoutes are the routes of metrics, tracked events and
// experiments (package experiments), when the server has experiments.
func experimentRoutes(x *experiments.Server, opts Options) []Route {
	if opts.Experiments == nil {
		return nil
	}
	track := batchLimit("events", opts.ExposureBatchRate, opts.ExposureBatchBurst)
	return []Route{
		{Method: http.MethodGet, Path: "/api/metrics", Access: auth.PermRead, Handler: x.ListMetrics},
		{Method: http.MethodPost, Path: "/api/metrics", Access: auth.PermWrite, Change: "metric", Handler: x.CreateMetric},
		{Method: http.MethodGet, Path: "/api/metrics/:key", Access: auth.PermRead, Handler: x.GetMetric},
		{Method: http.MethodDelete, Path: "/api/metrics/:key", Access: auth.PermWrite, Change: "metric", Handler: x.DeleteMetric},
		// Apps' events: browsers (client tokens) report conversions too,
		// rate-limited per token as exposures are.
		{Method: http.MethodPost, Path: "/api/track", Access: auth.PermEvaluate, AppBody: true, MaxBody: experiments.MaxTrackBodyBytes, Handler: x.Track,
			Middleware: []echo.MiddlewareFunc{track}},
		{Method: http.MethodGet, Path: "/api/features/:key/experiments", Access: auth.PermRead, Handler: x.ListExperiments},
		{Method: http.MethodPost, Path: "/api/features/:key/experiments", Access: auth.PermWrite, Change: "experiment", Handler: x.StartExperiment},
		{Method: http.MethodGet, Path: "/api/features/:key/experiments/:id", Access: auth.PermRead, Handler: x.GetExperiment},
		{Method: http.MethodPost, Path: "/api/features/:key/experiments/:id/stop", Access: auth.PermWrite, Change: "experiment", Handler: x.StopExperiment},
		{Method: http.MethodGet, Path: "/api/features/:key/experiments/:id/results", Access: auth.PermRead, Handler: x.Results},
	}
}

// register adds routes to e, each with the middleware its declaration
// calls for. The middleware is applied here, once: e.Add's route-level
// middleware would be applied anew for every request, which costs an
// allocation per middleware per request on the apps' hot path.
func (s *Server) register(e *echo.Echo, routes []Route) {
	for _, r := range routes {
		if r.Method == echo.RouteNotFound {
			// Reached by requests of other methods, which s.unlisted
			// serves as routes nobody declared.
			e.Add(r.Method, r.Path, apply(r.Handler, r.Middleware))
			continue
		}
		byPath := s.declared[r.Method]
		if byPath == nil {
			byPath = map[string]bool{}
			s.declared[r.Method] = byPath
		}
		if byPath[r.Path] {
			panic("api: route " + r.Method + " " + r.Path + " is declared twice")
		}
		byPath[r.Path] = true
		e.Add(r.Method, r.Path, apply(r.Handler, s.middleware(r, true)))
	}
}

// unlisted serves a request whose route nobody declared: none matched
// (echo's 404, which needs nothing), a method the pattern does not serve
// (echo's 405), or a route added to the echo router by other means. It
// gives such requests the middleware of a route needing an admin token,
// so that a route registered without a declaration fails closed. The
// middleware is made for each request, as echo's own is.
func (s *Server) unlisted(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		method, pattern := c.Request().Method, c.Path()
		if s.declared[method][pattern] {
			return next(c)
		}
		return apply(next, s.middleware(undeclared(method, pattern), false))(c)
	}
}

// undeclared returns the declaration that unlisted gives a request of
// method whose route pattern is pattern ("" for none).
func undeclared(method, pattern string) Route {
	r := Route{Method: method, Path: pattern, Access: auth.PermAdmin}
	if pattern == "" {
		r.Access = Public
	}
	return r
}

// middleware returns what requests of route r go through, first to last,
// each made for r (its method, pattern and declaration) so that none
// looks the route up per request. declared is whether r was declared
// (the middleware then lives as long as the route and may keep what it
// looks up).
func (s *Server) middleware(r Route, declared bool) []echo.MiddlewareFunc {
	mw := []echo.MiddlewareFunc{
		s.observe(r, declared),
		recoverMiddleware,
	}
	if strings.Contains(r.Path, ":") {
		mw = append(mw, unescapeParams)
	}
	mw = append(mw,
		s.cors,
		bodies(r),
		limitBody(r),
		s.crossOrigin(r),
	)
	if s.auth != nil {
		mw = append(mw, s.auth.middleware(r))
	}
	if r.Access != auth.PermEvaluate && r.Access != Public {
		mw = append(mw, s.resolveFor(r)) // evaluation resolves its own (Server.evaluate)
	}
	if r.Stream {
		mw = append(mw, s.streams.Admit(r.Access))
	}
	if idempotentRoute(r) {
		mw = append(mw, s.idempotency(r))
	}
	if r.Change != "" {
		mw = append(mw, changeKind(r.Change))
	}
	return append(mw, r.Middleware...)
}

// apply returns h inside mw, the first outermost, as echo applies
// middleware.
func apply(h echo.HandlerFunc, mw []echo.MiddlewareFunc) echo.HandlerFunc {
	for i := len(mw) - 1; i >= 0; i-- {
		h = mw[i](h)
	}
	return h
}

// unescapeParams gives the handlers of a route with parameters their
// values unescaped: echo routes on the path as the client escaped it when
// that differs from the canonical escaping (URL.RawPath), and its
// parameters keep those escapes then ("a%2Fb" for the user "a/b").
func unescapeParams(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if c.Request().URL.RawPath != "" {
			values := slices.Clone(c.ParamValues())
			for i, v := range values {
				if u, err := url.PathUnescape(v); err == nil {
					values[i] = u
				}
			}
			c.SetParamValues(values...)
		}
		return next(c)
	}
}

// recoverMiddleware answers a handler's panic as an internal error.
var recoverMiddleware = middleware.RecoverWithConfig(middleware.RecoverConfig{DisablePrintStack: true})
