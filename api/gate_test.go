package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/request"
	"github.com/rollout/rollout/store/postgres"
	"github.com/rollout/rollout/store/storetest"
)

// TestEditorTargeting: targeting's changes pass the same gate as other
// changes of an editor. A change of bucket_by places every user anew, as
// a reshuffle does: an editor's is refused (403), also when a rollback
// goes back across one, unless approvals cover the feature (then it is a
// request). A segment's change makes a new version of each feature that
// uses it: an editor's is refused when approvals cover any of them
// (naming them), as it cannot be one request. Rules changes and bucket_by
// changes under approvals are requests, applied when approved. Admins are
// not held to any of it.
func TestEditorTargeting(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testEditorTargeting(t, newGuardedServer(t)) })
	t.Run("postgres", func(t *testing.T) {
		db, err := postgres.Open(context.Background(), storetest.PostgresDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		testEditorTargeting(t, newAuthServerOn(t, db, auth.Roles, false))
	})
}

func testEditorTargeting(t *testing.T, g *guardedServer) {
	g.addEditor(t, "carol")
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)
	g.must(t, 201, "editor", "POST", "/api/features", map[string]any{"key": "other", "buckets": []any{
		map[string]any{"name": "off", "replicas": 1}, map[string]any{"name": "on", "replicas": 1}}})
	staff := map[string]any{"key": "staff", "conditions": []any{map[string]any{"attribute": "email", "op": "ends_with", "value": "@example.com"}}}
	g.must(t, 201, "editor", "POST", "/api/segments", staff)
	g.must(t, 201, "editor", "POST", "/api/segments", map[string]any{"key": "beta", "conditions": []any{map[string]any{"attribute": "plan", "op": "eq", "value": "beta"}}})
	rules := func(segment, bucket string) map[string]any {
		return map[string]any{"rules": []any{map[string]any{"name": "r", "conditions": []any{map[string]any{"op": "in_segment", "value": segment}}, "serve": map[string]any{"bucket": bucket}}}}
	}
	// Without approvals, an editor's rules change applies (the ring does
	// not change: its churn is 0).
	g.must(t, 200, "editor", "PUT", "/api/features/f/rules", rules("staff", "treatment"))
	g.must(t, 200, "editor", "PUT", "/api/features/other/rules", rules("beta", "on"))

	// A rule without conditions matches everyone no earlier rule matches
	// (every evaluation without a context): serving them one bucket
	// instead of the ring moves the ring's other share of them, which the
	// limit counts; serving them the ring moves nobody.
	everyone := func(serve map[string]any) map[string]any {
		return map[string]any{"rules": []any{rules("staff", "treatment")["rules"].([]any)[0],
			map[string]any{"name": "all", "conditions": []any{}, "serve": serve}}}
	}
	status, body := g.send(t, "editor", "PUT", "/api/features/f/rules", everyone(map[string]any{"bucket": "treatment"}))
	if status != http.StatusForbidden || !strings.Contains(body, "whom no rule with conditions matches") || !strings.Contains(body, "more than the editors' limit of 25 %") {
		t.Fatalf("editor's catch-all rule = %d %s, want 403 counting the users it moves", status, body)
	}
	if dry := decodeJSON[struct{ Needs string }](t, g.must(t, 200, "editor", "PUT", "/api/features/f/rules?dry_run=true", everyone(map[string]any{"bucket": "treatment"}))); dry.Needs != "admin" {
		t.Errorf("editor's dry run of a catch-all rule needs %q, want admin", dry.Needs)
	}
	g.must(t, 200, "editor", "PUT", "/api/features/f/rules", everyone(map[string]any{"ring": true}))
	g.must(t, 200, "admin", "PUT", "/api/features/f/rules", everyone(map[string]any{"bucket": "treatment"}))
	// Back to the ring: the treatment's share of the ring stays, the rest moves.
	g.must(t, 403, "editor", "PUT", "/api/features/f/rules", rules("staff", "treatment"))
	g.must(t, 200, "admin", "PUT", "/api/features/f/rules", rules("staff", "treatment"))

	// bucket_by: a reshuffle for editors.
	status, body = g.send(t, "editor", "PATCH", "/api/features/f", map[string]any{"bucket_by": "org"})
	if status != http.StatusForbidden || !strings.Contains(body, "bucket_by (the user ID → attribute org)") || !strings.Contains(body, "needs an admin") || !strings.Contains(body, `"report"`) {
		t.Fatalf("editor's bucket_by change = %d %s, want 403 naming bucket_by and an admin, with the report", status, body)
	}
	// The report's churn is what hashing anew moves: 2·p·(1-p) of a
	// p/(1-p) ring (the ring's shares are near 50/50, so near 0.5).
	rep := decodeJSON[struct {
		Error struct{ Report feature.Report }
	}](t, body).Error.Report
	if p := rep.SharesBefore["control"]; rep.Method != feature.MethodExpected || rep.Churn < 2*p*(1-p)-1e-9 || rep.Churn > 2*p*(1-p)+1e-9 || rep.Churn < 0.4 {
		t.Errorf("report of the bucket_by change = %+v, want the expected churn of the ring hashed anew", rep)
	}
	if dry := decodeJSON[struct{ Needs string }](t, g.must(t, 200, "editor", "PATCH", "/api/features/f?dry_run=true", map[string]any{"bucket_by": "org"})); dry.Needs != "admin" {
		t.Errorf("editor's dry run of a bucket_by change needs %q, want admin", dry.Needs)
	}
	// Even with the limit at 100 %.
	g.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"max_churn": 1})
	g.must(t, 403, "editor", "PATCH", "/api/features/f", map[string]any{"bucket_by": "org", "description": "by org"})
	g.must(t, 200, "admin", "PATCH", "/api/features/f", map[string]any{"bucket_by": "org"}) // version 3
	// A rollback across it places users anew too.
	if status, body := g.send(t, "editor", "POST", "/api/features/f/rollback", map[string]any{"version": 2}); status != http.StatusForbidden || !strings.Contains(body, "bucket_by (attribute org → the user ID)") {
		t.Fatalf("editor's rollback across a bucket_by change = %d %s, want 403", status, body)
	}

	// A segment's change, no approvals: applies, changing its features.
	seg := decodeJSON[rollout.SegmentResult](t, g.must(t, 200, "editor", "PUT", "/api/segments/staff", map[string]any{"conditions": []any{map[string]any{"attribute": "email", "op": "ends_with", "value": "@example.org"}}}))
	if strings.Join(seg.Features, ",") != "f" {
		t.Fatalf("segment change changed %v, want [f]", seg.Features)
	}

	// Approvals for f.
	g.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"require_approval": map[string]any{"features": []string{"f"}}})
	fVersion := func() int {
		return decodeJSON[struct{ Version int }](t, g.must(t, 200, "viewer", "GET", "/api/features/f", nil)).Version
	}
	v := fVersion()
	change := map[string]any{"description": "staff only", "conditions": []any{map[string]any{"attribute": "email", "op": "ends_with", "value": "@example.net"}}}
	status, body = g.send(t, "editor", "PUT", "/api/segments/staff", change)
	if status != http.StatusForbidden || !strings.Contains(body, `feature(s) f, which need approvals`) || !strings.Contains(body, "ask an admin") {
		t.Fatalf("editor's change of a segment a feature under approvals uses = %d %s, want 403 naming f", status, body)
	}
	if dry := decodeJSON[rollout.SegmentResult](t, g.must(t, 200, "editor", "PUT", "/api/segments/staff?dry_run=true", change)); dry.Needs != "admin" || !dry.DryRun {
		t.Errorf("editor's dry run of the segment change = %+v, want needs admin", dry)
	}
	if got := fVersion(); got != v {
		t.Fatalf("feature f at version %d after refused segment changes, want %d", got, v)
	}
	// Other segments, and segments no feature under approvals uses, stay
	// the editors'; admins change any.
	g.must(t, 200, "editor", "PUT", "/api/segments/beta", map[string]any{"conditions": []any{map[string]any{"attribute": "plan", "op": "in", "value": []string{"beta", "trial"}}}})
	g.must(t, 200, "admin", "PUT", "/api/segments/staff", change)
	v++
	g.must(t, 201, "editor", "POST", "/api/segments", map[string]any{"key": "spare", "conditions": []any{}})
	g.must(t, 204, "editor", "DELETE", "/api/segments/spare", nil)

	// Rules and bucket_by changes of f are requests, applied on approval.
	r := decodeJSON[requestBody](t, g.must(t, 202, "editor", "PUT", "/api/features/f/rules", rules("beta", "control"))).Request
	if r.Change.Kind != request.SpecSetRules || len(r.Change.Rules) != 1 || r.Change.Rules[0].Serve.Bucket != "control" || fVersion() != v {
		t.Fatalf("rules request = %+v (feature at %d, want %d)", r, fVersion(), v)
	}
	b := decodeJSON[requestBody](t, g.must(t, 202, "editor", "PATCH", "/api/features/f", map[string]any{"bucket_by": "", "description": "by user"})).Request
	if b.Change.Kind != request.SpecPatch || b.Change.BucketBy == nil || *b.Change.BucketBy != "" || b.Change.Description == nil || b.Report.Churn < 0.4 {
		t.Fatalf("bucket_by request = %+v", b)
	}
	empty := decodeJSON[requestBody](t, g.must(t, 202, "carol", "PUT", "/api/features/f/rules", map[string]any{"rules": []any{}})).Request
	g.must(t, 200, "carol", "POST", "/api/requests/"+r.ID+"/approve", nil)
	got := decodeJSON[feature.Feature](t, g.must(t, 200, "viewer", "GET", "/api/features/f", nil))
	if len(got.Rules) != 1 || got.Rules[0].Serve.Bucket != "control" || got.Segments()[0] != "beta" || got.Version != v+1 {
		t.Fatalf("feature after the approved rules request = %+v", got)
	}
	// The feature moved on: approving previews again (412), then applies.
	g.must(t, 412, "carol", "POST", "/api/requests/"+b.ID+"/approve", nil)
	g.must(t, 200, "carol", "POST", "/api/requests/"+b.ID+"/approve", nil)
	got = decodeJSON[feature.Feature](t, g.must(t, 200, "viewer", "GET", "/api/features/f", nil))
	if got.BucketBy != "" || got.Description != "by user" || len(got.Rules) != 1 {
		t.Fatalf("feature after the approved bucket_by request = %+v", got)
	}
	g.must(t, 412, "editor", "POST", "/api/requests/"+empty.ID+"/approve", nil)
	g.must(t, 200, "editor", "POST", "/api/requests/"+empty.ID+"/approve", nil)
	if got = decodeJSON[feature.Feature](t, g.must(t, 200, "viewer", "GET", "/api/features/f", nil)); len(got.Rules) != 0 {
		t.Fatalf("feature after the approved removal of its rules = %+v", got)
	}
	// Now no feature under approvals uses staff: the editor may change it.
	g.must(t, 200, "editor", "PUT", "/api/segments/staff", staff)
	// Admins' changes of f apply.
	g.must(t, 200, "admin", "PUT", "/api/features/f/rules", rules("staff", "treatment"))
	g.must(t, 200, "admin", "PATCH", "/api/features/f", map[string]any{"bucket_by": "org"})
}

