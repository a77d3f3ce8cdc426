package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// Targeting: a feature's rules (PUT /api/features/K/rules), its bucket_by
// (PATCH /api/features/K {"bucket_by":"org"}) and the preview of a change
// of rules (POST /api/features/K/preview {"rules":[…]}). See
// docs/targeting.md.

type rulesRequest struct {
	Rules *[]feature.Rule `json:"rules"`
	guards
}

// setRules is PUT /api/features/K/rules: the feature's rules replaced by
// the given list, as one version.
func (s *Server) setRules(c echo.Context) error {
	var req rulesRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	ch, err := req.change()
	if err != nil {
		return err
	}
	return s.change(c, req.guards, ch)
}

// change is the change a PUT of rules asks for (its body without the
// guards).
func (req rulesRequest) change() (change.Change, error) {
	if req.Rules == nil {
		return change.Change{}, badRequest(`give the rules: {"rules":[{"name":"staff","conditions":[{"attribute":"email","op":"ends_with","value":"@example.com"}],"serve":{"bucket":"on"}}]} ({"rules":[]} removes them)`)
	}
	return change.SetRules(*req.Rules), nil
}

// previewRules answers POST /api/features/K/preview with {"rules":[…]}:
// the report of replacing the feature's rules, whose "rules" entry says
// which populations change bucket. Nothing is stored.
func (s *Server) previewRules(c echo.Context, rules []feature.Rule) error {
	opts, err := changeOptions(c, guards{})
	if err != nil {
		return err
	}
	opts.DryRun, opts.MaxChurn = true, nil
	res, err := s.in(c).Change(c.Request().Context(), c.Param("key"), change.SetRules(rules), opts)
	if err != nil {
		return err
	}
	if res.Report.Rules == nil {
		res.Report.Rules = []feature.PopulationChange{}
	}
	return c.JSON(http.StatusOK, res.Report)
}

// patchChange is the change of a PATCH: description, kill switch,
// fallback and bucket_by, each when given.
func patchChange(req patchRequest) change.Change {
	if req.BucketBy == nil {
		return change.Patch(req.Description, req.Enabled, req.Fallback)
	}
	return change.PatchBucketBy(req.Description, req.Enabled, req.Fallback, *req.BucketBy)
}
