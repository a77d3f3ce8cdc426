package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	xrate "golang.org/x/time/rate"

	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/schedule"
)

// Scheduled changes (schedule.Schedule): POST /api/features/K/schedules
// stores a change of the feature, as the body of the route that makes it
// (PATCH /api/features/K, PUT …/rules, PUT …/buckets), to apply at a set
// time; GET /api/features/K/schedules and GET /api/schedules list them,
// POST /api/features/K/schedules/ID/cancel cancels a pending one. The
// body of a scheduled change is parsed by its route's own parser
// (ScheduledChange), when the schedule is made and again when it applies.

// scheduleRequest is the body of POST /api/features/K/schedules.
type scheduleRequest struct {
	At       string           `json:"at"` // RFC 3339
	Change   *schedule.Change `json:"change"`
	MaxChurn *float64         `json:"max_churn"`
	Comment  string           `json:"comment"`
}

// Limits of POST /api/features/K/schedules: its body (the change's and a
// little more), and the schedules each token (or, while the API is open,
// each client address) makes on this instance: a burst, then a few a
// second; over it, 429.
const maxScheduleRequest = schedule.MaxBody + 4<<10

var (
	scheduleCreateRate  = 5.0
	scheduleCreateBurst = 60
)

// scheduleCreateLimit bounds the schedules each token makes.
func scheduleCreateLimit() echo.MiddlewareFunc {
	return middleware.RateLimiterWithConfig(middleware.RateLimiterConfig{
		Store: middleware.NewRateLimiterMemoryStoreWithConfig(middleware.RateLimiterMemoryStoreConfig{
			Rate: xrate.Limit(scheduleCreateRate), Burst: scheduleCreateBurst, ExpiresIn: 3 * time.Minute,
		}),
		IdentifierExtractor: func(c echo.Context) (string, error) {
			if tok, ok := TokenOf(c); ok {
				return "token " + tok.ID, nil
			}
			return "address " + remoteHost(c), nil
		},
		DenyHandler: func(c echo.Context, _ string, _ error) error {
			c.Response().Header().Set("Retry-After", "1")
			return &echo.HTTPError{Code: http.StatusTooManyRequests, Message: "too many schedules made in a short time: wait a second and try again"}
		},
	})
}

// ScheduledChange makes the change of a scheduled change's body as the
// route of its kind does (a rollout.ScheduleParser): the body of PATCH
// /api/features/K for "patch", of PUT …/rules for "rules", of PUT
// …/buckets for "buckets", without the guards (dry_run, max_churn, submit,
// comment), which a schedule takes beside its change.
func ScheduledChange(kind string, body json.RawMessage) (change.Change, error) {
	if len(body) == 0 || body[0] != '{' {
		return change.Change{}, badRequest(`change.body must be a JSON object: the body of the route, such as {"kind":"patch","body":{"enabled":false}}`)
	}
	var (
		ch  change.Change
		g   guards
		err error
	)
	switch kind {
	case schedule.KindPatch:
		var req patchRequest
		if err = decodeBytes(body, &req); err == nil {
			ch, g = req.change(), req.guards
		}
	case schedule.KindRules:
		var req rulesRequest
		if err = decodeBytes(body, &req); err == nil {
			g = req.guards
			ch, err = req.change()
		}
	case schedule.KindBuckets:
		var req setBucketsRequest
		if err = decodeBytes(body, &req); err == nil {
			g = req.guards
			ch, err = req.change()
		}
	default:
		return change.Change{}, &feature.Error{Code: codeBadRequest, Field: "change.kind", Message: `change.kind ` + strconv.Quote(kind) + `: schedule a "patch" (the body of PATCH /api/features/K), "rules" (of PUT …/rules) or "buckets" (of PUT …/buckets)`}
	}
	if err != nil {
		if e, ok := errors.AsType[*feature.Error](err); ok {
			return change.Change{}, &feature.Error{Code: e.Code, Field: e.Field, Report: e.Report, Message: "change.body: " + e.Message}
		}
		return change.Change{}, err
	}
	var given []string
	if g.DryRun != nil {
		given = append(given, "dry_run")
	}
	if g.MaxChurn != nil {
		given = append(given, "max_churn")
	}
	if g.Submit != nil {
		given = append(given, "submit")
	}
	if g.Comment != "" {
		given = append(given, "comment")
	}
	if len(given) > 0 {
		return change.Change{}, badRequest("change.body holds %s: a schedule takes max_churn and comment beside its change, not in its body (and has no dry_run or submit)", strings.Join(given, ", "))
	}
	return ch, nil
}

// createSchedule is POST /api/features/K/schedules: the change stored, to
// apply at its time as actor "schedule"; 201 with the schedule and its
// preview, the report of a dry run of the change now. A change the route
// would refuse is refused as the route refuses it.
func (s *Server) createSchedule(c echo.Context) error {
	var req scheduleRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.At == "" || req.Change == nil {
		return badRequest(`give the time and the change: {"at":"2026-03-06T18:00:00+01:00","change":{"kind":"patch","body":{"enabled":false}}}`)
	}
	at, err := time.Parse(time.RFC3339, req.At)
	if err != nil {
		return &feature.Error{Code: codeBadRequest, Field: "at", Message: "at " + strconv.Quote(req.At) + ` is not a time: write it in RFC 3339, such as "2026-03-06T18:00:00+01:00"`}
	}
	sp := schedule.Spec{At: at, Change: *req.Change, MaxChurn: req.MaxChurn, Comment: req.Comment}
	if tok, ok := TokenOf(c); ok {
		sp.Role = tok.Role
	}
	sc, err := s.in(c).CreateSchedule(c.Request().Context(), c.Param("key"), sp, ScheduledChange, actorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, map[string]any{"schedule": sc, "preview": sc.Preview})
}

// listSchedules is GET /api/features/K/schedules and, without a key, GET
// /api/schedules: the environment's schedules, pending and running ones
// soonest first, then the others latest first; ?status= keeps one status,
// ?limit= (1 to schedule.MaxPage) bounds them.
func (s *Server) listSchedules(c echo.Context) error {
	q := schedule.Query{Feature: c.Param("key"), Status: schedule.Status(c.QueryParam("status"))}
	if q.Feature == "" {
		q.Feature = c.QueryParam("feature")
	}
	if l := c.QueryParam("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > schedule.MaxPage {
			return badRequest("limit=%q: give a number of schedules from 1 to %d (%d when absent)", l, schedule.MaxPage, schedule.DefaultPage)
		}
		q.Limit = n
	}
	scs, err := s.in(c).Schedules(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"schedules": scs, "environment": s.in(c).Environment()})
}

// cancelSchedule is POST /api/features/K/schedules/ID/cancel: the pending
// schedule canceled; 404 when the feature has no schedule ID, 409 when it
// is no longer pending.
func (s *Server) cancelSchedule(c echo.Context) error {
	var none struct{}
	if err := decodeOptional(c, &none); err != nil {
		return err
	}
	sc, err := s.in(c).CancelSchedule(c.Request().Context(), c.Param("key"), c.Param("id"), actorOf(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"schedule": sc})
}
