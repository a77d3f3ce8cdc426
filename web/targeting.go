package web

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/rollout/rollout/rollout/feature"
)

// Targeting on the dashboard (issue #22): a feature's rules and bucket_by,
// edited as sentences and previewed before they apply; a "test a context"
// box; and the segments page. The pages render what is stored, in words;
// the script (targeting.js) edits it and changes it through the JSON API.

// Bounds of the dashboard's targeting.
const (
	// testBodyBytes bounds the body of a "test a context" request: a
	// context of MaxContextAttrs attributes of MaxContextValueLen bytes
	// fits, with room for lists.
	testBodyBytes = 256 << 10
	// segmentVersionsShown is how many versions of each segment its page
	// lists.
	segmentVersionsShown = 20
)

// opWords are the operators as the dashboard says them, in the contract's
// order (feature.Operators).
var opWords = map[string]string{
	feature.OpEq: "equals", feature.OpNeq: "does not equal",
	feature.OpIn: "is one of", feature.OpNotIn: "is not one of",
	feature.OpStartsWith: "starts with", feature.OpEndsWith: "ends with", feature.OpContains: "contains",
	feature.OpMatches: "matches the pattern",
	feature.OpLt:      "< (number)", feature.OpLte: "≤ (number)", feature.OpGt: "> (number)", feature.OpGte: "≥ (number)",
	feature.OpSemverLt: "< (semver)", feature.OpSemverLte: "≤ (semver)", feature.OpSemverEq: "= (semver)",
	feature.OpSemverGte: "≥ (semver)", feature.OpSemverGt: "> (semver)",
	feature.OpBefore: "is before (time)", feature.OpAfter: "is after (time)",
	feature.OpPresent: "is present", feature.OpAbsent: "is absent",
	feature.OpInSegment: "in segment",
}

// opOption is one operator of the editor's menus.
type opOption struct {
	Op    string `json:"op"`
	Label string `json:"label"`
}

func opOptions() []opOption {
	out := make([]opOption, 0, len(feature.Operators))
	for _, op := range feature.Operators {
		out = append(out, opOption{Op: op, Label: opWords[op]})
	}
	return out
}

// conditionSentence says a condition in the dashboard's words:
// `country is one of DE, AT`, `in segment staff`, `email is present`.
func conditionSentence(c feature.Condition) string {
	if c.Any != nil {
		parts := make([]string, len(c.Any))
		for i, a := range c.Any {
			parts[i] = conditionSentence(a)
		}
		return "(" + strings.Join(parts, " or ") + ")"
	}
	if c.IgnoreCase {
		c.IgnoreCase = false
		return conditionSentence(c) + " (any case)"
	}
	words := opWords[c.Op]
	if words == "" {
		words = c.Op
	}
	if c.Op == feature.OpInSegment {
		return words + " " + valueWords(c.Value)
	}
	if c.Op == feature.OpPresent || c.Op == feature.OpAbsent {
		return c.Attribute + " " + words
	}
	if sym, ok := strings.CutSuffix(words, " (semver)"); ok {
		return c.Attribute + " " + sym + " " + valueWords(c.Value) + " (semver)"
	}
	if sym, ok := strings.CutSuffix(words, " (number)"); ok {
		return c.Attribute + " " + sym + " " + valueWords(c.Value)
	}
	return c.Attribute + " " + words + " " + valueWords(c.Value)
}

// valueWords is a condition's value for reading: a string bare, a list
// joined by commas, anything else as its JSON.
func valueWords(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return strings.Join(list, ", ")
	}
	return string(raw)
}

// conditionsSentence says conditions joined by "and"; none: everyone.
func conditionsSentence(cs []feature.Condition) string {
	if len(cs) == 0 {
		return "everyone"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = conditionSentence(c)
	}
	return strings.Join(parts, " and ")
}

// segmentSentence says who is in s: its conditions, or, for a user list,
// how many users it names.
func segmentSentence(s feature.Segment) string {
	if s.List {
		return plural(s.Size, "listed user")
	}
	return conditionsSentence(s.Conditions)
}

