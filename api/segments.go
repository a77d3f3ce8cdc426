package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// Segments: named sets of conditions that features' rules use with
// in_segment (see docs/targeting.md).
//
//	GET    /api/segments                 every segment
//	POST   /api/segments                 {"key","description","conditions":[…]}
//	GET    /api/segments/KEY             one, with the features that use it
//	PUT    /api/segments/KEY             {"description","conditions":[…]}: its next version,
//	                                     and the next version of every feature using it
//	DELETE /api/segments/KEY             refused (409) while a feature uses it
//	GET    /api/segments/KEY/versions    its history, newest first
//
// A segment may be a user list instead: see userlists.go.

// segmentView is a segment as the API shows it: with the features whose
// rules use it.
type segmentView struct {
	feature.Segment
	Features []string `json:"features"`
}

func viewOfSegment(snap *feature.Snapshot, seg feature.Segment) segmentView {
	users := snap.SegmentUsers(seg.Key)
	if users == nil {
		users = []string{}
	}
	return segmentView{Segment: seg, Features: users}
}

// segmentETag is the strong ETag of a segment's configuration.
func segmentETag(seg feature.Segment) string { return `"` + seg.Tag() + `"` }

func (s *Server) listSegments(c echo.Context) error {
	snap := s.in(c).Snapshot()
	segs := snap.Segments()
	out := make([]segmentView, len(segs))
	for i, seg := range segs {
		out[i] = viewOfSegment(snap, seg)
	}
	return c.JSON(http.StatusOK, map[string]any{"segments": out})
}

func (s *Server) getSegment(c echo.Context) error {
	key := c.Param("key")
	snap := s.in(c).Snapshot()
	seg, ok := snap.Segment(key)
	if !ok {
		return feature.Errorf(feature.ENotFound, "segment %q does not exist", key)
	}
	c.Response().Header().Set("ETag", segmentETag(seg))
	return c.JSON(http.StatusOK, viewOfSegment(snap, seg))
}

type segmentRequest struct {
	Key         string               `json:"key"`
	Description string               `json:"description"`
	Conditions  *[]feature.Condition `json:"conditions"`
	Users       *[]string            `json:"users"` // a user list's
	guards
}

// segmentAnswer is the answer of a change of a segment.
func segmentAnswer(status int) func(rollout.SegmentResult) (keptAnswer, error) {
	return func(res rollout.SegmentResult) (keptAnswer, error) {
		a, err := jsonAnswer(status, res)
		if err == nil && !res.DryRun {
			a.Header = map[string]string{"ETag": segmentETag(res.Segment)}
		}
		return a, err
	}
}

// segmentOptions are a segment change's options: the guards but
// max_churn, which a segment's change has no ring figure for.
func segmentOptions(c echo.Context, body guards) (rollout.ChangeOptions, error) {
	opts, err := changeOptions(c, body)
	if err == nil && opts.MaxChurn != nil {
		err = badRequest("max_churn does not apply to segments: preview the features that use it instead")
	}
	return opts, err
}

// writeSegment applies a change of a segment (apply, in the request's
// environment) with the request's guards, and answers it: 201 for a new
// segment (created), 200 for a change or a dry run.
func (s *Server) writeSegment(c echo.Context, body guards, created bool, apply func(ctx context.Context, svc *rollout.Service, opts rollout.ChangeOptions) (rollout.SegmentResult, error)) error {
	opts, err := segmentOptions(c, body)
	if err != nil {
		return err
	}
	status, verb := http.StatusOK, "changed"
	if created {
		verb = "created"
		if !opts.DryRun {
			status = http.StatusCreated
		}
	}
	answer := answers(c, segmentAnswer(status))
	opts.Idempotency = answer.idempotency()
	res, err := apply(c.Request().Context(), s.in(c), opts)
	if err != nil {
		return err
	}
	s.appliedSegment(c, res, verb, opts)
	return answer.send(res)
}

func (s *Server) createSegment(c echo.Context) error {
	var req segmentRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.Users != nil {
		return s.createUserList(c, req)
	}
	if req.Conditions == nil {
		return badRequest(`give the segment's conditions: {"key":"staff","conditions":[{"attribute":"email","op":"ends_with","value":"@example.com"}]}`)
	}
	return s.writeSegment(c, req.guards, true, func(ctx context.Context, svc *rollout.Service, opts rollout.ChangeOptions) (rollout.SegmentResult, error) {
		return svc.CreateSegment(ctx, feature.Segment{Key: req.Key, Description: req.Description, Conditions: *req.Conditions}, opts)
	})
}

func (s *Server) updateSegment(c echo.Context) error {
	var req segmentRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	key := c.Param("key")
	if req.Key != "" && req.Key != key {
		return badRequest("the body names segment %q, the path %q: a segment's key cannot change", req.Key, key)
	}
	if req.Users != nil {
		return s.replaceUserList(c, key, req)
	}
	if req.Conditions == nil {
		return badRequest(`give the segment's conditions, all of them: {"description":"…","conditions":[…]}`)
	}
	return s.writeSegment(c, req.guards, false, func(ctx context.Context, svc *rollout.Service, opts rollout.ChangeOptions) (rollout.SegmentResult, error) {
		return svc.UpdateSegment(ctx, key, req.Description, *req.Conditions, opts)
	})
}

func (s *Server) deleteSegment(c echo.Context) error {
	var req guards
	if err := decodeOptional(c, &req); err != nil {
		return err
	}
	opts, err := segmentOptions(c, req)
	if err != nil {
		return err
	}
	answer := answers(c, func(res rollout.SegmentResult) (keptAnswer, error) {
		if res.DryRun {
			return jsonAnswer(http.StatusOK, res)
		}
		return keptAnswer{Status: http.StatusNoContent}, nil
	})
	opts.Idempotency = answer.idempotency()
	res, err := s.in(c).DeleteSegment(c.Request().Context(), c.Param("key"), opts)
	if err != nil {
		return err
	}
	if !res.DryRun {
		s.appliedSegment(c, res, "deleted", opts)
	}
	return answer.send(res)
}

func (s *Server) listSegmentVersions(c echo.Context) error {
	before, limit, err := historyPage(c)
	if err != nil {
		return err
	}
	key := c.Param("key")
	vs, err := s.in(c).SegmentVersions(c.Request().Context(), key, before, limit)
	if err != nil {
		return err
	}
	if vs == nil {
		vs = []feature.SegmentVersion{}
	}
	out := map[string]any{"key": key, "versions": vs}
	if len(vs) == limit {
		out["next"] = nextPage(c, vs[len(vs)-1].Version, limit)
	}
	return c.JSON(http.StatusOK, out)
}

// appliedSegment counts and logs a segment's change (not a dry run): the
// segment's, and each feature's it changed too.
func (s *Server) appliedSegment(c echo.Context, res rollout.SegmentResult, what string, opts rollout.ChangeOptions) {
	if res.DryRun {
		return
	}
	if len(res.Features) == 0 {
		s.metrics.changed("segment")
	}
	for _, key := range res.Features {
		if f, ok := s.in(c).Snapshot().Feature(key); ok {
			s.applied(c, key, f.Version, "segment "+res.Segment.Key+" "+what, 0, opts.Actor)
		}
	}
}
