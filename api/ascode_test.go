package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/document"
	"github.com/rollout/rollout/rollout/feature"
)

// docPlan decodes a plan or apply answer.
func docPlan(t *testing.T, r response) document.Plan {
	t.Helper()
	var p document.Plan
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatalf("answer %d is not a plan: %v: %s", r.status, err, r.body)
	}
	return p
}

// exported returns the server's export, as a document to edit.
func exported(t *testing.T, s *testServer) map[string]any {
	t.Helper()
	return s.must(http.StatusOK, "GET", "/api/export", nil).json(t)
}

// docFeature returns the feature key of document d, to edit.
func docFeature(t *testing.T, d map[string]any, key string) map[string]any {
	t.Helper()
	for _, f := range d["features"].([]any) {
		if f := f.(map[string]any); f["key"] == key {
			return f
		}
	}
	t.Fatalf("the document has no feature %q", key)
	return nil
}

func versionCount(t *testing.T, s *testServer, key string) int {
	t.Helper()
	var page struct{ Versions []json.RawMessage }
	if err := json.Unmarshal(s.must(http.StatusOK, "GET", "/api/features/"+key+"/versions", nil).body, &page); err != nil {
		t.Fatal(err)
	}
	return len(page.Versions)
}

// TestDocumentRoundTrip: an export plans to no change; an edited export
// plans each change with the churn the preview endpoint reports for the
// same buckets, exactly, applies as one batch, and then plans to no change.
func TestDocumentRoundTrip(t *testing.T) {
	// Plans end by their budget alone, never by the clock, which a loaded
	// machine may reach: the document's plan and the feature's are the same.
	s := newServer(t, "", api.Options{Plans: api.PlanLimits{Timeout: time.Hour}})
	s.seed()
	d := exported(t, s)
	p := docPlan(t, s.must(http.StatusOK, "POST", "/api/plan", d))
	if p.Changed != 0 || p.TotalChurn != 0 || len(p.Changes) != 6 {
		t.Fatalf("plan of the export: changed %d, total churn %v, %d changes; want no change of 6 features\n%+v", p.Changed, p.TotalChurn, len(p.Changes), p)
	}
	for _, ch := range p.Changes {
		if ch.Action != document.ActionNone || ch.FromVersion != 1 {
			t.Errorf("plan of the export: %s %s from version %d, want none from 1", ch.Feature, ch.Action, ch.FromVersion)
		}
	}

	// Shares and a value, a new feature, a description.
	dark := docFeature(t, d, "dark-mode")
	dark["tolerance"] = 0.005
	dark["buckets"] = []any{
		map[string]any{"name": "on", "share": 0.25, "value": map[string]any{"layout": "v2"}},
		map[string]any{"name": "off", "share": 0.75, "value": false},
	}
	docFeature(t, d, "banner")["description"] = "the banner"
	d["features"] = append(d["features"].([]any), map[string]any{"key": "new-flow", "tolerance": 0.005, "buckets": []any{
		map[string]any{"name": "off", "share": 0.9}, map[string]any{"name": "on", "share": 0.1}}})
	p = docPlan(t, s.must(http.StatusOK, "POST", "/api/plan", d))
	if p.Changed != 3 {
		t.Fatalf("plan: changed %d, want 3\n%s", p.Changed, mustJSON(p))
	}
	var total float64
	for _, ch := range p.Changes {
		switch ch.Feature {
		case "dark-mode":
			if ch.Action != document.ActionUpdate || ch.Plan == nil || !ch.Plan.WithinTolerance {
				t.Errorf("dark-mode: %s, plan %+v; want an update planned within tolerance", ch.Action, ch.Plan)
			}
			// The preview of the planned buckets reports the same churn,
			// exactly, and so does the feature's own plan endpoint.
			var buckets []map[string]any
			for _, b := range ch.Buckets {
				buckets = append(buckets, map[string]any{"name": b.Name, "replicas": b.Replicas})
			}
			var preview feature.Report
			if err := json.Unmarshal(s.must(http.StatusOK, "POST", "/api/features/dark-mode/preview", map[string]any{"buckets": buckets}).body, &preview); err != nil {
				t.Fatal(err)
			}
			if ch.Churn != preview.Churn || ch.RangeChurn != preview.RangeChurn || len(ch.Moves) != len(preview.Moves) {
				t.Errorf("dark-mode: plan churn %v (range %v, %d moves), preview %v (range %v, %d moves): want them equal", ch.Churn, ch.RangeChurn, len(ch.Moves), preview.Churn, preview.RangeChurn, len(preview.Moves))
			}
			own := s.must(http.StatusOK, "POST", "/api/features/dark-mode/plan", map[string]any{"targets": map[string]float64{"on": 0.25, "off": 0.75}, "mode": "auto", "tolerance": 0.005}).json(t)
			if got := own["report"].(map[string]any)["churn"].(float64); got != ch.Churn {
				t.Errorf("dark-mode: document plan churn %v, feature plan churn %v: want them equal", ch.Churn, got)
			}
			if !strings.Contains(strings.Join(ch.Fields, ","), "values") {
				t.Errorf("dark-mode: fields %v, want values among them", ch.Fields)
			}
		case "banner":
			if ch.Action != document.ActionUpdate || ch.Churn != 0 || strings.Join(ch.Fields, ",") != "description" {
				t.Errorf("banner: %s, churn %v, fields %v; want an update of the description moving no one", ch.Action, ch.Churn, ch.Fields)
			}
		case "new-flow":
			if ch.Action != document.ActionCreate || ch.FromVersion != 0 || ch.Churn != 1 {
				t.Errorf("new-flow: %s from %d churn %v; want a create from 0 moving everyone", ch.Action, ch.FromVersion, ch.Churn)
			}
		default:
			if ch.Action != document.ActionNone {
				t.Errorf("%s: %s, want none", ch.Feature, ch.Action)
			}
		}
		total += ch.Churn
	}
	if p.TotalChurn != total {
		t.Errorf("total churn %v, want the sum %v", p.TotalChurn, total)
	}

	// Applied with the plan's versions and resolved replicas.
	applied := docPlan(t, s.must(http.StatusOK, "POST", "/api/apply", map[string]any{
		"document": p.Document, "versions": p.Versions, "comment": "from git"}))
	if !applied.Applied || applied.Changed != 3 || applied.TotalChurn != p.TotalChurn {
		t.Errorf("apply: applied %v, changed %d, total %v; want the plan's 3 changes, total %v", applied.Applied, applied.Changed, applied.TotalChurn, p.TotalChurn)
	}
	v := s.must(http.StatusOK, "GET", "/api/features/dark-mode/versions/2", nil).json(t)
	if v["comment"] != "from git" || v["report"].(map[string]any)["churn"].(float64) != p.Changes[2].Churn {
		t.Errorf("dark-mode version 2: comment %v, churn %v; want the comment and the plan's churn", v["comment"], v["report"].(map[string]any)["churn"])
	}
	// Again: no change, and so is the new export.
	again := docPlan(t, s.must(http.StatusOK, "POST", "/api/plan", d))
	if again.Changed != 0 {
		t.Errorf("plan after apply: changed %d, want 0\n%s", again.Changed, mustJSON(again))
	}
	if p := docPlan(t, s.must(http.StatusOK, "POST", "/api/plan", exported(t, s))); p.Changed != 0 {
		t.Errorf("plan of the new export: changed %d, want 0", p.Changed)
	}
	// YAML, as the export writes it, plans the same.
	yamlDoc := string(s.must(http.StatusOK, "GET", "/api/export?format=yaml", nil).body)
	if p := docPlan(t, s.must(http.StatusOK, "POST", "/api/plan", yamlDoc, "Content-Type", "application/yaml")); p.Changed != 0 || len(p.Changes) != 7 {
		t.Errorf("plan of the YAML export: changed %d of %d, want 0 of 7", p.Changed, len(p.Changes))
	}
}

