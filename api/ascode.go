package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/internal/docfile"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/document"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// Rollouts as code: GET /api/export writes the server's features as a
// document (document.Document); POST /api/plan says what a document would
// change, feature by feature, with the exact churn of each change, storing
// nothing; POST /api/apply makes those changes as one batch of versions,
// each checked against the version its plan read, or none. Bodies are JSON,
// or YAML with Content-Type application/yaml, of at most
// document.MaxBytes; plans run within the server's PlanLimits.

// applyRequest is the body of POST /api/apply.
type applyRequest struct {
	Document *document.Document `json:"document"`
	// Versions are the plan's (document.Plan.Versions): each feature of the
	// document must still be at its version, or nothing is applied (412).
	// Without them the document is applied to whatever is there now.
	Versions map[string]int `json:"versions"`
	// SegmentVersions are the plan's document.Plan.SegmentVersions, for
	// the document's segments (needed with versions when it lists any).
	SegmentVersions map[string]int `json:"segment_versions"`
	MaxChurn        *float64       `json:"max_churn"`
	MaxTotalChurn   *float64       `json:"max_total_churn"`
	Comment         string         `json:"comment"`
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

// readDocumentBody reads the request body, which a document route bounds
// to document.MaxBytes; a YAML body, costlier to read, to
// MaxBodyBytes.
func readDocumentBody(c echo.Context) ([]byte, error) {
	data, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return nil, decodeError(err)
	}
	if isYAML(c) && len(data) > MaxBodyBytes {
		return nil, feature.Errorf(codeTooLarge, "the YAML body is larger than %d bytes: send the document as JSON (up to %d bytes), as rollout plan and apply do", MaxBodyBytes, document.MaxBytes)
	}
	return data, nil
}

// decodeDocument decodes the body data into v as JSON (as decode does),
// or, for a YAML body (isYAML), into yamlV, whose errors say their line.
// The document, data or its member root, is held to the limits of its lists before
// it is decoded. Documents are decoded in a plan's slot (see planner.run),
// so that only so many are decoded at once.
func decodeDocument(c echo.Context, data []byte, root string, v, yamlV any) error {
	if !isYAML(c) {
		if err := docfile.CheckJSON("the request body", data, root); err != nil {
			return fileError(err)
		}
		c.Request().Body = io.NopCloser(bytes.NewReader(data))
		return decode(c, v)
	}
	if err := docfile.Unmarshal("the request body", data, yamlV); err != nil {
		return fileError(err)
	}
	return nil
}

// fileError answers err, a document's error from docfile: 422 invalid for
// a list over a document's limits, as document.Document.Validate answers
// it; 400 for the rest.
func fileError(err error) error {
	if fe, ok := errors.AsType[*docfile.Error](err); ok && fe.OverLimit {
		return feature.Errorf(feature.EInvalid, "%s", err.Error())
	}
	return badRequest("%s", err.Error())
}

// yamlApply is applyRequest as YAML.
type yamlApply struct {
	Document        *docfile.File  `yaml:"document"`
	Versions        map[string]int `yaml:"versions"`
	SegmentVersions map[string]int `yaml:"segment_versions"`
	MaxChurn        *float64       `yaml:"max_churn"`
	MaxTotalChurn   *float64       `yaml:"max_total_churn"`
	Comment         string         `yaml:"comment"`
}

// parseDocument reads a document body.
func parseDocument(c echo.Context, data []byte) (document.Document, error) {
	var d document.Document
	var f docfile.File
	if err := decodeDocument(c, data, "", &d, &f); err != nil {
		return d, err
	}
	if isYAML(c) {
		var err error
		if d, err = f.Document("the request body"); err != nil {
			return d, badRequest("%s", err.Error())
		}
	}
	return d, d.Validate()
}

// parseApply reads the body of POST /api/apply.
func parseApply(c echo.Context, data []byte) (applyRequest, error) {
	var req applyRequest
	var y yamlApply
	if err := decodeDocument(c, data, "document", &req, &y); err != nil {
		return req, err
	}
	if isYAML(c) {
		req = applyRequest{Versions: y.Versions, SegmentVersions: y.SegmentVersions, MaxChurn: y.MaxChurn, MaxTotalChurn: y.MaxTotalChurn, Comment: y.Comment}
		if y.Document != nil {
			d, err := y.Document.Document("the request body")
			if err != nil {
				return req, badRequest("%s", err.Error())
			}
			req.Document = &d
		}
	}
	if req.Document == nil {
		return req, badRequest(`give the document to apply: {"document":{"features":[…]},"versions":{…}}`)
	}
	for name, g := range map[string]*float64{"max_churn": req.MaxChurn, "max_total_churn": req.MaxTotalChurn} {
		if g != nil && (*g != *g || *g < 0) {
			return req, badRequest("%s %v is out of range: give a fraction of users, 0 or more", name, *g)
		}
	}
	return req, req.Document.Validate()
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
	d := document.Export(s.in(c).Snapshot())
	if env := s.in(c).Environment(); env != rollout.Production {
		d.Environment = env // production's exports stay as they were before environments
	}
	data, err := docfile.Marshal(d, format)
	if err != nil {
		return err
	}
	if format == docfile.YAML {
		return c.Blob(http.StatusOK, "application/yaml; charset=utf-8", data)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, data)
}

// planDocument is POST /api/plan: the body is a document; the answer, its
// plan (document.Plan). Nothing is stored.
func (s *Server) planDocument(c echo.Context) error {
	data, err := readDocumentBody(c)
	if err != nil {
		return err
	}
	var p document.Plan
	err = s.planner.run(c, plan.Options{}, func(ctx context.Context, opts plan.Options) error {
		d, err := parseDocument(c, data)
		if err != nil {
			return err
		}
		p, err = s.in(c).PlanDocument(ctx, d, opts)
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
	data, err := readDocumentBody(c)
	if err != nil {
		return err
	}
	answer := answers(c, func(p document.Plan) (keptAnswer, error) { return jsonAnswer(http.StatusOK, p) })
	var p document.Plan
	actor := actorOf(c)
	var role auth.Role
	if tok, ok := TokenOf(c); ok {
		role = tok.Role
	}
	err = s.planner.run(c, plan.Options{}, func(ctx context.Context, po plan.Options) error {
		req, err := parseApply(c, data)
		if err != nil {
			return err
		}
		p, err = s.in(c).ApplyDocument(ctx, *req.Document, rollout.ApplyOptions{
			Actor: actor, Role: role, Comment: req.Comment, Versions: req.Versions, SegmentVersions: req.SegmentVersions,
			MaxChurn: req.MaxChurn, MaxTotalChurn: req.MaxTotalChurn, Plan: po, Idempotency: answer.idempotency(),
		})
		return err
	})
	if err != nil {
		return err
	}
	for _, ch := range p.Changes {
		if ch.Action != document.ActionNone && p.Applied {
			s.applied(c, ch.Feature, ch.ToVersion, "applied from a document: "+ch.Action, ch.Churn, actor)
		}
	}
	return answer.send(p)
}
