package api

import (
	"context"
	"io"
	"mime"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/internal/docfile"
	"github.com/rollout/rollout/rollout"
)

// Rollouts as code: GET /api/export writes the server's features as a
// document (rollout.Document); POST /api/plan says what a document would
// change, feature by feature, with the exact churn of each change, storing
// nothing; POST /api/apply makes those changes as one batch of versions,
// each checked against the version its plan read, or none. Bodies are JSON,
// or YAML with Content-Type application/yaml, of at most
// rollout.MaxDocumentBytes; plans run within the server's PlanLimits.

// applyRequest is the body of POST /api/apply.
type applyRequest struct {
	Document *rollout.Document `json:"document"`
	// Versions are the plan's (DocumentPlan.Versions): each feature of the
	// document must still be at its version, or nothing is applied (412).
	// Without them the document is applied to whatever is there now.
	Versions      map[string]int `json:"versions"`
	MaxChurn      *float64       `json:"max_churn"`
	MaxTotalChurn *float64       `json:"max_total_churn"`
	Comment       string         `json:"comment"`
}

// isYAML reports whether the request's body is YAML.
func isYAML(c echo.Context) bool {
	mt, _, err := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	if err != nil {
		return false
	}
	switch mt {
	case "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml":
		return true
	}
	return false
}

// decodeDocument reads the request body into v: JSON as decode reads it,
// or YAML (isYAML), whose errors say their line.
func decodeDocument(c echo.Context, v any) error {
	if !isYAML(c) {
		return decode(c, v)
	}
	data, err := io.ReadAll(c.Request().Body) // bounded by the route's body limit
	if err != nil {
		return decodeError(err)
	}
	if err := docfile.Unmarshal("the request body", data, v); err != nil {
		return badRequest("%s", err.Error())
	}
	return nil
}

// exportDocument is GET /api/export[?format=yaml|json]: every feature as a
// document, each bucket with its exact share, which plans to no change.
func (s *Server) exportDocument(c echo.Context) error {
	format := c.QueryParam("format")
	if format == "" {
		format = docfile.JSON
	}
	if format != docfile.JSON && format != docfile.YAML {
		return badRequest("format=%q: give yaml or json", format)
	}
	data, err := docfile.Marshal(rollout.ExportDocument(s.svc.Snapshot()), format)
	if err != nil {
		return err
	}
	if format == docfile.YAML {
		return c.Blob(http.StatusOK, "application/yaml; charset=utf-8", data)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, data)
}

// planDocument is POST /api/plan: the body is a document; the answer, its
// plan (rollout.DocumentPlan). Nothing is stored.
func (s *Server) planDocument(c echo.Context) error {
	var d rollout.Document
	if err := decodeDocument(c, &d); err != nil {
		return err
	}
	if err := d.Validate(); err != nil {
		return err
	}
	var p rollout.DocumentPlan
	err := s.planner.run(c, rollout.PlanOptions{}, func(ctx context.Context, opts rollout.PlanOptions) (err error) {
		p, err = s.svc.PlanDocument(ctx, d, opts)
		return err
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, p)
}

// applyDocument is POST /api/apply: the document's changes made as one
// batch of versions under the guards, with the token's name as their actor
// and the body's comment; the answer is the plan applied. It takes an
// Idempotency-Key.
func (s *Server) applyDocument(c echo.Context) error {
	var req applyRequest
	if err := decodeDocument(c, &req); err != nil {
		return err
	}
	if req.Document == nil {
		return badRequest(`give the document to apply: {"document":{"features":[…]},"versions":{…}}`)
	}
	for name, g := range map[string]*float64{"max_churn": req.MaxChurn, "max_total_churn": req.MaxTotalChurn} {
		if g != nil && (*g != *g || *g < 0) {
			return badRequest("%s %v is out of range: give a fraction of users, 0 or more", name, *g)
		}
	}
	if err := req.Document.Validate(); err != nil {
		return err
	}
	opts := rollout.ApplyOptions{
		Actor: actorOf(c), Comment: req.Comment, Versions: req.Versions,
		MaxChurn: req.MaxChurn, MaxTotalChurn: req.MaxTotalChurn,
	}
	keepAs(c, func(p rollout.DocumentPlan) (keptAnswer, error) { return jsonAnswer(http.StatusOK, p) })
	var p rollout.DocumentPlan
	err := s.planner.run(c, rollout.PlanOptions{}, func(ctx context.Context, po rollout.PlanOptions) (err error) {
		opts.Plan = po
		p, err = s.svc.ApplyDocument(ctx, *req.Document, opts)
		return err
	})
	if err != nil {
		return err
	}
	for _, ch := range p.Changes {
		if ch.Action != rollout.ActionNone && p.Applied {
			s.applied(c, ch.Feature, ch.ToVersion, "applied from a document: "+ch.Action, ch.Churn, opts.Actor)
		}
	}
	return c.JSON(http.StatusOK, p)
}