// TestDocumentApplyConflict: a feature changed between the plan and the
// apply makes the apply refuse with 412, naming it, and store nothing of
// the document.
func TestDocumentApplyConflict(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	d := exported(t, s)
	docFeature(t, d, "banner")["description"] = "changed by the file"
	docFeature(t, d, "limit")["description"] = "changed by the file"
	p := docPlan(t, s.must(http.StatusOK, "POST", "/api/plan", d))
	s.must(http.StatusOK, "PATCH", "/api/features/limit", map[string]any{"description": "changed meanwhile"})
	before := fmt.Sprint(versionCount(t, s, "banner"), versionCount(t, s, "limit"))
	r := s.do("POST", "/api/apply", map[string]any{"document": p.Document, "versions": p.Versions})
	if r.status != http.StatusPreconditionFailed || !strings.Contains(string(r.body), `feature \"limit\" is at version 2, not 1`) {
		t.Errorf("apply after a change = %d %s, want 412 naming limit", r.status, r.body)
	}
	if after := fmt.Sprint(versionCount(t, s, "banner"), versionCount(t, s, "limit")); after != before {
		t.Errorf("versions of banner and limit: %s after the refused apply, %s before", after, before)
	}
	// A feature the plan would create, created meanwhile.
	d["features"] = append(d["features"].([]any), map[string]any{"key": "fresh", "buckets": []any{map[string]any{"name": "A", "replicas": 1}}})
	p = docPlan(t, s.must(http.StatusOK, "POST", "/api/plan", d))
	s.must(http.StatusCreated, "POST", "/api/features", map[string]any{"key": "fresh", "buckets": []any{map[string]any{"name": "A"}}})
	r = s.do("POST", "/api/apply", map[string]any{"document": p.Document, "versions": p.Versions})
	if r.status != http.StatusPreconditionFailed || !strings.Contains(string(r.body), `feature \"fresh\" was created`) {
		t.Errorf("apply after a create = %d %s, want 412 naming fresh", r.status, r.body)
	}
}

