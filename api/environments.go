package api

import (
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/api/evaluation"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/environment"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
)

// Context keys of a request's environment: envKey holds the environment
// of a token scoped to one other than production (set by Auth.check;
// production's are left out to spare the hot path an allocation), svcKey
// the service of the environment the request resolved to (resolve).
const (
	envKey = "rollout.environment"
	svcKey = "rollout.service"
)

// environmentOf returns the environment the request is for: the one its
// token is scoped to, else its ?env=, else production. Auth.check has
// refused a scoped token's ?env= naming another.
func environmentOf(c echo.Context) string {
	if env, ok := c.Get(envKey).(string); ok {
		return env
	}
	if env := envParam(c); env != "" {
		return env
	}
	return rollout.Production
}

// envParam returns the first value of the query parameter env, as the
// request's url.Values would have it, without making them (the hot path
// of GET /evaluate reads its own parameters so): a query with ';' or
// an escaped key is left to url.ParseQuery.
func envParam(c echo.Context) string {
	raw := c.Request().URL.RawQuery
	if !strings.Contains(raw, "env") {
		return ""
	}
	if strings.Contains(raw, ";") {
		return c.QueryParam("env")
	}
	for pair := range strings.SplitSeq(raw, "&") {
		k, v, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(k, "%+") {
			return c.QueryParam("env")
		}
		if k != "env" {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			u, err := url.QueryUnescape(v)
			if err != nil {
				return c.QueryParam("env")
			}
			return u
		}
		return v
	}
	return ""
}

// serviceOf returns the service of the request's environment: 404
// unknown_environment when it does not exist.
func (s *Server) serviceOf(c echo.Context) (*rollout.Service, error) {
	env := environmentOf(c)
	svc, ok := s.envs.Service(env)
	if !ok {
		return nil, unknownEnvironment(env)
	}
	return svc, nil
}

func unknownEnvironment(env string) error { return environment.Unknown(env) }

// resolve finds the request's environment once, before the handler, which
// reads its service with in.
func (s *Server) resolve(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		svc, err := s.serviceOf(c)
		if err != nil {
			return err
		}
		c.Set(svcKey, svc)
		c.Response().Header().Set("X-Rollout-Environment", svc.Environment())
		return next(c)
	}
}

// resolveFor is resolve for the route r: where r answers an unknown
// environment itself (Route.Unresolved), it does.
func (s *Server) resolveFor(r Route) echo.MiddlewareFunc {
	if r.Unresolved == nil {
		return s.resolve
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if _, err := s.serviceOf(c); feature.ErrorCode(err) == environment.EUnknown {
				return r.Unresolved(c)
			}
			return s.resolve(next)(c)
		}
	}
}

// UnknownEnvironment returns the ?env= of a request whose environment does
// not resolve (see Route.Unresolved), clipped for a message.
func UnknownEnvironment(c echo.Context) string { return clip(envParam(c)) }

// in returns the service of the request's environment (see resolve).
func (s *Server) in(c echo.Context) *rollout.Service { return ServiceOf(c, s.svc) }

// experimentRequests is what package experiments asks of the API about a
// request.
type experimentRequests struct{ s *Server }

func (r experimentRequests) Decode(c echo.Context, v any) error         { return decode(c, v) }
func (r experimentRequests) DecodeOptional(c echo.Context, v any) error { return decodeOptional(c, v) }
func (r experimentRequests) Actor(c echo.Context) string                { return actorOf(c) }

// Experiments returns the experiments of the environment the request
// resolved to (see resolve), or, on an app's route (POST /api/track),
// of the one it names.
func (r experimentRequests) Experiments(c echo.Context) (*experiment.Experiments, error) {
	if svc, ok := c.Get(svcKey).(*rollout.Service); ok {
		return r.s.exps.Of(svc), nil
	}
	svc, err := r.s.serviceOf(c)
	if err != nil {
		return nil, err
	}
	return r.s.exps.Of(svc), nil
}

// evaluators keeps an evaluation server per environment's service, each
// with its own encoded snapshot.
type evaluators struct {
	byService sync.Map // *rollout.Service → *evaluation.Server
	make      func(*rollout.Service) *evaluation.Server
}

func (e *evaluators) of(svc *rollout.Service) *evaluation.Server {
	if ev, ok := e.byService.Load(svc); ok {
		return ev.(*evaluation.Server)
	}
	ev, _ := e.byService.LoadOrStore(svc, e.make(svc))
	return ev.(*evaluation.Server)
}

// evaluate serves an evaluation route with the evaluation server of the
// request's environment, resolved from its token or ?env= alone: the
// default environment's costs one map read.
func (s *Server) evaluate(h func(*evaluation.Server, echo.Context) error) echo.HandlerFunc {
	return func(c echo.Context) error {
		svc, err := s.serviceOf(c)
		if err != nil {
			return err
		}
		if svc == s.svc {
			return h(s.eval, c)
		}
		return h(s.evals.of(svc), c)
	}
}