// ruleView is one rule of a feature as its page says it.
type ruleView struct {
	Name, When, Serve string
}

func ruleSentence(r feature.Rule) ruleView {
	v := ruleView{Name: r.Name, When: conditionsSentence(r.Conditions)}
	switch {
	case r.Serve.Split != nil:
		parts := make([]string, 0, len(r.Serve.Split))
		for _, b := range slices.Sorted(maps.Keys(r.Serve.Split)) {
			parts = append(parts, b+" "+strconv.FormatFloat(r.Serve.Split[b]*100, 'g', 6, 64)+" %")
		}
		v.Serve = "a split: " + strings.Join(parts, ", ")
		if r.Serve.BucketBy != "" {
			v.Serve += ", bucketed by " + r.Serve.BucketBy
		}
	case r.Serve.Ring && r.Serve.BucketBy != "":
		v.Serve = "the ring, bucketed by " + r.Serve.BucketBy
	case r.Serve.Ring:
		v.Serve = "the ring"
	default:
		v.Serve = r.Serve.Bucket
	}
	return v
}

// targetingView is the feature page's targeting section.
type targetingView struct {
	Rules    []ruleView
	BucketBy string
	Data     targetingData
}

// targetingData is what the page's script needs to edit the rules.
type targetingData struct {
	Rules     []feature.Rule `json:"rules"`
	BucketBy  string         `json:"bucket_by"`
	Buckets   []string       `json:"buckets"`
	Segments  []string       `json:"segments"`
	Operators []opOption     `json:"operators"`
}

// targeting fills the feature page's targeting section.
func targeting(snap *feature.Snapshot, f feature.Feature) targetingView {
	v := targetingView{BucketBy: f.BucketBy, Data: targetingData{
		Rules: f.Rules, BucketBy: f.BucketBy, Buckets: bucketNames(f), Operators: opOptions(), Segments: []string{},
	}}
	if v.Data.Rules == nil {
		v.Data.Rules = []feature.Rule{}
	}
	for _, r := range f.Rules {
		v.Rules = append(v.Rules, ruleSentence(r))
	}
	for _, s := range snap.Segments() {
		v.Data.Segments = append(v.Data.Segments, s.Key)
	}
	return v
}

// testRequest is the body of POST /ui/features/KEY/test.
type testRequest struct {
	User    string         `json:"user"`
	Context map[string]any `json:"context"`
}

// testAnswer says what the feature serves a user with a context, as
// evaluation does.
type testAnswer struct {
	Feature string          `json:"feature"`
	User    string          `json:"user"`
	Bucket  *string         `json:"bucket"`
	Value   json.RawMessage `json:"value"`
	Version int             `json:"version"`
	Reason  string          `json:"reason"`
	Rule    string          `json:"rule,omitempty"`
	Text    string          `json:"text"` // the answer in words
	// Explain says why, step by step (feature.Explanation).
	Explain *feature.Explanation `json:"explain,omitempty"`
}