// TestDocumentGuards: max_churn and max_total_churn refuse the whole
// document, storing nothing; an Idempotency-Key makes a retried apply
// apply nothing twice.
func TestDocumentGuards(t *testing.T) {
	s := newServer(t, "", api.Options{Plans: api.PlanLimits{Timeout: time.Hour}})
	s.seed()
	d := exported(t, s)
	docFeature(t, d, "dark-mode")["tolerance"] = 0.005
	docFeature(t, d, "limit")["tolerance"] = 0.005
	docFeature(t, d, "dark-mode")["buckets"] = []any{map[string]any{"name": "on", "share": 0.75}, map[string]any{"name": "off", "share": 0.25}}
	docFeature(t, d, "limit")["buckets"] = []any{map[string]any{"name": "low", "share": 0.75}, map[string]any{"name": "high", "share": 0.25}}
	for _, tc := range []struct {
		name  string
		guard map[string]any
		want  string
	}{
		{"max_churn", map[string]any{"max_churn": 0.1}, `feature \"dark-mode\" would move`},
		{"max_total_churn", map[string]any{"max_total_churn": 0.4}, "in all"},
	} {
		body := map[string]any{"document": d}
		for k, v := range tc.guard {
			body[k] = v
		}
		r := s.do("POST", "/api/apply", body)
		if r.status != http.StatusConflict || r.errorCode() != feature.EChurn || !strings.Contains(string(r.body), tc.want) {
			t.Errorf("%s: apply = %d %s, want 409 %s with %q", tc.name, r.status, r.body, feature.EChurn, tc.want)
		}
		if n := versionCount(t, s, "dark-mode") + versionCount(t, s, "limit"); n != 2 {
			t.Errorf("%s: %d versions of dark-mode and limit after the refusal, want 2", tc.name, n)
		}
	}
	body := map[string]any{"document": d, "max_churn": 0.5, "max_total_churn": 1}
	first := s.must(http.StatusOK, "POST", "/api/apply", body, "Idempotency-Key", "ci-run-1")
	again := s.must(http.StatusOK, "POST", "/api/apply", body, "Idempotency-Key", "ci-run-1")
	if again.header.Get("Idempotent-Replayed") != "true" || string(again.body) != string(first.body) {
		t.Errorf("retried apply: replayed %q, same answer %v; want the first answer replayed", again.header.Get("Idempotent-Replayed"), string(again.body) == string(first.body))
	}
	if n := versionCount(t, s, "dark-mode") + versionCount(t, s, "limit"); n != 4 {
		t.Errorf("%d versions of dark-mode and limit after the apply and its retry, want 4", n)
	}
}