// TestEditorDocumentTargeting: an editor's document may not give a
// feature another bucket_by (leaving it out goes back to the user ID):
// it places every user anew, as a reshuffle does.
func TestEditorDocumentTargeting(t *testing.T) {
	g := newGuardedServer(t)
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)
	doc := map[string]any{"document": map[string]any{"features": []any{map[string]any{"key": "f", "description": "d", "buckets": []any{
		map[string]any{"name": "control", "replicas": 50}, map[string]any{"name": "treatment", "replicas": 50}}}}}}
	g.must(t, 200, "editor", "POST", "/api/apply", doc)
	g.must(t, 200, "admin", "PATCH", "/api/features/f", map[string]any{"bucket_by": "org"})
	status, body := g.send(t, "editor", "POST", "/api/apply", doc)
	if status != http.StatusForbidden || !strings.Contains(body, "another bucket_by (attribute org → the user ID)") {
		t.Fatalf("editor's document dropping bucket_by = %d %s, want 403", status, body)
	}
	if f := decodeJSON[feature.Feature](t, g.must(t, 200, "viewer", "GET", "/api/features/f", nil)); f.BucketBy != "org" {
		t.Fatalf("bucket_by after the refused document = %q, want org", f.BucketBy)
	}
	g.must(t, 200, "admin", "POST", "/api/apply", doc)
}
