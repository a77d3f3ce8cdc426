package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/plan"
	"github.com/rollout/rollout/rollout/ramp"
)

// rampRequest is the body of POST /api/features/K/ramps. The steps' times
// are either every (a Go duration such as "24h") from start (default now),
// or at, one RFC 3339 time per step.
type rampRequest struct {
	Bucket    string    `json:"bucket"`
	Steps     []float64 `json:"steps"`
	Every     string    `json:"every"`
	Start     string    `json:"start"`
	At        []string  `json:"at"`
	MaxChurn  *float64  `json:"max_churn"`
	Tolerance *float64  `json:"tolerance"`
	Comment   string    `json:"comment"`
	// DryRun previews the ramp step by step and stores nothing (also
	// ?dry_run=true, as for other changes).
	DryRun *bool `json:"dry_run"`
}

// horizonYears is ramp.MaxHorizon in years.
const horizonYears = ramp.MaxHorizon / (365 * 24 * time.Hour)

// spec reads the request into a ramp's spec, refusing what is not well
// formed; the domain judges the rest.
func (req rampRequest) spec() (ramp.Spec, error) {
	sp := ramp.Spec{Bucket: req.Bucket, Shares: req.Steps, MaxChurn: req.MaxChurn, Comment: req.Comment}
	if req.Bucket == "" {
		return sp, badRequest(`give the bucket to ramp and its shares: {"bucket":"on","steps":[0.05,0.25,1],"every":"24h"}`)
	}
	if req.Every != "" {
		d, err := time.ParseDuration(req.Every)
		if err != nil {
			return sp, badRequest("every %q is not a duration: write it as Go does, such as \"24h\" or \"90m\"", req.Every)
		}
		if d <= 0 {
			return sp, badRequest("every %q must be a positive duration, such as \"24h\"", req.Every)
		}
		if d > ramp.MaxHorizon {
			return sp, badRequest("every %q is longer than %d years: give a duration such as \"24h\"", req.Every, horizonYears)
		}
		sp.Every = d
	}
	parse := func(field, v string) (time.Time, error) {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return t, badRequest("%s %q is not a time: write it in RFC 3339, such as \"2026-03-01T09:00:00Z\"", field, v)
		}
		if d := time.Until(t); d > ramp.MaxHorizon || d < -ramp.MaxHorizon {
			return t, badRequest("%s %q is more than %d years from now", field, v, horizonYears)
		}
		return t, nil
	}
	if req.Start != "" {
		t, err := parse("start", req.Start)
		if err != nil {
			return sp, err
		}
		sp.Start = t
	}
	for _, v := range req.At {
		t, err := parse("at", v)
		if err != nil {
			return sp, err
		}
		sp.At = append(sp.At, t)
	}
	if req.Tolerance != nil {
		if err := plan.CheckTolerance(*req.Tolerance); err != nil {
			return sp, err
		}
		sp.Tolerance = *req.Tolerance
	}
	return sp, nil
}

// createRamp is POST /api/features/K/ramps: a scheduled ramp of one bucket,
// stored; its steps apply at their times on whichever instance runs the
// ramp runner first. An editor's ramp of a feature under approvals is a
// change request instead (202, as other gated changes). With "dry_run":
// true it answers 200 with the ramp it would make, each step's preview
// (share reached, users moved, or the reason the ramp would pause there)
// and, for an editor, what it needs, storing nothing.
func (s *Server) createRamp(c echo.Context) error {
	var req rampRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	sp, err := req.spec()
	if err != nil {
		return err
	}
	if tok, ok := TokenOf(c); ok {
		sp.Role = tok.Role
	}
	dryRun, err := queryGuard(c, "dry_run", req.DryRun, func(q string) (bool, error) {
		v, err := strconv.ParseBool(q)
		if err != nil {
			return false, badRequest("dry_run=%q: use true or false", q)
		}
		return v, nil
	})
	if err != nil {
		return err
	}
	if dryRun != nil && *dryRun {
		p, err := s.in(c).PreviewRamp(c.Request().Context(), c.Param("key"), sp, actorOf(c))
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"dry_run": true, "ramp": p.Ramp, "steps": p.Steps, "needs": p.Needs})
	}
	answer := answers(c, rampStartAnswer)
	st, err := s.in(c).StartRamp(c.Request().Context(), c.Param("key"), sp, rollout.RampOptions{Actor: actorOf(c), Idempotency: answer.idempotency()})
	if err != nil {
		return err
	}
	return answer.send(st)
}

// rampStartAnswer is the answer of a ramp started: 201 with the ramp, or
// 202 with the change request it became and its steps' preview.
func rampStartAnswer(st rollout.RampStart) (keptAnswer, error) {
	if st.Request != nil {
		return jsonAnswer(http.StatusAccepted, map[string]any{"request": st.Request, "ramp": st.Ramp, "steps": st.Steps})
	}
	return rampAnswer(http.StatusCreated)(st.Ramp)
}

// listRamps is GET /api/features/K/ramps and, without a key, GET
// /api/ramps: the ramps, oldest first, with their state and reasons.
func (s *Server) listRamps(c echo.Context) error {
	rs, err := s.in(c).Ramps(c.Request().Context(), c.Param("key"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"ramps": rs})
}

// getRamp is GET /api/features/K/ramps/ID.
func (s *Server) getRamp(c echo.Context) error {
	r, err := s.in(c).Ramp(c.Request().Context(), c.Param("key"), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"ramp": r})
}

// pauseRamp, resumeRamp and cancelRamp are POST
// /api/features/K/ramps/ID/pause, …/resume and …/cancel.
func (s *Server) pauseRamp(c echo.Context) error { return s.moveRamp(c, s.in(c).PauseRamp) }

func (s *Server) resumeRamp(c echo.Context) error { return s.moveRamp(c, s.in(c).ResumeRamp) }

func (s *Server) cancelRamp(c echo.Context) error { return s.moveRamp(c, s.in(c).CancelRamp) }

func (s *Server) moveRamp(c echo.Context, move func(ctx context.Context, key, id string, opts rollout.RampOptions) (ramp.Ramp, error)) error {
	var none struct{}
	if err := decodeOptional(c, &none); err != nil {
		return err
	}
	answer := answers(c, rampAnswer(http.StatusOK))
	r, err := move(c.Request().Context(), c.Param("key"), c.Param("id"), rollout.RampOptions{Actor: actorOf(c), Idempotency: answer.idempotency()})
	if err != nil {
		return err
	}
	return answer.send(r)
}
