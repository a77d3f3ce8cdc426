package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
)

// The routes of experiments (issue #33): metrics, the events apps track
// (POST /api/track, with an app's token, rate-limited per token as
// exposures are), and each feature's experiments and their results.

// MaxTrackBodyBytes bounds the body of POST /api/track: a batch of
// experiment.MaxTrackBatch events with long user IDs fits.
const MaxTrackBodyBytes = 512 << 10

// metricRequest is the body of POST /api/metrics.
type metricRequest struct {
	Key            string                `json:"key"`
	Kind           experiment.MetricKind `json:"kind"`
	Description    string                `json:"description"`
	HigherIsBetter *bool                 `json:"higher_is_better"`
}

// createMetric is POST /api/metrics. higher_is_better defaults to true.
func (s *Server) createMetric(c echo.Context) error {
	var req metricRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	m := experiment.Metric{Key: req.Key, Kind: req.Kind, Description: req.Description, HigherIsBetter: req.HigherIsBetter == nil || *req.HigherIsBetter}
	m, err := s.expIn(c).CreateMetric(c.Request().Context(), m, actorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"metric": m})
}

// listMetrics is GET /api/metrics.
func (s *Server) listMetrics(c echo.Context) error {
	ms, err := s.expIn(c).Metrics(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"metrics": ms})
}

// getMetric is GET /api/metrics/M.
func (s *Server) getMetric(c echo.Context) error {
	m, err := s.expIn(c).Metric(c.Request().Context(), pathParam(c, "key"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"metric": m})
}

// deleteMetric is DELETE /api/metrics/M: 409 while a running experiment
// reads it.
func (s *Server) deleteMetric(c echo.Context) error {
	var none struct{}
	if err := decodeOptional(c, &none); err != nil {
		return err
	}
	if err := s.expIn(c).DeleteMetric(c.Request().Context(), pathParam(c, "key"), actorOf(c)); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// trackRequest is the body of POST /api/track.
type trackRequest struct {
	Batch  string       `json:"batch"`
	Events []trackEvent `json:"events"`
}

// trackEvent is one event: value defaults to 1, at to now.
type trackEvent struct {
	Metric string     `json:"metric"`
	User   string     `json:"user"`
	Value  *float64   `json:"value"`
	At     *time.Time `json:"at"`
}

// track is POST /api/track. A batch sent again with its ID within
// rollout.ExposureBatchMemory adds nothing (added: false).
func (s *Server) track(c echo.Context) error {
	var req trackRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if len(req.Events) > experiment.MaxTrackBatch { // before copying them
		return feature.Errorf(feature.EInvalid, "a batch holds at most %d events, got %d: split it", experiment.MaxTrackBatch, len(req.Events))
	}
	events := make([]experiment.TrackedEvent, len(req.Events))
	set := make([]bool, len(req.Events))
	for i, e := range req.Events {
		events[i] = experiment.TrackedEvent{Metric: e.Metric, User: e.User}
		if e.Value != nil {
			events[i].Value, set[i] = *e.Value, true
		}
		if e.At != nil {
			events[i].At = *e.At
		}
	}
	svc, err := s.serviceOf(c) // an app's route: not resolved before
	if err != nil {
		return err
	}
	res, err := s.exps.Of(svc).Track(c.Request().Context(), req.Batch, events, set)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"batch": req.Batch, "added": res.Added, "tracked": res.Tracked})
}

// startExperiment is POST /api/features/K/experiments.
func (s *Server) startExperiment(c echo.Context) error {
	var req experiment.ExperimentRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	x, err := s.expIn(c).Start(c.Request().Context(), pathParam(c, "key"), req, actorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"experiment": x})
}

// listExperiments is GET /api/features/K/experiments, newest first.
func (s *Server) listExperiments(c echo.Context) error {
	xs, err := s.expIn(c).List(c.Request().Context(), pathParam(c, "key"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"experiments": xs})
}

// getExperiment is GET /api/features/K/experiments/ID.
func (s *Server) getExperiment(c echo.Context) error {
	x, err := s.expIn(c).Get(c.Request().Context(), pathParam(c, "key"), pathParam(c, "id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"experiment": x})
}

// stopExperiment is POST /api/features/K/experiments/ID/stop.
func (s *Server) stopExperiment(c echo.Context) error {
	var none struct{}
	if err := decodeOptional(c, &none); err != nil {
		return err
	}
	x, err := s.expIn(c).Stop(c.Request().Context(), pathParam(c, "key"), pathParam(c, "id"), actorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"experiment": x})
}

// experimentResults is GET /api/features/K/experiments/ID/results.
func (s *Server) experimentResults(c echo.Context) error {
	r, err := s.expIn(c).Results(c.Request().Context(), pathParam(c, "key"), pathParam(c, "id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

// expIn returns the experiments of the request's environment (see
// resolve).
func (s *Server) expIn(c echo.Context) *experiment.Experiments { return s.exps.Of(s.in(c)) }

// experimentRoutes are the routes above, when the server has experiments.
func (s *Server) experimentRoutes(opts Options) []Route {
	if opts.Experiments == nil {
		return nil
	}
	track := batchLimit("events", opts.ExposureBatchRate, opts.ExposureBatchBurst)
	return []Route{
		{Method: http.MethodGet, Path: "/api/metrics", Access: auth.PermRead, Handler: s.listMetrics},
		{Method: http.MethodPost, Path: "/api/metrics", Access: auth.PermWrite, Change: "metric", Handler: s.createMetric},
		{Method: http.MethodGet, Path: "/api/metrics/:key", Access: auth.PermRead, Handler: s.getMetric},
		{Method: http.MethodDelete, Path: "/api/metrics/:key", Access: auth.PermWrite, Change: "metric", Handler: s.deleteMetric},
		// Apps' events: browsers (client tokens) report conversions too.
		{Method: http.MethodPost, Path: "/api/track", Access: auth.PermEvaluate, AppBody: true, MaxBody: MaxTrackBodyBytes, Handler: s.track,
			Middleware: []echo.MiddlewareFunc{track}},
		{Method: http.MethodGet, Path: "/api/features/:key/experiments", Access: auth.PermRead, Handler: s.listExperiments},
		{Method: http.MethodPost, Path: "/api/features/:key/experiments", Access: auth.PermWrite, Change: "experiment", Handler: s.startExperiment},
		{Method: http.MethodGet, Path: "/api/features/:key/experiments/:id", Access: auth.PermRead, Handler: s.getExperiment},
		{Method: http.MethodPost, Path: "/api/features/:key/experiments/:id/stop", Access: auth.PermWrite, Change: "experiment", Handler: s.stopExperiment},
		{Method: http.MethodGet, Path: "/api/features/:key/experiments/:id/results", Access: auth.PermRead, Handler: s.experimentResults},
	}
}
