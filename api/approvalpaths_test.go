package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/ramp"
	"github.com/rollout/rollout/rollout/request"
	"github.com/rollout/rollout/store/postgres"
	"github.com/rollout/rollout/store/storetest"
)

// onBoth runs test on a guarded server over SQLite and over PostgreSQL.
func onBoth(t *testing.T, test func(*testing.T, *guardedServer)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) { test(t, newGuardedServer(t)) })
	t.Run("postgres", func(t *testing.T) {
		db, err := postgres.Open(context.Background(), storetest.PostgresDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		test(t, newAuthServerOn(t, db, auth.Roles, false))
	})
}

// bucketOf evaluates feature for user with an e-mail through POST
// /evaluate, as an app does: its bucket, "" for none.
func (g *guardedServer) bucketOf(t *testing.T, feature, user, email string) string {
	t.Helper()
	body := g.must(t, 200, "sdk", "POST", "/evaluate", map[string]any{"user": user, "features": []string{feature}, "context": map[string]any{"email": email}})
	res := decodeJSON[struct {
		Results map[string]struct {
			Bucket *string
		}
	}](t, body).Results[feature]
	if res.Bucket == nil {
		return ""
	}
	return *res.Bucket
}

// errorMessage is the message of an error answer's body.
func errorMessage(t *testing.T, body string) string {
	t.Helper()
	return decodeJSON[struct{ Error struct{ Message string } }](t, body).Error.Message
}

// emailSegment is a segment of the e-mails op value matches.
func emailSegment(key, op, value string) map[string]any {
	return map[string]any{"key": key, "conditions": []any{map[string]any{"attribute": "email", "op": op, "value": value}}}
}

// segmentRules are rules serving bucket to the users of segment.
func segmentRules(segment, bucket string) map[string]any {
	return map[string]any{"rules": []any{map[string]any{"name": "r", "conditions": []any{map[string]any{"op": "in_segment", "value": segment}}, "serve": map[string]any{"bucket": bucket}}}}
}

// TestGatedArchiveRestore: an editor's archive and restore of a feature
// under approvals are change requests (202 with their preview; a dry run
// says they need an approval), applied when another person approves them;
// an editor may not change a segment that an archived feature under
// approvals uses (its restore would serve the change); a segment changed
// (by an admin) after a restore was requested makes the approval preview
// it again (412); only admins purge. The review's sequence, archive, widen
// the segment, restore, no longer gives every e-mail the rule's bucket.
func TestGatedArchiveRestore(t *testing.T) { onBoth(t, testGatedArchiveRestore) }

