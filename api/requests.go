package api

import (
	"context"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout/request"
	"github.com/rollout/rollout/rollout/settings"
)

// Settings and change requests over HTTP. Anyone who reads features reads
// the settings (editors see their limit); admins change them. An editor's
// change of a feature that approvals cover is answered 202 with the
// request it became (see changeResponse); editors and admins approve or
// reject others' requests, and their author cancels them.

// settingsRequest is the body of PUT /api/settings: the settings whole,
// a comment, and optionally the version read (a stale one is a 412).
type settingsRequest struct {
	MaxChurn        *float64                 `json:"max_churn"`
	RequireApproval *settings.ApprovalPolicy `json:"require_approval"`
	Version         int                      `json:"version"`
	Comment         string                   `json:"comment"`
}

// getSettings is GET /api/settings.
func (s *Server) getSettings(c echo.Context) error {
	st, err := s.in(c).Settings(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// putSettings is PUT /api/settings: fields left out keep their value.
func (s *Server) putSettings(c echo.Context) error {
	var req settingsRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.Version < 0 {
		return badRequest("version %d: give the settings' version you read (0 or leave it out: any)", req.Version)
	}
	ctx := c.Request().Context()
	next, err := s.in(c).Settings(ctx)
	if err != nil {
		return err
	}
	if req.MaxChurn != nil {
		next.MaxChurn = *req.MaxChurn
	}
	if req.RequireApproval != nil {
		next.RequireApproval = *req.RequireApproval
	}
	ifVersion := req.Version
	if ifVersion == 0 {
		ifVersion = next.Version // the fields left out are those of this version
	}
	saved, err := s.in(c).UpdateSettings(ctx, next, ifVersion, actorOf(c), req.Comment)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, saved)
}

// requestsAnswer is the list of requests.
type requestsAnswer struct {
	Requests []request.Request `json:"requests"`
}

// listRequests is GET /api/requests[?state=open&feature=K&limit=N]: newest
// first, at most request.MaxPage.
func (s *Server) listRequests(c echo.Context) error {
	q := request.Query{State: request.State(c.QueryParam("state")), Feature: c.QueryParam("feature")}
	if q.State != "" && !slices.Contains(request.States, q.State) {
		return badRequest("state=%q: use open, applied, rejected or canceled", q.State)
	}
	if len(q.Feature) > 64 {
		return badRequest("feature=%q is not a feature key", q.Feature)
	}
	limit, err := intQuery(c, "limit")
	if err != nil {
		return err
	}
	if limit > request.MaxPage {
		return badRequest("limit=%d: at most %d requests a page", limit, request.MaxPage)
	}
	q.Limit = limit
	rs, err := s.in(c).Requests(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, requestsAnswer{Requests: rs})
}

// getRequest is GET /api/requests/ID.
func (s *Server) getRequest(c echo.Context) error {
	r, err := s.in(c).Request(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"request": r})
}

// decisionRequest is the body of approve, reject and cancel.
type decisionRequest struct {
	Comment string `json:"comment"`
}

// approveRequest is POST /api/requests/ID/approve: 200 with the request,
// the feature and the report of the version applied (of an archive: the
// feature as it was; of a ramp: the feature and the ramp's preview, the
// ramp named by applied_ramp). A feature or a segment that moved on since
// the preview is a 412 with the new preview: approve again.
func (s *Server) approveRequest(c echo.Context) error {
	var req decisionRequest
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	res, r, err := s.in(c).ApproveRequest(c.Request().Context(), c.Param("id"), actorOf(c), req.Comment)
	if err != nil {
		return err
	}
	s.applied(c, res.Feature.Key, r.AppliedVersion, "request "+r.ID+" approved: "+r.Summary, res.Report.Churn, r.Author+", approved by "+r.DecidedBy)
	if r.AppliedVersion > 0 { // an archive or a ramp made no version
		c.Response().Header().Set("ETag", etag(res.Feature))
	}
	return c.JSON(http.StatusOK, struct {
		Request request.Request `json:"request"`
		changeResponse
	}{r, changeResponse{Feature: featureView{Feature: res.Feature, Shares: res.Shares}, Report: res.Report}})
}

// rejectRequest is POST /api/requests/ID/reject.
func (s *Server) rejectRequest(c echo.Context) error {
	return s.closeRequest(c, s.in(c).RejectRequest)
}

// cancelRequest is POST /api/requests/ID/cancel, by the request's author.
func (s *Server) cancelRequest(c echo.Context) error {
	return s.closeRequest(c, s.in(c).CancelRequest)
}

func (s *Server) closeRequest(c echo.Context, close func(ctx context.Context, id, by, comment string) (request.Request, error)) error {
	var req decisionRequest
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	r, err := close(c.Request().Context(), c.Param("id"), actorOf(c), req.Comment)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"request": r})
}
