package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// TestSegmentsPage: the segments page lists each segment in words, the
// features that use it and its history, after a change of the segment.
func TestSegmentsPage(t *testing.T) {
	a := newApp(t, 0)
	a.seed(t)
	ctx := context.Background()
	staff := feature.Segment{Key: "staff", Description: "our <people>", Conditions: []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.com"`)}}}
	if _, err := a.svc.CreateSegment(ctx, staff, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	rules := []feature.Rule{{Name: "staff", Conditions: []feature.Condition{{Op: feature.OpInSegment, Value: json.RawMessage(`"staff"`)}}, Serve: feature.Serve{Bucket: "on"}}}
	if _, err := a.svc.Change(ctx, "dark-mode", change.SetRules(rules), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	conds := []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.org"`)}, {Attribute: "seats", Op: feature.OpGte, Value: json.RawMessage(`10`)}}
	if _, err := a.svc.UpdateSegment(ctx, "staff", "our <people>", conds, rollout.ChangeOptions{Actor: "carol"}); err != nil {
		t.Fatal(err)
	}
	rec := a.get(t, "/ui/segments")
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /ui/segments = %d: %s", rec.Code, rec.Body)
	}
	body := rec.Body.String()
	for _, want := range []string{
		`Users in it: <b>email ends with @example.org and seats ≥ 10</b>`,
		`<a href="/ui/features/dark-mode#targeting">dark-mode</a>`,
		`our &lt;people&gt;`,
		`History (2 versions)`,
		`<li data-version="2">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the segments page lacks %s", want)
		}
	}
	feature := a.get(t, "/ui/features/dark-mode").Body.String()
	if !strings.Contains(feature, `<li data-rule="staff"><span class="rule-name">staff</span> If in segment staff → serve <b>on</b></li>`) {
		t.Errorf("the feature page does not say its rule")
	}
}

// post sends body to path as JSON from the dashboard's own origin.
func (a *app) post(t *testing.T, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	a.e.ServeHTTP(rec, req)
	return rec
}

// TestTestContext: the "test a context" route answers as POST /evaluate
// does, without counting the evaluation, and refuses bad requests with a
// JSON 4xx.
func TestTestContext(t *testing.T) {
	a := newApp(t, 10)
	a.seed(t)
	ctx := context.Background()
	rules := []feature.Rule{
		{Name: "big", Conditions: []feature.Condition{{Attribute: "seats", Op: feature.OpGte, Value: json.RawMessage(`10`)}}, Serve: feature.Serve{Bucket: "on"}},
		{Name: "de", Conditions: []feature.Condition{{Attribute: "country", Op: feature.OpIn, Value: json.RawMessage(`["DE"]`)}}, Serve: feature.Serve{Ring: true, BucketBy: "org"}},
	}
	if _, err := a.svc.Change(ctx, "dark-mode", change.SetRules(rules), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	before, _ := a.svc.Exposures(ctx, "dark-mode")
	for _, c := range []string{`{"seats":12}`, `{"seats":"12"}`, `{"country":"DE","org":"acme"}`, `{"country":"DE"}`, `{"groups":["a","b"],"beta":true}`, `{}`} {
		for _, user := range []string{"u1", "user:7"} {
			rec := a.post(t, "/ui/features/dark-mode/test", `{"user":"`+user+`","context":`+c+`}`)
			if rec.Code != http.StatusOK {
				t.Fatalf("test %s %s = %d %s", user, c, rec.Code, rec.Body)
			}
			var got struct {
				Bucket *string         `json:"bucket"`
				Value  json.RawMessage `json:"value"`
				Reason string          `json:"reason"`
				Rule   string          `json:"rule"`
				Text   string          `json:"text"`
			}
			json.Unmarshal(rec.Body.Bytes(), &got)
			ev := a.post(t, "/evaluate", `{"user":"`+user+`","context":`+c+`,"features":["dark-mode"]}`)
			var api struct {
				Results map[string]struct {
					Bucket *string         `json:"bucket"`
					Value  json.RawMessage `json:"value"`
					Reason string          `json:"reason"`
					Rule   string          `json:"rule"`
				} `json:"results"`
			}
			json.Unmarshal(ev.Body.Bytes(), &api)
			r := api.Results["dark-mode"]
			if (got.Bucket == nil) != (r.Bucket == nil) || (got.Bucket != nil && *got.Bucket != *r.Bucket) || got.Reason != r.Reason || got.Rule != r.Rule {
				t.Errorf("%s %s: the page's test says %s, /evaluate %s", user, c, rec.Body, ev.Body)
			}
			if got.Text == "" {
				t.Errorf("%s %s: no words", user, c)
			}
		}
	}
	// Only /evaluate counted: 12 evaluations, not 24.
	a.svc.FlushExposures(ctx)
	after, _ := a.svc.Exposures(ctx, "dark-mode")
	if n := after.Total - before.Total; n != 12 {
		t.Errorf("%d evaluations counted, want the 12 of /evaluate alone", n)
	}

	bad := []struct {
		path, body string
		status     int
	}{
		{"/ui/features/dark-mode/test", `{"user":`, http.StatusBadRequest},
		{"/ui/features/dark-mode/test", `[1,2]`, http.StatusBadRequest},
		{"/ui/features/dark-mode/test", `{"user":""}`, http.StatusBadRequest},
		{"/ui/features/dark-mode/test", `{"user":"u1","context":{"a":{"b":1}},"x":1}`, http.StatusOK}, // objects are ignored, as /evaluate does
		{"/ui/features/dark-mode/test", `{"user":"u1","context":{` + manyAttrs(65) + `}}`, http.StatusBadRequest},
		{"/ui/features/dark-mode/test", `{"user":"u1","context":{"a":"` + strings.Repeat("x", 2000) + `"}}`, http.StatusBadRequest},
		{"/ui/features/dark-mode/test", `{"user":"u1","context":{"a":"` + strings.Repeat("x", 300<<10) + `"}}`, http.StatusRequestEntityTooLarge},
		{"/ui/features/nope/test", `{"user":"u1"}`, http.StatusNotFound},
	}
	for _, c := range bad {
		rec := a.post(t, c.path, c.body)
		body := rec.Body.String()
		if len(body) > 200 {
			body = body[:200]
		}
		if rec.Code != c.status {
			t.Errorf("POST %s %.80s = %d, want %d: %s", c.path, c.body, rec.Code, c.status, body)
		}
		if c.status != http.StatusOK && !strings.Contains(rec.Body.String(), `"message"`) {
			t.Errorf("POST %s %.80s: no JSON error: %s", c.path, c.body, body)
		}
	}
	// Another site's page cannot use it.
	req := httptest.NewRequest(http.MethodPost, "/ui/features/dark-mode/test", strings.NewReader(`{"user":"u1"}`))
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.Header.Set("Origin", "https://evil.example")
	rec := httptest.NewRecorder()
	a.e.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("a cross-site test = %d, want 403", rec.Code)
	}
}

func manyAttrs(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = `"a` + strconv.Itoa(i) + `":"x"`
	}
	return strings.Join(parts, ",")
}

// TestStylesheetBalanced: every block of the stylesheet is closed, so that
// no section (after a merge, say) ends up inside another's @media.
func TestStylesheetBalanced(t *testing.T) {
	a := newApp(t, 10)
	css := a.get(t, "/ui/static/style.css").Body.String()
	depth := 0
	for i, line := range strings.Split(css, "\n") {
		depth += strings.Count(line, "{") - strings.Count(line, "}")
		if depth < 0 {
			t.Fatalf("line %d closes a block that is not open", i+1)
		}
		if strings.HasPrefix(line, "/* ") && depth != 0 {
			t.Errorf("line %d: the section %q starts inside a block", i+1, line)
		}
	}
	if depth != 0 {
		t.Errorf("the stylesheet ends with %d blocks open", depth)
	}
}