func testGatedArchiveRestore(t *testing.T, g *guardedServer) {
	g.addEditor(t, "carol")
	g.must(t, 201, "admin", "POST", "/api/segments", emailSegment("staff", "ends_with", "@example.com"))
	g.must(t, 201, "admin", "POST", "/api/features", with(map[string]any{"key": "gated", "buckets": []any{
		map[string]any{"name": "off", "replicas": 10}, map[string]any{"name": "on", "replicas": 0}}}, "rules", segmentRules("staff", "on")["rules"]))
	g.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"require_approval": map[string]any{"features": []string{"gated"}}})
	if got := g.bucketOf(t, "gated", "u1", "u1@other.org"); got != "off" {
		t.Fatalf("outsider served %q before anything, want off", got)
	}

	// Archive: a request, for DELETE and POST …/archive alike.
	if dry := decodeJSON[struct{ Needs string }](t, g.must(t, 200, "editor", "POST", "/api/features/gated/archive?dry_run=true", nil)); dry.Needs != "approval" {
		t.Errorf("editor's dry run of an archive needs %q, want approval", dry.Needs)
	}
	del := decodeJSON[requestBody](t, g.must(t, 202, "editor", "DELETE", "/api/features/gated", nil)).Request
	if del.Change.Kind != request.SpecArchive || del.State != request.Open || del.BaseVersion != 1 || del.Report.Churn != 1 || !strings.Contains(del.Summary, "archive") {
		t.Fatalf("archive request = %+v", del)
	}
	g.must(t, 403, "carol", "POST", "/api/requests/"+del.ID+"/cancel", nil)
	g.must(t, 200, "editor", "POST", "/api/requests/"+del.ID+"/cancel", nil)
	arch := decodeJSON[requestBody](t, g.must(t, 202, "editor", "POST", "/api/features/gated/archive", map[string]any{"comment": "pause it"})).Request
	g.must(t, 200, "viewer", "GET", "/api/features/gated", nil) // still served
	g.must(t, 403, "editor", "POST", "/api/requests/"+arch.ID+"/approve", nil)
	body := g.must(t, 200, "carol", "POST", "/api/requests/"+arch.ID+"/approve", nil)
	if r := decodeJSON[requestBody](t, body).Request; r.State != request.Applied || r.DecidedBy != "carol" {
		t.Fatalf("approved archive = %s", body)
	}
	g.must(t, 404, "viewer", "GET", "/api/features/gated", nil)

	// Widening the segment of an archived feature under approvals.
	everyone := emailSegment("staff", "contains", "@")
	status, body := g.send(t, "editor", "PUT", "/api/segments/staff", everyone)
	if status != http.StatusForbidden || !strings.Contains(body, "archived feature(s) gated, which need approvals") {
		t.Fatalf("editor widening the archived feature's segment = %d %s, want 403 naming gated", status, body)
	}
	if dry := decodeJSON[rollout.SegmentResult](t, g.must(t, 200, "editor", "PUT", "/api/segments/staff?dry_run=true", everyone)); dry.Needs != "admin" {
		t.Errorf("editor's dry run of the segment change needs %q, want admin", dry.Needs)
	}

	// Restore: a request with its preview.
	dry := decodeJSON[requestBody](t, g.must(t, 200, "editor", "POST", "/api/features/gated/restore?dry_run=true", nil))
	if dry.Report.Churn != 1 {
		t.Errorf("editor's dry run of the restore previews %+v, want every user back in the ring", dry.Report)
	}
	if d := decodeJSON[struct{ Needs string }](t, g.must(t, 200, "editor", "POST", "/api/features/gated/restore?dry_run=true", nil)); d.Needs != "approval" {
		t.Errorf("editor's dry run of a restore needs %q, want approval", d.Needs)
	}
	res := decodeJSON[requestBody](t, g.must(t, 202, "editor", "POST", "/api/features/gated/restore", nil))
	rest := res.Request
	if rest.Change.Kind != request.SpecRestore || rest.Report.Churn != 1 || res.Report.Churn != 1 || rest.Segments["staff"].Version != 1 ||
		!strings.Contains(rest.Summary, "restore") || !strings.Contains(rest.Summary, "staff at version 1") {
		t.Fatalf("restore request = %+v", rest)
	}
	g.must(t, 404, "viewer", "GET", "/api/features/gated", nil) // still archived

	// An admin widens the segment meanwhile: the approval previews anew.
	g.must(t, 200, "admin", "PUT", "/api/segments/staff", everyone)
	status, body = g.send(t, "carol", "POST", "/api/requests/"+rest.ID+"/approve", nil)
	if status != http.StatusPreconditionFailed || !strings.Contains(body, "staff (version 1 → 2)") || !strings.Contains(body, "approve it again") {
		t.Fatalf("approving the restore after its segment changed = %d %s, want 412 naming staff", status, body)
	}
	g.must(t, 404, "viewer", "GET", "/api/features/gated", nil)
	if again := decodeJSON[requestBody](t, g.must(t, 200, "viewer", "GET", "/api/requests/"+rest.ID, nil)).Request; again.Segments["staff"].Version != 2 || again.Repreviewed != 1 {
		t.Fatalf("restore request after its new preview = %+v", again)
	}
	// The admin puts it back; carol sees that preview and approves it.
	g.must(t, 200, "admin", "PUT", "/api/segments/staff", emailSegment("staff", "ends_with", "@example.com"))
	g.must(t, 412, "carol", "POST", "/api/requests/"+rest.ID+"/approve", nil)
	body = g.must(t, 200, "carol", "POST", "/api/requests/"+rest.ID+"/approve", nil)
	if r := decodeJSON[requestBody](t, body); r.Request.State != request.Applied || r.Request.AppliedVersion != 2 || r.Feature.Version != 2 {
		t.Fatalf("approved restore = %s", body)
	}
	for i := range 20 {
		u := fmt.Sprint("u", i)
		if got := g.bucketOf(t, "gated", u, u+"@other.org"); got != "off" {
			t.Fatalf("%s@other.org served %q after the restore, want off", u, got)
		}
	}
	if got := g.bucketOf(t, "gated", "s", "s@example.com"); got != "on" {
		t.Fatalf("staff served %q, want on", got)
	}

	// Purges are the admins' alone.
	g.must(t, 200, "admin", "DELETE", "/api/features/gated?dry_run=true", nil)
	g.must(t, 204, "admin", "DELETE", "/api/features/gated", nil)
	g.must(t, 403, "editor", "DELETE", "/api/features/gated?purge=true", nil)
	g.must(t, 204, "admin", "DELETE", "/api/features/gated?purge=true", nil)

	var got []string
	for _, e := range g.allEvents(t) {
		switch audit.Kind(e.Kind) {
		case audit.Archive, audit.Restore, audit.RequestApprove:
			got = append(got, fmt.Sprintf("%s by %s", e.Kind, e.Actor))
		}
	}
	want := "archive by editor-bot, approved by carol, request_approve by carol, restore by editor-bot, approved by carol, request_approve by carol, archive by admin-bot"
	if strings.Join(got, ", ") != want {
		t.Errorf("events:\n%s\nwant\n%s", strings.Join(got, ", "), want)
	}
}

