package api

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout"
)

// MaxBulkFeatures bounds the features of one POST /evaluate.
const MaxBulkFeatures = 1000

// evaluation is the JSON of one evaluation. Bucket and value are null when
// the feature serves no bucket.
type evaluation struct {
	Feature string          `json:"feature"`
	User    string          `json:"user"`
	Bucket  *string         `json:"bucket"`
	Value   json.RawMessage `json:"value"`
	Version int             `json:"version"`
	Reason  string          `json:"reason"`
}

func evaluationJSON(e rollout.Evaluation) evaluation {
	out := evaluation{Feature: e.Feature, User: e.User, Value: e.Value, Version: e.Version, Reason: e.Reason}
	if e.Bucket != "" {
		out.Bucket = &e.Bucket
	} else {
		out.Value = json.RawMessage("null")
	}
	return out
}

// evaluateOne is GET /evaluate?feature=K&user=U.
func (s *Server) evaluateOne(c echo.Context) error {
	key, user := c.QueryParam("feature"), c.QueryParam("user")
	if key == "" || user == "" {
		return badRequest("give both query parameters: /evaluate?feature=KEY&user=USER_ID")
	}
	if err := rollout.ValidateUser(user); err != nil {
		return err
	}
	e, err := s.svc.Evaluate(key, user)
	if err != nil {
		return err
	}
	s.metrics.evaluated(e)
	return c.JSON(http.StatusOK, evaluationJSON(e))
}

type evaluateRequest struct {
	User     string    `json:"user"`
	Features *[]string `json:"features"`
}

type evaluateResult struct {
	*evaluation
	Error *errorDetail `json:"error,omitempty"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// evaluateMany is POST /evaluate: several features for one user. A feature
// that cannot be evaluated is an error entry of its own, never a failed
// request.
func (s *Server) evaluateMany(c echo.Context) error {
	var req evaluateRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if err := rollout.ValidateUser(req.User); err != nil {
		return err
	}
	snap := s.svc.Snapshot()
	keys := snap.Keys()
	if req.Features != nil {
		keys = *req.Features
	}
	if len(keys) > MaxBulkFeatures {
		return rollout.Errorf(rollout.EInvalid, "at most %d features in one request, got %d", MaxBulkFeatures, len(keys))
	}
	results := make(map[string]evaluateResult, len(keys))
	for _, key := range keys {
		e, err := snap.Evaluate(key, req.User)
		if err != nil {
			results[key] = evaluateResult{Error: &errorDetail{Code: rollout.ErrorCode(err), Message: err.(*rollout.Error).Message}}
			continue
		}
		s.metrics.evaluated(e)
		ev := evaluationJSON(e)
		results[key] = evaluateResult{evaluation: &ev}
	}
	return c.JSON(http.StatusOK, map[string]any{"user": req.User, "results": results})
}
