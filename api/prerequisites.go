package api

import (
	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// Prerequisites: PUT /api/features/K/prerequisites
// {"prerequisites":[{"feature":"new-api","buckets":["on"]}]} replaces the
// features K requires, as one version, with the guards of any change
// (dry_run, max_churn, If-Match, comment, submit). Loops, chains of more
// than feature.MaxPrerequisiteDepth links and unknown features are
// refused 400 (feature.EPrerequisites); more than
// feature.MaxPrerequisites, 422. See docs/api.md, Prerequisites.

type prerequisitesRequest struct {
	Prerequisites *[]feature.Prerequisite `json:"prerequisites"`
	guards
}

// maxPrerequisitesBody bounds the body of PUT …/prerequisites: ten
// prerequisites of many buckets fit, a thousand are refused by the
// domain's limit before this one.
const maxPrerequisitesBody = 64 << 10

// setPrerequisites is PUT /api/features/K/prerequisites.
func (s *Server) setPrerequisites(c echo.Context) error {
	var req prerequisitesRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.Prerequisites == nil {
		return badRequest(`give the prerequisites: {"prerequisites":[{"feature":"new-api","buckets":["on"]}]} ({"prerequisites":[]} removes them)`)
	}
	return s.change(c, req.guards, change.SetPrerequisites(*req.Prerequisites))
}