// TestRequestSegmentsMoved: a request records the versions of the
// segments its preview was made with; approving it after one of them
// changed, or was deleted and created again, previews it anew and answers
// 412, and the next approval applies what that preview said.
func TestRequestSegmentsMoved(t *testing.T) { onBoth(t, testRequestSegmentsMoved) }

func testRequestSegmentsMoved(t *testing.T, g *guardedServer) {
	g.addEditor(t, "carol")
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)
	g.must(t, 201, "editor", "POST", "/api/segments", emailSegment("staff2", "ends_with", "@example.com"))
	g.must(t, 201, "editor", "POST", "/api/segments", emailSegment("staff3", "ends_with", "@example.com"))
	g.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"require_approval": map[string]any{"features": []string{"f"}}})

	r := decodeJSON[requestBody](t, g.must(t, 202, "editor", "PUT", "/api/features/f/rules", segmentRules("staff2", "treatment"))).Request
	if ref, ok := r.Segments["staff2"]; !ok || ref.Version != 1 || ref.CreatedAt.IsZero() || !strings.Contains(r.Summary, "staff2 at version 1") {
		t.Fatalf("request's segments = %+v (summary %q), want staff2 at version 1", r.Segments, r.Summary)
	}
	// No feature under approvals uses staff2 yet: the editor may widen it.
	g.must(t, 200, "editor", "PUT", "/api/segments/staff2", emailSegment("staff2", "contains", "@"))
	status, body := g.send(t, "carol", "POST", "/api/requests/"+r.ID+"/approve", nil)
	if status != http.StatusPreconditionFailed || !strings.Contains(body, "staff2 (version 1 → 2)") || !strings.Contains(body, "staff2 at version 2") {
		t.Fatalf("approval after the segment changed = %d %s, want 412 naming staff2 and its new version", status, body)
	}
	if f := decodeJSON[feature.Feature](t, g.must(t, 200, "viewer", "GET", "/api/features/f", nil)); f.Version != 1 || len(f.Rules) != 0 {
		t.Fatalf("feature after the refused approval = %+v, want version 1 without rules", f)
	}
	again := decodeJSON[requestBody](t, g.must(t, 200, "viewer", "GET", "/api/requests/"+r.ID, nil)).Request
	if again.State != request.Open || again.Segments["staff2"].Version != 2 || again.Repreviewed != 1 || again.BaseVersion != 1 {
		t.Fatalf("request after its new preview = %+v", again)
	}
	g.must(t, 200, "carol", "POST", "/api/requests/"+r.ID+"/approve", nil)
	if got := g.bucketOf(t, "f", "x", "x@anywhere.org"); got != "treatment" {
		t.Fatalf("served %q after the approved rules, want treatment (the segment as approved)", got)
	}

	// A segment deleted and created again starts at version 1 anew: its
	// creation time tells it from the one previewed.
	r3 := decodeJSON[requestBody](t, g.must(t, 202, "editor", "PUT", "/api/features/f/rules", segmentRules("staff3", "control"))).Request
	g.must(t, 204, "editor", "DELETE", "/api/segments/staff3", nil)
	g.must(t, 201, "editor", "POST", "/api/segments", emailSegment("staff3", "contains", "@"))
	status, body = g.send(t, "carol", "POST", "/api/requests/"+r3.ID+"/approve", nil)
	if status != http.StatusPreconditionFailed || !strings.Contains(body, "staff3 (version 1 → 1)") {
		t.Fatalf("approval after the segment was made again = %d %s, want 412", status, body)
	}
	// Deleted since: the approval says the change no longer applies.
	g.must(t, 204, "editor", "DELETE", "/api/segments/staff3", nil)
	if status, body := g.send(t, "carol", "POST", "/api/requests/"+r3.ID+"/approve", nil); status != http.StatusUnprocessableEntity || !strings.Contains(body, "no longer applies") {
		t.Fatalf("approval after the segment was deleted = %d %s, want 422", status, body)
	}
}