// TestDocumentLimits: oversized, overlong and malformed documents are
// refused with a 4xx that says why, YAML ones with their line.
func TestDocumentLimits(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	many := make([]any, document.MaxFeatures+1)
	for i := range many {
		many[i] = map[string]any{"key": fmt.Sprintf("f%d", i), "buckets": []any{map[string]any{"name": "A", "replicas": 1}}}
	}
	huge := `{"features":[{"key":"a","description":"` + strings.Repeat("x", document.MaxBytes) + `","buckets":[]}]}`
	manySegments := make([]any, feature.MaxSegments+1)
	for i := range manySegments {
		manySegments[i] = map[string]any{"key": fmt.Sprintf("s%d", i)}
	}
	segment := func(conds ...any) map[string]any {
		return map[string]any{"features": []any{}, "segments": []any{map[string]any{"key": "s", "conditions": conds}}}
	}
	manyConds := make([]any, feature.MaxConditions+1)
	for i := range manyConds {
		manyConds[i] = map[string]any{"attribute": "a", "op": "present"}
	}
	for _, tc := range []struct {
		name, path string
		body       any
		header     []string
		status     int
		want       string
	}{
		{"too large", "/api/plan", huge, nil, http.StatusRequestEntityTooLarge, "larger than"},
		{"too large to apply", "/api/apply", huge, nil, http.StatusRequestEntityTooLarge, "larger than"},
		{"too many features", "/api/plan", map[string]any{"features": many}, nil, http.StatusUnprocessableEntity, "at most 1000"},
		{"no features", "/api/plan", map[string]any{}, nil, http.StatusUnprocessableEntity, "lists no features"},
		{"unknown field", "/api/plan", map[string]any{"features": []any{}, "extra": 1}, nil, http.StatusBadRequest, "unknown field"},
		{"shares not 100 %", "/api/plan", map[string]any{"features": []any{map[string]any{"key": "a", "buckets": []any{map[string]any{"name": "A", "share": 0.5}}}}}, nil, http.StatusUnprocessableEntity, "not 100 %"},
		{"YAML duplicate key", "/api/plan", "features:\n  - key: a\n    key: b\n", []string{"Content-Type", "application/yaml"}, http.StatusBadRequest, ":3:5: mapping key"},
		{"YAML wrong type", "/api/plan", "features:\n  - key: a\n    enabled: maybe\n", []string{"Content-Type", "application/yaml"}, http.StatusBadRequest, ":3:14: wrong type"},
		{"YAML over 1 MB", "/api/plan", "features: []\n" + strings.Repeat("# comment\n", 110_000), []string{"Content-Type", "application/yaml"}, http.StatusRequestEntityTooLarge, "send the document as JSON"},
		{"YAML alias", "/api/plan", "features:\n  - key: a\n    buckets: [{name: A, share: 1, value: &v [1]}]\n", []string{"Content-Type", "application/yaml"}, http.StatusBadRequest, ":3:42: anchors"},
		{"YAML apply", "/api/apply", "document:\n  features: []\nversions: {}\ncomment: [not text]\n", []string{"Content-Type", "application/yaml"}, http.StatusBadRequest, ":4:10: wrong type"},
		{"no document", "/api/apply", map[string]any{"versions": map[string]int{}}, nil, http.StatusBadRequest, "give the document"},
		{"versions leave a feature out", "/api/apply", map[string]any{"document": map[string]any{"features": []any{map[string]any{"key": "limit", "buckets": []any{map[string]any{"name": "low", "share": 1}}}}}, "versions": map[string]int{}}, nil, http.StatusUnprocessableEntity, "do not name feature"},
		{"negative guard", "/api/apply", map[string]any{"document": map[string]any{"features": []any{}}, "max_total_churn": -1}, nil, http.StatusBadRequest, "out of range"},
		{"rule serving nothing", "/api/plan", map[string]any{"features": []any{map[string]any{"key": "a", "rules": []any{map[string]any{"name": "r"}}, "buckets": []any{map[string]any{"name": "A", "share": 1}}}}}, nil, http.StatusUnprocessableEntity, `features[0].rules[0].serve: rule \"r\" serves nothing`},
		{"too many segments", "/api/plan", map[string]any{"features": []any{}, "segments": manySegments}, nil, http.StatusUnprocessableEntity, "at most 1000"},
		{"segment regexp too long", "/api/plan", segment(map[string]any{"attribute": "email", "op": "matches", "value": strings.Repeat("a", 10_000)}), nil, http.StatusUnprocessableEntity, "segments[0].conditions[0]"},
		{"segment bad regexp", "/api/plan", segment(map[string]any{"attribute": "email", "op": "matches", "value": "(a"}), nil, http.StatusUnprocessableEntity, "segments[0].conditions[0]"},
		{"segment too many conditions", "/api/plan", segment(manyConds...), nil, http.StatusUnprocessableEntity, "segments[0].conditions has more than 20 entries: a document takes at most 20"},
		{"segment versions leave a segment out", "/api/apply", map[string]any{"document": segment(), "versions": map[string]int{}}, nil, http.StatusUnprocessableEntity, "do not name segment"},
		{"in_segment of no segment", "/api/plan", map[string]any{"features": []any{map[string]any{"key": "a", "rules": []any{map[string]any{"name": "r", "conditions": []any{map[string]any{"op": "in_segment", "value": "nope"}}, "serve": map[string]any{"bucket": "A"}}}, "buckets": []any{map[string]any{"name": "A", "share": 1}}}}}, nil, http.StatusUnprocessableEntity, `in_segment names segment \"nope\", which neither`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do("POST", tc.path, tc.body, tc.header...)
			if r.status != tc.status || !strings.Contains(string(r.body), tc.want) {
				t.Errorf("POST %s = %d %.300s, want %d with %q", tc.path, r.status, r.body, tc.status, tc.want)
			}
		})
	}
	if n := len(s.svc.Snapshot().Keys()); n != 6 {
		t.Errorf("%d features after refused documents, want the 6 seeded", n)
	}
}