// evalIn is the evaluation server of the request's resolved environment.
func (s *Server) evalIn(c echo.Context) *evaluation.Server {
	svc := s.in(c)
	if svc == s.svc {
		return s.eval
	}
	return s.evals.of(svc)
}

// scopeCheck refuses a token scoped to one environment asking for another
// with ?env=, and records the scope of a token scoped to one other than
// production (see envKey).
func scopeCheck(c echo.Context, tok auth.Token) error {
	if tok.Environment == "" {
		return nil
	}
	if env := envParam(c); env != "" && env != tok.Environment {
		return feature.Errorf(codeForbidden, "token %q is scoped to environment %s: it may not use %s", tok.Name, tok.Environment, clip(env))
	}
	if tok.Environment != rollout.Production {
		c.Set(envKey, tok.Environment)
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// unscoped refuses a token scoped to one environment: managing
// environments, and comparing them, needs one that sees them all.
func unscoped(c echo.Context) error {
	if tok, ok := TokenOf(c); ok && tok.Environment != "" {
		return feature.Errorf(codeForbidden, "token %q is scoped to environment %s: this needs a token of every environment", tok.Name, tok.Environment)
	}
	return nil
}

// listEnvironments is GET /api/environments.
func (s *Server) listEnvironments(c echo.Context) error {
	list := s.envs.List()
	if tok, ok := TokenOf(c); ok && tok.Environment != "" {
		list = slicesFilter(list, func(e rollout.Environment) bool { return e.Key == tok.Environment })
	}
	if list == nil {
		list = []rollout.Environment{}
	}
	return c.JSON(http.StatusOK, map[string]any{"environments": list})
}

func slicesFilter[T any](in []T, keep func(T) bool) []T {
	var out []T
	for _, v := range in {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

type environmentRequest struct {
	Key            string `json:"key"`
	Name           string `json:"name"`
	Protected      bool   `json:"protected"`
	RequireComment bool   `json:"require_comment"`
	Position       int    `json:"position"`
	CopyFrom       string `json:"copy_from"`
	Comment        string `json:"comment"`
}

// createEnvironment is POST /api/environments.
func (s *Server) createEnvironment(c echo.Context) error {
	if err := unscoped(c); err != nil {
		return err
	}
	var req environmentRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.Name == "" {
		req.Name = req.Key
	}
	env, err := s.envs.Create(c.Request().Context(), rollout.Environment{Key: req.Key, Name: req.Name, Protected: req.Protected, RequireComment: req.RequireComment, Position: req.Position},
		rollout.EnvironmentOptions{Actor: actorOf(c), Comment: req.Comment, CopyFrom: req.CopyFrom})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, env)
}

type environmentPatch struct {
	Name           *string `json:"name"`
	Protected      *bool   `json:"protected"`
	RequireComment *bool   `json:"require_comment"`
	Position       *int    `json:"position"`
	Comment        string  `json:"comment"`
}

// patchEnvironment is PATCH /api/environments/E.
func (s *Server) patchEnvironment(c echo.Context) error {
	if err := unscoped(c); err != nil {
		return err
	}
	var req environmentPatch
	if err := decode(c, &req); err != nil {
		return err
	}
	env, err := s.envs.Update(c.Request().Context(), c.Param("env"), rollout.EnvironmentPatch{Name: req.Name, Protected: req.Protected, RequireComment: req.RequireComment, Position: req.Position},
		rollout.EnvironmentOptions{Actor: actorOf(c), Comment: req.Comment})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, env)
}

// deleteEnvironment is DELETE /api/environments/E: 204.
func (s *Server) deleteEnvironment(c echo.Context) error {
	if err := unscoped(c); err != nil {
		return err
	}
	if err := s.envs.Delete(c.Request().Context(), c.Param("env"), rollout.EnvironmentOptions{Actor: actorOf(c)}); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// compareEnvironments is GET /api/environments/compare?from=A&to=B.
func (s *Server) compareEnvironments(c echo.Context) error {
	if err := unscoped(c); err != nil {
		return err
	}
	from, to := c.QueryParam("from"), c.QueryParam("to")
	if from == "" || to == "" {
		return badRequest("give the environments to compare: ?from=staging&to=production")
	}
	diffs, err := s.envs.Compare(from, to)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"from": from, "to": to, "features": diffs})
}

// featureEnvironments is GET /api/features/K/environments: the feature's
// configuration in every environment the token sees.
func (s *Server) featureEnvironments(c echo.Context) error {
	ps, err := s.envs.Placements(c.Param("key"))
	if err != nil {
		return err
	}
	if tok, ok := TokenOf(c); ok && tok.Environment != "" {
		ps = slicesFilter(ps, func(p environment.Placement) bool { return p.Environment == tok.Environment })
		if ps == nil {
			return feature.NotFound(c.Param("key"))
		}
	}
	return c.JSON(http.StatusOK, map[string]any{"environments": ps})
}

type promoteRequest struct {
	guards
	From        string   `json:"from"`
	To          string   `json:"to"`
	Include     []string `json:"include"`
	FromVersion int      `json:"from_version"`
}

// promoteFeature is POST /api/features/K/promote: the feature's parts made
// in "to" as they are in "from", through the target's pipeline, with
// If-Match of the target's ETag. The answer is a change's, in the target.
func (s *Server) promoteFeature(c echo.Context) error {
	var req promoteRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.From == "" || req.To == "" {
		return badRequest("give the environments of the promotion: {\"from\":\"staging\",\"to\":\"production\"}")
	}
	if len(req.Include) > len(environment.Parts) {
		return badRequest("include lists %d parts: a promotion has %d", len(req.Include), len(environment.Parts))
	}
	if tok, ok := TokenOf(c); ok && tok.Environment != "" && (tok.Environment != req.To || tok.Environment != req.From) {
		return feature.Errorf(codeForbidden, "token %q is scoped to environment %s: a promotion from %s to %s needs a token of both", tok.Name, tok.Environment, clip(req.From), clip(req.To))
	}
	dst, ok := s.envs.Service(req.To)
	if !ok {
		return unknownEnvironment(req.To)
	}
	opts, err := changeOptions(c, req.guards)
	if err != nil {
		return err
	}
	answer := answers(c, okResult)
	opts.Idempotency = answer.idempotency()
	res, err := s.envs.Promote(c.Request().Context(), c.Param("key"),
		rollout.PromoteOptions{From: req.From, To: req.To, Include: req.Include, FromVersion: req.FromVersion, Change: opts})
	if err != nil {
		return err
	}
	c.Set(svcKey, dst)
	s.appliedResult(c, "promoted from "+req.From, opts, res)
	return answer.send(res)
}

// ServiceOf returns the service of the environment a request of a declared
// route resolved to (its token's, its ?env=, or production), or fallback
// when it resolved none (a public route): what the dashboard's handlers,
// declared through Options.Routes, serve.
func ServiceOf(c echo.Context, fallback *rollout.Service) *rollout.Service {
	if svc, ok := c.Get(svcKey).(*rollout.Service); ok {
		return svc
	}
	return fallback
}

type batchPromoteRequest struct {
	promoteRequest
	Features      []string `json:"features"`
	MaxTotalChurn *float64 `json:"max_total_churn"`
	// Versions pins features to the versions of the source and the
	// target their author previewed: {"checkout":{"from":3,"to":5}}.
	Versions map[string]environment.Pin `json:"versions"`
}

// promoteFeatures is POST /api/environments/promote: several features
// promoted as one batch, all or nothing, with their total churn.
func (s *Server) promoteFeatures(c echo.Context) error {
	var req batchPromoteRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.From == "" || req.To == "" {
		return badRequest("give the environments of the promotion: {\"from\":\"staging\",\"to\":\"production\",\"features\":[…]}")
	}
	if len(req.Features) > environment.MaxBatchPromotion {
		return badRequest("features lists %d features: a batch promotes at most %d", len(req.Features), environment.MaxBatchPromotion)
	}
	if len(req.Include) > len(environment.Parts) {
		return badRequest("include lists %d parts: a promotion has %d", len(req.Include), len(environment.Parts))
	}
	if len(req.Versions) > len(req.Features) {
		return badRequest("versions pins %d features: the batch names %d", len(req.Versions), len(req.Features))
	}
	if m := req.MaxTotalChurn; m != nil && !(*m >= 0 && *m <= 1) {
		return badRequest("max_total_churn %v is out of range: give a fraction of users between 0 and 1", *m)
	}
	if tok, ok := TokenOf(c); ok && tok.Environment != "" && (tok.Environment != req.To || tok.Environment != req.From) {
		return feature.Errorf(codeForbidden, "token %q is scoped to environment %s: a promotion from %s to %s needs a token of both", tok.Name, tok.Environment, clip(req.From), clip(req.To))
	}
	opts, err := changeOptions(c, req.guards)
	if err != nil {
		return err
	}
	if opts.IfMatch != "" {
		return badRequest("a batch promotion takes no If-Match: it is refused as a whole if a feature moves on while it runs")
	}
	answer := answers(c, func(p environment.BatchPromotion) (keptAnswer, error) { return jsonAnswer(http.StatusOK, p) })
	opts.Idempotency = answer.idempotency()
	p, err := s.envs.PromoteMany(c.Request().Context(), req.Features,
		rollout.PromoteOptions{From: req.From, To: req.To, Include: req.Include, Versions: req.Versions, Change: opts}, req.MaxTotalChurn)
	if err != nil {
		return err
	}
	if p.Applied {
		for _, ch := range p.Features {
			s.applied(c, ch.Feature, ch.ToVersion, "promoted from "+req.From, ch.Churn, opts.Actor)
		}
	}
	return answer.send(p)
}