// TestEditorRuleBucketBy: a rule serving the ring with its own bucket_by
// places the users it matches anew, as the feature's bucket_by does: an
// editor's change of it (added, changed, removed, on a new rule or a
// removed one) is refused as a reshuffle, through the rules route and a
// document alike, unless approvals cover the feature (then a request);
// admins make it.
func TestEditorRuleBucketBy(t *testing.T) {
	g := newGuardedServer(t)
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)
	ring := func(name, by string) map[string]any {
		serve := map[string]any{"ring": true}
		if by != "" {
			serve["bucket_by"] = by
		}
		return map[string]any{"name": name, "conditions": []any{map[string]any{"attribute": "plan", "op": "eq", "value": name}}, "serve": serve}
	}
	rules := func(rs ...map[string]any) map[string]any {
		out := []any{}
		for _, r := range rs {
			out = append(out, r)
		}
		return map[string]any{"rules": out}
	}
	g.must(t, 200, "editor", "PUT", "/api/features/f/rules", rules(ring("beta", ""))) // the ring as it is: nobody moves
	for _, tt := range []struct {
		name  string
		rules map[string]any
		want  string
	}{
		{"added to a rule", rules(ring("beta", "org")), `rule "beta" serves the ring hashing attribute org, where its users were hashed by the user ID`},
		{"on a new rule", rules(ring("beta", ""), ring("pro", "org")), `rule "pro" serves the ring hashing attribute org`},
	} {
		status, body := g.send(t, "editor", "PUT", "/api/features/f/rules", tt.rules)
		if msg := errorMessage(t, body); status != http.StatusForbidden || !strings.Contains(msg, tt.want) || !strings.Contains(msg, "as a reshuffle places them") {
			t.Errorf("%s: editor's rules = %d %s, want 403 saying %s", tt.name, status, body, tt.want)
		}
		if dry := decodeJSON[struct{ Needs string }](t, g.must(t, 200, "editor", "PUT", "/api/features/f/rules?dry_run=true", tt.rules)); dry.Needs != "admin" {
			t.Errorf("%s: editor's dry run needs %q, want admin", tt.name, dry.Needs)
		}
	}
	g.must(t, 200, "admin", "PUT", "/api/features/f/rules", rules(ring("beta", "org")))
	for _, tt := range []struct {
		name  string
		rules map[string]any
		want  string
	}{
		{"changed", rules(ring("beta", "team")), `rule "beta" serves the ring hashing attribute team, where its users were hashed by attribute org`},
		{"removed from a rule", rules(ring("beta", "")), `rule "beta" serves the ring hashing the user ID, where its users were hashed by attribute org`},
		{"with its rule", rules(), `rule "beta", which served the ring hashing attribute org, is removed`},
	} {
		if status, body := g.send(t, "editor", "PUT", "/api/features/f/rules", tt.rules); status != http.StatusForbidden || !strings.Contains(errorMessage(t, body), tt.want) {
			t.Errorf("%s: editor's rules = %d %s, want 403 saying %s", tt.name, status, body, tt.want)
		}
	}
	// Other changes of that rule stay the editors'.
	moved := ring("beta", "org")
	moved["conditions"] = []any{map[string]any{"attribute": "plan", "op": "in", "value": []string{"beta", "trial"}}}
	g.must(t, 200, "editor", "PUT", "/api/features/f/rules", rules(moved))

	doc := func(rs map[string]any) map[string]any {
		return map[string]any{"document": map[string]any{"features": []any{map[string]any{"key": "f", "rules": rs["rules"], "buckets": []any{
			map[string]any{"name": "control", "replicas": 50}, map[string]any{"name": "treatment", "replicas": 50}}}}}}
	}
	if status, body := g.send(t, "editor", "POST", "/api/apply", doc(rules(ring("beta", "team")))); status != http.StatusForbidden || !strings.Contains(errorMessage(t, body), `rule "beta" serves the ring hashing attribute team`) {
		t.Errorf("editor's document changing a rule's bucket_by = %d %s, want 403", status, body)
	}
	if f := decodeJSON[feature.Feature](t, g.must(t, 200, "viewer", "GET", "/api/features/f", nil)); f.Rules[0].Serve.BucketBy != "org" {
		t.Fatalf("rule after the refused changes = %+v, want bucket_by org", f.Rules[0])
	}
	g.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"require_approval": map[string]any{"features": []string{"f"}}})
	r := decodeJSON[requestBody](t, g.must(t, 202, "editor", "PUT", "/api/features/f/rules", rules(ring("beta", "team")))).Request
	if r.Change.Kind != request.SpecSetRules {
		t.Fatalf("request = %+v", r)
	}
	g.must(t, 200, "admin", "POST", "/api/requests/"+r.ID+"/approve", nil)
}

