package experiments

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
)

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

// CreateMetric answers POST /api/metrics. higher_is_better defaults to true.
func (s *Server) CreateMetric(c echo.Context) error {
	var req metricRequest
	if err := s.req.Decode(c, &req); err != nil {
		return err
	}
	m := experiment.Metric{Key: req.Key, Kind: req.Kind, Description: req.Description, HigherIsBetter: req.HigherIsBetter == nil || *req.HigherIsBetter}
	exps, err := s.req.Experiments(c)
	if err != nil {
		return err
	}
	m, err = exps.CreateMetric(c.Request().Context(), m, s.req.Actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"metric": m})
}

// ListMetrics answers GET /api/metrics.
func (s *Server) ListMetrics(c echo.Context) error {
	exps, err := s.req.Experiments(c)
	if err != nil {
		return err
	}
	ms, err := exps.Metrics(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"metrics": ms})
}

// GetMetric answers GET /api/metrics/M.
func (s *Server) GetMetric(c echo.Context) error {
	exps, err := s.req.Experiments(c)
	if err != nil {
		return err
	}
	m, err := exps.Metric(c.Request().Context(), c.Param("key"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"metric": m})
}

// DeleteMetric answers DELETE /api/metrics/M: 409 while a running experiment
// reads it.
func (s *Server) DeleteMetric(c echo.Context) error {
	var none struct{}
	if err := s.req.DecodeOptional(c, &none); err != nil {
		return err
	}
	exps, err := s.req.Experiments(c)
	if err != nil {
		return err
	}
	if err := exps.DeleteMetric(c.Request().Context(), c.Param("key"), s.req.Actor(c)); err != nil {
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

// Track answers POST /api/track. A batch sent again with its ID within
// rollout.ExposureBatchMemory adds nothing (added: false).
func (s *Server) Track(c echo.Context) error {
	var req trackRequest
	if err := s.req.Decode(c, &req); err != nil {
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
	exps, err := s.req.Experiments(c) // an app's route: not resolved before
	if err != nil {
		return err
	}
	res, err := exps.Track(c.Request().Context(), req.Batch, events, set)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"batch": req.Batch, "added": res.Added, "tracked": res.Tracked})
}

// StartExperiment answers POST /api/features/K/experiments.
func (s *Server) StartExperiment(c echo.Context) error {
	var req experiment.ExperimentRequest
	if err := s.req.Decode(c, &req); err != nil {
		return err
	}
	exps, err := s.req.Experiments(c)
	if err != nil {
		return err
	}
	x, err := exps.Start(c.Request().Context(), c.Param("key"), req, s.req.Actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"experiment": x})
}

// ListExperiments answers GET /api/features/K/experiments, newest first.
func (s *Server) ListExperiments(c echo.Context) error {
	exps, err := s.req.Experiments(c)
	if err != nil {
		return err
	}
	xs, err := exps.List(c.Request().Context(), c.Param("key"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"experiments": xs})
}

// GetExperiment answers GET /api/features/K/experiments/ID.
func (s *Server) GetExperiment(c echo.Context) error {
	exps, err := s.req.Experiments(c)
	if err != nil {
		return err
	}
	x, err := exps.Get(c.Request().Context(), c.Param("key"), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"experiment": x})
}

// StopExperiment answers POST /api/features/K/experiments/ID/stop.
func (s *Server) StopExperiment(c echo.Context) error {
	var none struct{}
	if err := s.req.DecodeOptional(c, &none); err != nil {
		return err
	}
	exps, err := s.req.Experiments(c)
	if err != nil {
		return err
	}
	x, err := exps.Stop(c.Request().Context(), c.Param("key"), c.Param("id"), s.req.Actor(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"experiment": x})
}

// Results answers GET /api/features/K/experiments/ID/results.
func (s *Server) Results(c echo.Context) error {
	exps, err := s.req.Experiments(c)
	if err != nil {
		return err
	}
	r, err := exps.Results(c.Request().Context(), c.Param("key"), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}