func mustJSON(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// TestDocumentPlanDeadline: a document whose plans outlast the planner's
// deadline is refused with 422, saying so, and its apply stores nothing.
func TestDocumentPlanDeadline(t *testing.T) {
	s := newServer(t, "", api.Options{Plans: api.PlanLimits{Timeout: time.Millisecond}})
	s.seed()
	api.SetPlanHook(t, func(ctx context.Context) func() {
		<-ctx.Done() // the plan's deadline
		return nil
	})
	d := map[string]any{"features": []any{map[string]any{"key": "dark-mode", "buckets": []any{
		map[string]any{"name": "on", "share": 0.1}, map[string]any{"name": "off", "share": 0.9}}}}}
	for _, tc := range []struct {
		path string
		body any
	}{{"/api/plan", d}, {"/api/apply", map[string]any{"document": d}}} {
		r := s.do("POST", tc.path, tc.body)
		if r.status != http.StatusUnprocessableEntity || !strings.Contains(string(r.body), "the planner stopped (deadline)") {
			t.Errorf("POST %s past the planner's deadline = %d %s, want 422 saying the planner stopped", tc.path, r.status, r.body)
		}
	}
	if n := versionCount(t, s, "dark-mode"); n != 1 {
		t.Errorf("dark-mode has %d versions, want 1", n)
	}
}

// TestDocumentPlansAtOnce: with every plan slot taken, a document's plan
// and apply are refused at once with 429 and a Retry-After.
func TestDocumentPlansAtOnce(t *testing.T) {
	s := newServer(t, "", api.Options{Plans: api.PlanLimits{Running: 1}})
	s.seed()
	started, release := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	api.SetPlanHook(t, func(context.Context) func() {
		// The first plan holds its slot until released; the others, if
		// any got one, go on.
		if first.CompareAndSwap(false, true) {
			started <- struct{}{}
			<-release
		}
		return nil
	})
	done := make(chan response, 1)
	d := map[string]any{"features": []any{}}
	go func() { done <- s.do("POST", "/api/plan", d) }()
	<-started
	for _, tc := range []struct {
		path string
		body any
	}{{"/api/plan", d}, {"/api/apply", map[string]any{"document": d}}} {
		r := s.do("POST", tc.path, tc.body)
		if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
			t.Errorf("POST %s with every slot taken = %d %s (Retry-After %q), want 429 with a Retry-After", tc.path, r.status, r.body, r.header.Get("Retry-After"))
		}
	}
	close(release)
	if r := <-done; r.status != http.StatusOK {
		t.Errorf("the plan that held the slot = %d %s, want 200", r.status, r.body)
	}
}