// TestEditorRampChurn: each step of an editor's ramp is held to the
// editors' churn limit, as a change of theirs is: a ramp whose step moves
// more is refused (a dry run says it needs an admin), one of small steps
// starts; where approvals cover the feature any editor's ramp is a change
// request with its steps' preview, started when another person approves
// it; and a step that, when it comes, would move more than the limit
// pauses the ramp.
func TestEditorRampChurn(t *testing.T) { onBoth(t, testEditorRampChurn) }

func testEditorRampChurn(t *testing.T, g *guardedServer) {
	ctx := context.Background()
	g.addEditor(t, "carol")
	onOff := func(key string) map[string]any {
		return map[string]any{"key": key, "buckets": []any{map[string]any{"name": "off", "replicas": 55}, map[string]any{"name": "on", "replicas": 45}}}
	}
	g.must(t, 201, "editor", "POST", "/api/features", onOff("f"))
	g.must(t, 403, "editor", "PUT", "/api/features/f/buckets/off", map[string]any{"replicas": 5})
	all := map[string]any{"bucket": "on", "steps": []float64{1}}
	status, body := g.send(t, "editor", "POST", "/api/features/f/ramps", all)
	if status != http.StatusForbidden || !strings.Contains(body, "step 1 of the ramp (to 100 %) would move") || !strings.Contains(body, "more than the editors' limit of 25 %") {
		t.Fatalf("editor's ramp to 100 %% at once = %d %s, want 403 naming the step", status, body)
	}
	many := map[string]any{"bucket": "on", "steps": []float64{0.55, 0.6, 0.9, 1}, "every": "1s"}
	status, body = g.send(t, "editor", "POST", "/api/features/f/ramps", many)
	if status != http.StatusForbidden || !strings.Contains(body, "step 3 of the ramp (to 90 %)") {
		t.Fatalf("editor's ramp with one step over the limit = %d %s, want 403 naming step 3", status, body)
	}
	for _, q := range []string{"?dry_run=true", ""} {
		path := "/api/features/f/ramps" + q
		dry := map[string]any{"bucket": "on", "steps": []float64{1}}
		if q == "" {
			dry["dry_run"] = true
		}
		if p := decodeJSON[struct{ Needs string }](t, g.must(t, 200, "editor", "POST", path, dry)); p.Needs != "admin" {
			t.Errorf("editor's dry run (%s) of the big ramp needs %q, want admin", q, p.Needs)
		}
	}
	if rs := decodeJSON[rampsAnswer](t, g.must(t, 200, "viewer", "GET", "/api/ramps", nil)); len(rs.Ramps) != 0 {
		t.Fatalf("refused ramps were stored: %+v", rs.Ramps)
	}
	small := decodeJSON[rampAnswer](t, g.must(t, 201, "editor", "POST", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.55, 0.65}, "every": "1s"})).Ramp
	if small.Role != auth.RoleEditor || small.ApprovedBy != "" {
		t.Fatalf("editor's ramp = %+v, want role editor, not approved", small)
	}
	// The limit is lowered before the first step: it pauses.
	g.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"max_churn": 0.05})
	if n, err := g.svc.ApplyDueRamps(ctx); n != 0 || err != nil {
		t.Fatalf("ApplyDueRamps = %d, %v; want no step applied", n, err)
	}
	paused := decodeJSON[rampAnswer](t, g.must(t, 200, "viewer", "GET", "/api/features/f/ramps/"+small.ID, nil)).Ramp
	if paused.State != ramp.Paused || !strings.Contains(paused.Reason, "more than the editors' limit of 5 %") {
		t.Fatalf("editor's ramp over the lowered limit = %+v, want paused naming the limit", paused)
	}
	g.must(t, 200, "editor", "POST", "/api/features/f/ramps/"+small.ID+"/cancel", nil)
	g.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"max_churn": 0.25})
	// Admins' ramps are not held to it.
	g.must(t, 201, "admin", "POST", "/api/features", onOff("g"))
	g.must(t, 201, "admin", "POST", "/api/features/g/ramps", all)

	// Under approvals: a request, started on approval.
	g.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"require_approval": map[string]any{"features": []string{"f"}}})
	if p := decodeJSON[struct{ Needs string }](t, g.must(t, 200, "editor", "POST", "/api/features/f/ramps?dry_run=true", many)); p.Needs != "approval" {
		t.Errorf("editor's dry run under approvals needs %q, want approval", p.Needs)
	}
	a := decodeJSON[struct {
		Request request.Request
		Steps   []ramp.StepPreview
	}](t, g.must(t, 202, "editor", "POST", "/api/features/f/ramps", many))
	r := a.Request
	if r.Change.Kind != request.SpecRamp || r.Change.Ramp == nil || len(r.RampSteps) != 4 || len(a.Steps) != 4 || r.Report.Churn < 0.5 || !strings.Contains(r.Summary, "ramp on: 55 % → 60 % → 90 % → 100 %, a step every 1s") {
		t.Fatalf("ramp request = %+v", a)
	}
	if rs := decodeJSON[rampsAnswer](t, g.must(t, 200, "viewer", "GET", "/api/features/f/ramps", nil)); len(rs.Ramps) != 1 {
		t.Fatalf("%d ramps of f after the request, want the canceled one only", len(rs.Ramps))
	}
	g.must(t, 403, "editor", "POST", "/api/requests/"+r.ID+"/approve", nil)
	done := decodeJSON[struct{ Request request.Request }](t, g.must(t, 200, "carol", "POST", "/api/requests/"+r.ID+"/approve", nil)).Request
	if done.State != request.Applied || done.AppliedRamp == "" {
		t.Fatalf("approved ramp request = %+v", done)
	}
	started := decodeJSON[rampAnswer](t, g.must(t, 200, "viewer", "GET", "/api/features/f/ramps/"+done.AppliedRamp, nil)).Ramp
	if started.ApprovedBy != "carol" || started.Actor != "editor-bot" || started.State != ramp.Active || len(started.Steps) != 4 {
		t.Fatalf("ramp started by the approval = %+v", started)
	}
	if n, err := g.svc.ApplyDueRamps(ctx); n == 0 || err != nil {
		t.Fatalf("ApplyDueRamps = %d, %v; want the approved ramp's due steps applied", n, err)
	}
	if ev := g.audit(t, "viewer", "/api/audit?kind=request_approve").Events; len(ev) != 1 || ev[0].Actor != "carol" {
		t.Fatalf("request_approve events = %+v", ev)
	}
}