// testContext answers the page's "test a context" box: what the feature
// serves the user with the context, evaluated on the service's snapshot as
// POST /evaluate does, but not counted as an app's evaluation (the page's
// "served to apps" counts only apps). Errors are JSON, as the API's.
func (h *handler) testContext(c echo.Context) error {
	key := c.Param("key")
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, testBodyBytes+1))
	if err != nil {
		return jsonError(c, http.StatusBadRequest, "invalid_request", "the request's body could not be read")
	}
	if len(body) > testBodyBytes {
		return jsonError(c, http.StatusRequestEntityTooLarge, "too_large", "the request is larger than "+strconv.Itoa(testBodyBytes>>10)+" KiB")
	}
	var req testRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return jsonError(c, http.StatusBadRequest, "invalid_request", `give {"user":"u1","context":{"plan":"pro"}}: the body is not that JSON`)
	}
	if err := feature.ValidateUser(req.User); err != nil {
		return jsonError(c, http.StatusBadRequest, "invalid_request", feature.ErrorMessage(err))
	}
	var ctx feature.Context
	if req.Context != nil {
		if ctx, err = feature.ContextFromJSON(req.Context); err != nil {
			return jsonError(c, http.StatusBadRequest, "invalid_request", feature.ErrorMessage(err))
		}
	}
	e, err := h.in(c).Snapshot().PeekContext(key, req.User, ctx)
	var re *feature.Error
	switch {
	case feature.ErrorCode(err) == feature.ENotFound:
		return jsonError(c, http.StatusNotFound, "not_found", "there is no feature "+strconv.Quote(key))
	case errors.As(err, &re):
		return jsonError(c, http.StatusBadRequest, "invalid_request", re.Message)
	case err != nil:
		h.logError(c, "test a context", err)
		return jsonError(c, http.StatusInternalServerError, "internal", "the server could not evaluate the context")
	}
	a := testAnswer{Feature: key, User: req.User, Version: e.Version, Reason: e.Reason, Rule: e.Rule, Value: e.Value}
	if e.Bucket != "" {
		a.Bucket = &e.Bucket
	}
	if a.Value == nil {
		a.Value = json.RawMessage("null")
	}
	a.Text = testWords(e)
	if x, err := h.in(c).Snapshot().Explain(key, req.User, ctx); err == nil {
		a.Explain = &x
	}
	return c.JSON(http.StatusOK, a)
}

// testWords says why an evaluation served what it did.
func testWords(e feature.Evaluation) string {
	switch e.Reason {
	case feature.ReasonTargetingMatch:
		return "rule " + e.Rule + " matched"
	case feature.ReasonOverride:
		return "the user's override"
	case feature.ReasonDisabled:
		return "the feature is off"
	case feature.ReasonDefault:
		return "the context lacks the attribute the ring buckets by"
	case feature.ReasonRing:
		return "no rule matched: the ring"
	case feature.ReasonPrerequisiteFailed:
		return "prerequisite " + e.Prerequisite + " did not serve the user a required bucket: the fallback"
	}
	return e.Reason
}

func jsonError(c echo.Context, status int, code, msg string) error {
	return c.JSON(status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

// segmentsPage is the data of segments.html.
type segmentsPage struct {
	frame
	Title    string
	Segments []segmentItem
	Data     segmentsData
}

// segmentItem is one segment on its page.
type segmentItem struct {
	feature.Segment
	When     string // its conditions in words
	Features []string
	Versions []segmentVersionView
	More     bool // older versions are not listed
}

type segmentVersionView struct {
	feature.SegmentVersion
	When string
}

// segmentsData is what the segments page's script needs.
type segmentsData struct {
	Segments  []feature.Segment `json:"segments"`
	Operators []opOption        `json:"operators"`
}

// segments is the segments page: each segment in words, the features that
// use it, its history, and the forms that create, change and delete them.
func (h *handler) segments(c echo.Context) error {
	svc := h.in(c)
	snap := svc.Snapshot()
	p := segmentsPage{Title: "Segments", Data: segmentsData{Segments: []feature.Segment{}}}
	for _, op := range opOptions() {
		if op.Op != feature.OpInSegment { // segments cannot refer to segments
			p.Data.Operators = append(p.Data.Operators, op)
		}
	}
	for _, s := range snap.Segments() {
		item := segmentItem{Segment: s, When: segmentSentence(s), Features: snap.SegmentUsers(s.Key)}
		vs, err := svc.SegmentVersions(c.Request().Context(), s.Key, 0, segmentVersionsShown+1)
		switch {
		case feature.ErrorCode(err) == feature.ENotFound:
			continue // deleted since the snapshot was taken
		case err != nil:
			return h.internal(c, err)
		}
		if len(vs) > segmentVersionsShown {
			vs, item.More = vs[:segmentVersionsShown], true
		}
		for _, v := range vs {
			item.Versions = append(item.Versions, segmentVersionView{SegmentVersion: v, When: segmentSentence(v.Config)})
		}
		p.Segments = append(p.Segments, item)
		p.Data.Segments = append(p.Data.Segments, s)
	}
	return h.render(c, http.StatusOK, "segments", &p)
}
