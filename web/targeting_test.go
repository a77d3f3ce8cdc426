package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/rollout/rollout/rollout"
)

// TestSegmentsPage: the segments page lists each segment in words, the
// features that use it and its history, after a change of the segment.
func TestSegmentsPage(t *testing.T) {
	a := newApp(t, 0)
	a.seed(t)
	ctx := context.Background()
	staff := rollout.Segment{Key: "staff", Description: "our <people>", Conditions: []rollout.Condition{{Attribute: "email", Op: rollout.OpEndsWith, Value: json.RawMessage(`"@example.com"`)}}}
	if _, err := a.svc.CreateSegment(ctx, staff, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	rules := []rollout.Rule{{Name: "staff", Conditions: []rollout.Condition{{Op: rollout.OpInSegment, Value: json.RawMessage(`"staff"`)}}, Serve: rollout.Serve{Bucket: "on"}}}
	if _, err := a.svc.Change(ctx, "dark-mode", rollout.SetRules(rules), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	conds := []rollout.Condition{{Attribute: "email", Op: rollout.OpEndsWith, Value: json.RawMessage(`"@example.org"`)}, {Attribute: "seats", Op: rollout.OpGte, Value: json.RawMessage(`10`)}}
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