// TestEditorRampUnderApprovals: a ramp an editor started before approvals
// came to cover its feature applies no step afterwards: the runner pauses
// it, saying it needs an approval (in the ramp and the audit trail);
// its author may not resume it; another editor's resume approves it, and
// its steps apply. Admins' ramps are not paused.
func TestEditorRampUnderApprovals(t *testing.T) { onBoth(t, testEditorRampUnderApprovals) }

func testEditorRampUnderApprovals(t *testing.T, g *guardedServer) {
	ctx := context.Background()
	g.addEditor(t, "carol")
	for _, key := range []string{"f", "g"} {
		g.must(t, 201, "editor", "POST", "/api/features", map[string]any{"key": key, "buckets": []any{
			map[string]any{"name": "off", "replicas": 55}, map[string]any{"name": "on", "replicas": 45}}})
	}
	// Both steps are due at once.
	start := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	editors := decodeJSON[rampAnswer](t, g.must(t, 201, "editor", "POST", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.55, 0.65}, "every": "1m", "start": start})).Ramp
	admins := decodeJSON[rampAnswer](t, g.must(t, 201, "admin", "POST", "/api/features/g/ramps", map[string]any{"bucket": "on", "steps": []float64{0.55}})).Ramp
	g.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"require_approval": map[string]any{"all": true}})

	if n, err := g.svc.ApplyDueRamps(ctx); n != 1 || err != nil {
		t.Fatalf("ApplyDueRamps = %d, %v; want 1 (the admin's step only)", n, err)
	}
	if v := decodeJSON[struct{ Version int }](t, g.must(t, 200, "viewer", "GET", "/api/features/f", nil)).Version; v != 1 {
		t.Fatalf("feature f at version %d, want 1: the editor's ramp applied a step under approvals", v)
	}
	got := decodeJSON[rampAnswer](t, g.must(t, 200, "viewer", "GET", "/api/features/f/ramps/"+editors.ID, nil)).Ramp
	if got.State != ramp.Paused || !got.NeedsApproval || !strings.Contains(got.Reason, "needs approval") || got.Next != 0 {
		t.Fatalf("editor's ramp under approvals = %+v, want paused, needing approval", got)
	}
	if a := decodeJSON[rampAnswer](t, g.must(t, 200, "viewer", "GET", "/api/features/g/ramps/"+admins.ID, nil)).Ramp; a.State != ramp.Done {
		t.Fatalf("admin's ramp = %+v, want done", a)
	}
	pauses := g.audit(t, "viewer", "/api/audit?kind=ramp_pause&feature=f").Events
	if len(pauses) != 1 || !strings.Contains(pauses[0].Summary, "needs approval") {
		t.Fatalf("ramp_pause events = %+v, want one saying it needs approval", pauses)
	}
	// The runner leaves it paused.
	if n, err := g.svc.ApplyDueRamps(ctx); n != 0 || err != nil {
		t.Fatalf("ApplyDueRamps again = %d, %v; want 0", n, err)
	}
	base := "/api/features/f/ramps/" + editors.ID
	if status, body := g.send(t, "editor", "POST", base+"/resume", nil); status != http.StatusForbidden || !strings.Contains(body, "another editor or an admin approves") {
		t.Fatalf("author's resume = %d %s, want 403", status, body)
	}
	resumed := decodeJSON[rampAnswer](t, g.must(t, 200, "carol", "POST", base+"/resume", nil)).Ramp
	if resumed.State != ramp.Active || resumed.NeedsApproval || resumed.ApprovedBy != "carol" {
		t.Fatalf("resumed ramp = %+v, want active, approved by carol", resumed)
	}
	if n, err := g.svc.ApplyDueRamps(ctx); n != 2 || err != nil {
		t.Fatalf("ApplyDueRamps after the approval = %d, %v; want 2", n, err)
	}
	es := g.audit(t, "viewer", "/api/audit?kind=ramp_resume&feature=f").Events
	if len(es) != 1 || es[0].Actor != "carol" || !strings.Contains(es[0].Summary, "approving its steps") {
		t.Fatalf("ramp_resume events = %+v", es)
	}
}
