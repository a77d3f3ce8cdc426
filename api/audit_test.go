package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
)

// auditEvent is an event as GET /api/audit answers it.
type auditEvent struct {
	ID      int64     `json:"id"`
	Time    time.Time `json:"time"`
	Actor   string    `json:"actor"`
	Kind    string    `json:"kind"`
	Feature string    `json:"feature"`
	Summary string    `json:"summary"`
	Comment string    `json:"comment"`
	Subject string    `json:"subject"`
	Version int       `json:"version"`
}

type auditAnswer struct {
	Events []auditEvent `json:"events"`
	Next   *string      `json:"next"`
}

// audit reads GET path (/api/audit?…) as role.
func (g *guardedServer) audit(t *testing.T, role, path string) auditAnswer {
	t.Helper()
	status, body := g.send(t, role, "GET", path, nil)
	if status != http.StatusOK {
		t.Fatalf("GET %s as %s = %d %s, want 200", path, role, status, body)
	}
	var a auditAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
	return a
}

// allEvents returns the whole audit trail, oldest first.
func (g *guardedServer) allEvents(t *testing.T) []auditEvent {
	t.Helper()
	return g.audit(t, "viewer", "/api/audit?order=asc&limit=1000").Events
}

func (g *guardedServer) must(t *testing.T, want int, role, method, path string, body any) string {
	t.Helper()
	status, got := g.send(t, role, method, path, body)
	if status != want {
		t.Fatalf("%s %s as %s = %d %s, want %d", method, path, role, status, got, want)
	}
	return got
}

var twoBuckets = map[string]any{"key": "f", "buckets": []any{
	map[string]any{"name": "control", "replicas": 50}, map[string]any{"name": "treatment", "replicas": 50}}}

// TestArchiveRestorePurge: DELETE archives (apps get not-found, the list
// and the in-app sync drop the feature, its history stays, its key stays
// taken); restore serves it again as a new version; only an admin purges,
// only an archived feature, and the audit trail keeps every event.
func TestArchiveRestorePurge(t *testing.T) {
	g := newGuardedServer(t)
	g.must(t, 201, "editor", "POST", "/api/features", with(twoBuckets, "comment", "first try"))
	// 43 % of users move: above the editors' limit, an admin's change.
	g.must(t, 200, "admin", "PUT", "/api/features/f/buckets/treatment", map[string]any{"replicas": 10})
	g.must(t, 200, "sdk", "GET", "/evaluate?feature=f&user=u1", nil)

	g.must(t, 422, "editor", "DELETE", "/api/features/f", map[string]any{"comment": strings.Repeat("c", rollout.MaxComment+1)})
	g.must(t, 400, "editor", "DELETE", "/api/features/f", `{"comment":`)
	g.must(t, 204, "editor", "DELETE", "/api/features/f", map[string]any{"comment": "experiment over"})
	g.must(t, 404, "sdk", "GET", "/evaluate?feature=f&user=u1", nil)
	if body := g.must(t, 404, "viewer", "GET", "/api/features/f", nil); !strings.Contains(body, "is archived") {
		t.Errorf("GET of an archived feature = %s, want a 404 saying it is archived", body)
	}
	if body := g.must(t, 200, "viewer", "GET", "/api/features", nil); strings.Contains(body, `"key":"f"`) {
		t.Errorf("GET /api/features lists the archived feature: %s", body)
	}
	if body := g.must(t, 200, "sdk", "GET", "/sync/v1/snapshot", nil); strings.Contains(body, `"f"`) {
		t.Errorf("the sync snapshot holds the archived feature: %.300s", body)
	}
	var archived struct {
		Features []struct {
			Key      string             `json:"key"`
			Version  int                `json:"version"`
			Archived bool               `json:"archived"`
			Shares   map[string]float64 `json:"shares"`
		} `json:"features"`
	}
	json.Unmarshal([]byte(g.must(t, 200, "viewer", "GET", "/api/features?archived=true", nil)), &archived)
	if len(archived.Features) != 1 || archived.Features[0].Key != "f" || !archived.Features[0].Archived || archived.Features[0].Version != 2 || len(archived.Features[0].Shares) != 2 {
		t.Errorf("GET /api/features?archived=true = %+v, want f at version 2, archived, with its shares", archived)
	}
	g.must(t, 400, "viewer", "GET", "/api/features?archived=maybe", nil)
	if body := g.must(t, 200, "viewer", "GET", "/api/features/f/versions", nil); !strings.Contains(body, `"version":2`) || !strings.Contains(body, "first try") {
		t.Errorf("the archived feature's history = %.300s, want both versions kept", body)
	}
	body := g.must(t, 409, "editor", "POST", "/api/features", twoBuckets)
	if !strings.Contains(body, "archived") || !strings.Contains(body, "restore") || !strings.Contains(body, "purge") {
		t.Errorf("creating an archived key = %s, want a message saying to restore or purge it", body)
	}
	g.must(t, 404, "editor", "PATCH", "/api/features/f", map[string]any{"description": "x"})
	g.must(t, 422, "editor", "POST", "/api/features/f/restore", map[string]any{"comment": strings.Repeat("c", rollout.MaxComment+1)})
	g.must(t, 400, "editor", "POST", "/api/features/f/restore", map[string]any{"unknown": true})

	// Purge: admin only (403 for an editor, decided by the route's
	// declaration), and only of an archived feature.
	g.must(t, 403, "editor", "DELETE", "/api/features/f?purge=true", nil)
	g.must(t, 403, "viewer", "DELETE", "/api/features/f?purge=true", nil)
	g.must(t, 400, "admin", "DELETE", "/api/features/f?purge=yes", nil)

	// Restore: version 3, the configuration of version 2, served again.
	var restored struct {
		Feature struct {
			Version int                `json:"version"`
			Shares  map[string]float64 `json:"shares"`
		} `json:"feature"`
		Report feature.Report `json:"report"`
	}
	json.Unmarshal([]byte(g.must(t, 200, "editor", "POST", "/api/features/f/restore", map[string]any{"comment": "back"})), &restored)
	if restored.Feature.Version != 3 || restored.Report.FromVersion != 2 || restored.Feature.Shares["treatment"] > 0.2 {
		t.Errorf("restore = %+v, want version 3 from 2, treatment at about 1/6", restored)
	}
	g.must(t, 200, "sdk", "GET", "/evaluate?feature=f&user=u1", nil)
	g.must(t, 409, "editor", "POST", "/api/features/f/restore", nil)
	g.must(t, 404, "editor", "POST", "/api/features/nope/restore", nil)
	g.must(t, 409, "admin", "DELETE", "/api/features/f?purge=true", nil)

	// POST …/archive answers the feature and the report; then the purge.
	if body := g.must(t, 200, "editor", "POST", "/api/features/f/archive", nil); !strings.Contains(body, `"churn":1`) {
		t.Errorf("POST /archive = %.300s, want the report (everyone loses their bucket)", body)
	}
	g.must(t, 204, "admin", "DELETE", "/api/features/f?purge=true", map[string]any{"comment": "gone for good"})
	g.must(t, 404, "viewer", "GET", "/api/features/f/versions", nil)
	g.must(t, 404, "admin", "DELETE", "/api/features/f?purge=true", nil)
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)

	var got []string
	for _, e := range g.audit(t, "viewer", "/api/audit?feature=f&order=asc").Events {
		got = append(got, fmt.Sprintf("%s %s %q", e.Kind, e.Actor, e.Comment))
	}
	want := []string{
		`create editor-bot "first try"`,
		`change admin-bot ""`,
		`archive editor-bot "experiment over"`,
		`restore editor-bot "back"`,
		`archive editor-bot ""`,
		`purge admin-bot "gone for good"`,
		`create editor-bot ""`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit trail of f mismatch (-want +got):\n%s", diff)
	}
}

// TestShareSummary: an audit event says what a change did in percentages,
// from the version's report.
func TestShareSummary(t *testing.T) {
	g := newGuardedServer(t)
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)
	g.must(t, 200, "admin", "PUT", "/api/features/f/buckets/treatment", map[string]any{"replicas": 10})
	es := g.audit(t, "viewer", "/api/audit?kind=change").Events
	if len(es) != 1 {
		t.Fatalf("%d change events, want 1", len(es))
	}
	// 50 replicas each (about half the users each), then treatment 10.
	s := es[0].Summary
	if !regexp.MustCompile(`^changed the share of treatment; control [0-9.]+ % → [0-9.]+ %, treatment [0-9.]+ % → [0-9.]+ %; [0-9.]+ % of users moved, all into control$`).MatchString(s) {
		t.Errorf("summary %q, want the buckets' shares before and after, in percentages, and where users moved", s)
	}
}

// writeRoutes are requests that exercise every route of the API that
// writes, in an order that works, each with the kind of audit event it
// must record ("" for none: a dry run, a refusal).
func writeRoutes(rampID, tokenID func() string) []struct {
	route, role, method, path string
	body                      any
	kind                      string
} {
	type step = struct {
		route, role, method, path string
		body                      any
		kind                      string
	}
	return []step{
		{"POST /api/features", "editor", "POST", "/api/features", twoBuckets, "create"},
		{"PATCH /api/features/:key", "editor", "PATCH", "/api/features/f", map[string]any{"description": "d"}, "change"},
		{"PUT /api/features/:key/rules", "editor", "PUT", "/api/features/f/rules", map[string]any{"rules": []any{map[string]any{"name": "pro",
			"conditions": []any{map[string]any{"attribute": "plan", "op": "eq", "value": "pro"}}, "serve": map[string]any{"bucket": "treatment"}}}}, "change"},
		{"PUT /api/features/:key/prerequisites", "editor", "PUT", "/api/features/f/prerequisites", map[string]any{"prerequisites": []any{}}, "change"},
		{"POST /api/segments", "editor", "POST", "/api/segments", map[string]any{"key": "staff", "conditions": []any{}}, "segment_create"},
		{"PUT /api/segments/:key", "editor", "PUT", "/api/segments/staff", map[string]any{"conditions": []any{map[string]any{"attribute": "plan", "op": "eq", "value": "pro"}}}, "segment_change"},
		{"POST /api/segments", "editor", "POST", "/api/segments", map[string]any{"key": "vips", "users": []string{"ann", "bob"}}, "segment_create"},
		{"POST /api/segments/:key/users", "editor", "POST", "/api/segments/vips/users", map[string]any{"add": []string{"carol"}, "remove": []string{"ann"}}, "segment_change"},
		{"DELETE /api/segments/:key", "editor", "DELETE", "/api/segments/staff", nil, "segment_delete"},
		{"POST /api/features/:key/buckets", "editor", "POST", "/api/features/f/buckets", map[string]any{"name": "third", "replicas": 5}, "change"},
		{"PUT /api/features/:key/buckets/:name", "editor", "PUT", "/api/features/f/buckets/third", map[string]any{"replicas": 6}, "change"},
		{"DELETE /api/features/:key/buckets/:name", "editor", "DELETE", "/api/features/f/buckets/third", nil, "change"},
		{"PUT /api/features/:key/buckets", "editor", "PUT", "/api/features/f/buckets", map[string]any{"buckets": []any{
			map[string]any{"name": "control", "replicas": 50}, map[string]any{"name": "treatment", "replicas": 40}}}, "change"},
		{"PUT /api/features/:key/overrides/:user", "editor", "PUT", "/api/features/f/overrides/vip", map[string]any{"bucket": "treatment"}, "override"},
		{"DELETE /api/features/:key/overrides/:user", "editor", "DELETE", "/api/features/f/overrides/vip", nil, "override"},
		{"POST /api/features/:key/reshuffle", "admin", "POST", "/api/features/f/reshuffle", map[string]any{"salt": "s2"}, "change"},
		{"POST /api/features/:key/rollback", "admin", "POST", "/api/features/f/rollback", map[string]any{"version": 1}, "rollback"},
		// Approvals on for f: editors' changes become requests (202).
		{"PUT /api/settings", "admin", "PUT", "/api/settings", map[string]any{"require_approval": map[string]any{"features": []string{"f"}}}, "settings"},
		{"", "editor", "PUT", "/api/features/f/buckets/treatment", map[string]any{"replicas": 20}, "request_create"},
		{"POST /api/requests/:id/approve", "admin", "POST", "/api/requests/{request}/approve", map[string]any{"comment": "fine"}, "change+request_approve"},
		{"POST /api/requests/:id/approve", "admin", "POST", "/api/requests/{request}/approve", nil, ""}, // applied already: 409
		{"", "editor", "POST", "/api/features/f/rollback", map[string]any{"version": 2}, "request_create"},
		{"POST /api/requests/:id/reject", "admin", "POST", "/api/requests/{request}/reject", map[string]any{"comment": "no"}, "request_reject"},
		{"", "editor", "PATCH", "/api/features/f", map[string]any{"enabled": false}, "request_create"},
		{"POST /api/requests/:id/cancel", "editor", "POST", "/api/requests/{request}/cancel", nil, "request_cancel"},
		{"PUT /api/settings", "admin", "PUT", "/api/settings", map[string]any{"require_approval": map[string]any{"features": []string{}}}, "settings"},
		{"POST /api/features/:key/ramps", "editor", "POST", "/api/features/f/ramps", map[string]any{"bucket": "treatment", "steps": []float64{0.4, 0.5}, "every": "24h"}, "ramp_create"},
		{"POST /api/features/:key/ramps/:id/pause", "editor", "POST", "/api/features/f/ramps/{ramp}/pause", nil, "ramp_pause"},
		{"POST /api/features/:key/ramps/:id/resume", "editor", "POST", "/api/features/f/ramps/{ramp}/resume", nil, "ramp_resume"},
		{"POST /api/features/:key/ramps/:id/cancel", "editor", "POST", "/api/features/f/ramps/{ramp}/cancel", nil, "ramp_cancel"},
		{"POST /api/features/:key/schedules", "editor", "POST", "/api/features/f/schedules", map[string]any{"at": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339),
			"change": map[string]any{"kind": "patch", "body": map[string]any{"description": "later"}}}, "schedule_create"},
		{"POST /api/features/:key/schedules/:id/cancel", "editor", "POST", "/api/features/f/schedules/{schedule}/cancel", nil, "schedule_cancel"},
		{"POST /api/features/:key/schedules/:id/cancel", "editor", "POST", "/api/features/f/schedules/{schedule}/cancel", nil, ""}, // canceled already: 409
		// Environments (the trail read is production's and every environment's).
		{"POST /api/environments", "admin", "POST", "/api/environments", map[string]any{"key": "staging", "name": "Staging", "copy_from": "production"}, "environment_create"}, // its features' first versions are staging's events
		{"PATCH /api/environments/:env", "admin", "PATCH", "/api/environments/staging", map[string]any{"name": "Stage"}, "environment_change"},
		{"", "admin", "PUT", "/api/features/f/buckets/treatment?env=staging", map[string]any{"replicas": 7}, ""}, // staging differs, so the promotion writes; its event is in staging's trail
		{"POST /api/features/:key/promote", "admin", "POST", "/api/features/f/promote", map[string]any{"from": "staging", "to": "production"}, "promote"},
		{"POST /api/environments/promote", "admin", "POST", "/api/environments/promote", map[string]any{"from": "staging", "to": "production", "features": []string{"f"}}, ""}, // alike: nothing to write
		{"DELETE /api/environments/:env", "admin", "DELETE", "/api/environments/staging", nil, "environment_delete"},
		// Experiments: metrics, and an experiment started and stopped.
		{"POST /api/metrics", "editor", "POST", "/api/metrics", map[string]any{"key": "purchase", "kind": "conversion"}, "metric_create"},
		{"POST /api/features/:key/experiments", "editor", "POST", "/api/features/f/experiments", map[string]any{"name": "green", "control": "control", "metrics": []string{"purchase"}}, "experiment_start"},
		{"POST /api/features/:key/experiments/:id/stop", "editor", "POST", "/api/features/f/experiments/{experiment}/stop", nil, "experiment_stop"},
		{"DELETE /api/metrics/:key", "editor", "DELETE", "/api/metrics/purchase", nil, "metric_delete"},
		{"DELETE /api/features/:key", "editor", "DELETE", "/api/features/f?dry_run=true", nil, ""},
		{"DELETE /api/features/:key", "editor", "DELETE", "/api/features/f", nil, "archive"},
		{"POST /api/features/:key/restore", "editor", "POST", "/api/features/f/restore", nil, "restore"},
		{"POST /api/features/:key/archive", "editor", "POST", "/api/features/f/archive", nil, "archive"},
		{"DELETE /api/features/:key", "admin", "DELETE", "/api/features/f?purge=true", nil, "purge"},
		{"POST /api/tokens", "admin", "POST", "/api/tokens", map[string]any{"name": "ci", "role": "viewer"}, "token_create"},
		{"DELETE /api/tokens/:id", "admin", "DELETE", "/api/tokens/{token}", nil, "token_revoke"},
		{"DELETE /api/tokens/:id", "admin", "DELETE", "/api/tokens/{token}", nil, ""},  // revoked already: 404
		{"DELETE /api/sessions/:id", "admin", "DELETE", "/api/sessions/nope", nil, ""}, // no such session: 404 (revokes: web's TestSSOSessionEnds)
		{"POST /api/apply", "editor", "POST", "/api/apply", map[string]any{"document": map[string]any{"features": []any{
			map[string]any{"key": "g", "buckets": []any{map[string]any{"name": "A", "share": 1}}}}}}, "create"},
		{"POST /api/webhooks", "admin", "POST", "/api/webhooks", map[string]any{"url": "http://127.0.0.1:9/audit"}, "webhook_create"},
		{"POST /api/webhooks/:id/resume", "admin", "POST", "/api/webhooks/{hook}/resume", nil, ""}, // not paused: 409
		{"DELETE /api/webhooks/:id", "admin", "DELETE", "/api/webhooks/{hook}", nil, "webhook_delete"},
		{"DELETE /api/webhooks/:id", "admin", "DELETE", "/api/webhooks/{hook}", nil, ""}, // deleted already: 404
	}
}

// readOnlyWrites are the routes of methods other than GET that change
// nothing a person did: previews, plans, apps' evaluations and counts.
var readOnlyWrites = []string{
	"POST /evaluate", "POST /ofrep/v1/evaluate/flags/:key", "POST /ofrep/v1/evaluate/flags",
	"POST /api/exposures", "POST /api/track", "POST /api/features/:key/plan", "POST /api/features/:key/preview",
	"POST /api/plan",
}

// TestNoRouteLosesAudit goes through every route of the API that writes:
// each action adds exactly its one audit event, and no action (archive,
// restore, purge, rollback, token revoke, a refusal) removes or alters any
// event before it. A new write route not listed here fails the test.
func TestNoRouteLosesAudit(t *testing.T) {
	g := newGuardedServer(t)
	var rampID, tokenID, requestID, hookID, experimentID, scheduleID string
	covered := map[string]bool{}
	before := g.allEvents(t)
	for _, step := range writeRoutes(func() string { return rampID }, func() string { return tokenID }) {
		covered[step.route] = true
		path := strings.NewReplacer("{ramp}", rampID, "{token}", tokenID, "{request}", requestID, "{hook}", hookID, "{experiment}", experimentID, "{schedule}", scheduleID).Replace(step.path)
		status, body := g.send(t, step.role, step.method, path, step.body)
		if step.kind != "" && status/100 != 2 {
			t.Fatalf("%s %s = %d %s, want 2xx", step.method, path, status, body)
		}
		if strings.HasSuffix(step.path, "/ramps") {
			var r struct {
				Ramp struct{ ID string } `json:"ramp"`
			}
			json.Unmarshal([]byte(body), &r)
			rampID = r.Ramp.ID
		}
		if strings.HasSuffix(step.path, "/schedules") {
			var r struct {
				Schedule struct{ ID string } `json:"schedule"`
			}
			json.Unmarshal([]byte(body), &r)
			scheduleID = r.Schedule.ID
		}
		if step.kind == "request_create" {
			if status != http.StatusAccepted {
				t.Fatalf("%s %s = %d %s, want 202 (a change request)", step.method, path, status, body)
			}
			var r struct {
				Request struct{ ID string } `json:"request"`
			}
			json.Unmarshal([]byte(body), &r)
			requestID = r.Request.ID
		}
		if step.path == "/api/tokens" {
			var tok struct{ ID string }
			json.Unmarshal([]byte(body), &tok)
			tokenID = tok.ID
		}
		if step.path == "/api/features/f/experiments" {
			var r struct {
				Experiment struct{ ID string } `json:"experiment"`
			}
			json.Unmarshal([]byte(body), &r)
			experimentID = r.Experiment.ID
		}
		if step.path == "/api/webhooks" {
			var hook struct{ ID string }
			json.Unmarshal([]byte(body), &hook)
			hookID = hook.ID
		}
		after := g.allEvents(t)
		if len(after) < len(before) || !cmp.Equal(before, after[:len(before)]) {
			t.Fatalf("%s %s changed earlier audit events:\nbefore %v\nafter  %v", step.method, path, before, after)
		}
		added := after[len(before):]
		switch {
		case step.kind == "" && len(added) != 0:
			t.Errorf("%s %s (%d) added audit events %v, want none", step.method, path, status, added)
		case step.kind != "":
			kinds := strings.Split(step.kind, "+")
			ok := len(added) == len(kinds)
			for i := 0; ok && i < len(kinds); i++ {
				ok = string(added[i].Kind) == kinds[i] && strings.Contains(added[i].Actor, step.role+"-bot") && added[i].Summary != ""
			}
			if !ok {
				t.Errorf("%s %s added audit events %+v, want %s by %s-bot with a summary", step.method, path, added, step.kind, step.role)
			}
		}
		before = after
	}
	for route, need := range api.RouteAccess(g.opts) {
		method, path, _ := strings.Cut(route, " ")
		if method == http.MethodGet || method == http.MethodHead || !strings.HasPrefix(path, "/api/") && !strings.HasPrefix(path, "/evaluate") && !strings.HasPrefix(path, "/ofrep/") {
			continue
		}
		if !covered[route] && !slices.Contains(readOnlyWrites, route) {
			t.Errorf("route %s (access %d) writes but TestNoRouteLosesAudit does not check its audit event", route, need)
		}
	}
	// Nothing of the API edits or deletes an event: no route other than
	// GET serves /api/audit.
	for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		if status, _ := g.send(t, "admin", method, "/api/audit", map[string]any{}); status != http.StatusMethodNotAllowed && status != http.StatusNotFound {
			t.Errorf("%s /api/audit = %d, want 405 or 404", method, status)
		}
	}
}

// TestRampStepAudit: a ramp's step is recorded as made by "ramp, started
// by" whoever started it.
func TestRampStepAudit(t *testing.T) {
	g := newGuardedServer(t)
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)
	g.must(t, 201, "editor", "POST", "/api/features/f/ramps", map[string]any{"bucket": "treatment", "steps": []float64{0.6}})
	if n, err := g.svc.ApplyDueRamps(context.Background()); n != 1 || err != nil {
		t.Fatalf("ApplyDueRamps() = %d, %v; want 1 step", n, err)
	}
	es := g.audit(t, "viewer", "/api/audit?kind=ramp_step").Events
	if len(es) != 1 || es[0].Actor != "ramp, started by editor-bot" || !regexp.MustCompile(`treatment [0-9.]+ % → 59\.[0-9]+ %; [0-9.]+ % of users moved, all into treatment`).MatchString(es[0].Summary) {
		t.Errorf("ramp_step events = %+v, want one by \"ramp, started by editor-bot\" saying treatment moved to about 60 %%", es)
	}
	if a := g.audit(t, "viewer", "/api/audit?actor="+url.QueryEscape("ramp, started by editor-bot")).Events; len(a) != 1 {
		t.Errorf("filter by the ramp's actor: %d events, want 1", len(a))
	}
}

// TestAuditQuery: filters, pages, JSON lines, and refusals of bad queries.
func TestAuditQuery(t *testing.T) {
	g := newGuardedServer(t)
	start := time.Now().UTC().Add(-time.Second)
	for i := range 5 {
		g.must(t, 201, "editor", "POST", "/api/features", map[string]any{"key": fmt.Sprintf("f%d", i), "buckets": []any{map[string]any{"name": "A"}}})
	}
	g.must(t, 204, "admin", "DELETE", "/api/features/f1", nil)
	all := g.allEvents(t)
	// The tokens of newGuardedServer come first, made by the command line.
	if len(all) != len(auth.Roles)+6 {
		t.Fatalf("%d events, want %d", len(all), len(auth.Roles)+6)
	}

	page := g.audit(t, "viewer", "/api/audit?limit=2")
	if len(page.Events) != 2 || page.Events[0].Kind != "archive" || page.Next == nil {
		t.Fatalf("first page = %+v, want the 2 newest, the archive first, and a next page", page)
	}
	var seen []int64
	for p := &page; ; {
		for _, e := range p.Events {
			seen = append(seen, e.ID)
		}
		if p.Next == nil {
			break
		}
		next := g.audit(t, "viewer", *p.Next)
		p = &next
	}
	if len(seen) != len(all) || !slices.IsSortedFunc(seen, func(a, b int64) int { return int(b - a) }) {
		t.Errorf("paged IDs %v, want all %d newest first", seen, len(all))
	}
	if es := g.audit(t, "viewer", "/api/audit?kind=create&actor=editor-bot&feature=f3").Events; len(es) != 1 || es[0].Feature != "f3" {
		t.Errorf("create of f3 by editor-bot = %+v, want 1 event", es)
	}
	if es := g.audit(t, "viewer", "/api/audit?kind=token_create").Events; len(es) != len(auth.Roles) || es[0].Actor != auth.CommandLineActor {
		t.Errorf("token_create events = %+v, want %d by %q", es, len(auth.Roles), auth.CommandLineActor)
	}
	if es := g.audit(t, "viewer", "/api/audit?since="+url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))).Events; len(es) != 0 {
		t.Errorf("events since an hour from now = %v, want none", es)
	}
	if es := g.audit(t, "viewer", "/api/audit?since="+url.QueryEscape(start.Format(time.RFC3339Nano))).Events; len(es) != len(all) {
		t.Errorf("events since the start = %d, want %d", len(es), len(all))
	}
	if es := g.audit(t, "viewer", fmt.Sprintf("/api/audit?after=%d&limit=2", all[2].ID)).Events; len(es) != 2 || es[0].ID != all[3].ID {
		t.Errorf("after=%d: %v, want events %d and %d, oldest first", all[2].ID, es, all[3].ID, all[4].ID)
	}

	// JSON lines, oldest first, bounded by limit.
	lines := func(query string) []auditEvent {
		t.Helper()
		req, _ := http.NewRequest("GET", g.url+"/api/audit"+query, nil)
		req.Header.Set("Authorization", "Bearer "+g.secrets["viewer"])
		req.Header.Set("Accept", "application/x-ndjson")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/x-ndjson" {
			t.Fatalf("GET /api/audit%s as JSON lines = %d %s", query, res.StatusCode, res.Header.Get("Content-Type"))
		}
		var out []auditEvent
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			var e auditEvent
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			out = append(out, e)
		}
		return out
	}
	if got := lines(""); len(got) != len(all) || got[0].ID != all[0].ID || got[len(got)-1].Kind != "archive" {
		t.Errorf("JSON lines = %d events, want all %d oldest first", len(got), len(all))
	}
	if got := lines("?limit=3&kind=create"); len(got) != 3 || got[0].Feature != "f0" {
		t.Errorf("JSON lines of 3 creates = %v", got)
	}
	if got := lines(fmt.Sprintf("?after=%d", all[len(all)-1].ID)); len(got) != 0 {
		t.Errorf("JSON lines after the last = %v, want none", got)
	}

	for _, q := range []string{
		"kind=bogus", "since=yesterday", "limit=0", "limit=1001", "limit=x", "before=-1", "after=x", "order=sideways",
		"feature=" + strings.Repeat("k", 1001),
	} {
		status, body := g.send(t, "viewer", "GET", "/api/audit?"+q, nil)
		if status != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
			t.Errorf("GET /api/audit?%.40s = %d %.200s, want 400 with an error", q, status, body)
		}
	}
	g.must(t, 401, "none", "GET", "/api/audit", nil)
	g.must(t, 403, "sdk", "GET", "/api/audit", nil)
}

// TestArchiveIdempotent: archive, restore and purge keep their answer for
// an Idempotency-Key, so that a retry neither fails nor acts twice.
func TestArchiveIdempotent(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.must(201, "POST", "/api/features", twoBuckets)
	for _, step := range []struct {
		method, path string
		status       int
	}{
		{"DELETE", "/api/features/f", 204},
		{"POST", "/api/features/f/restore", 200},
		{"POST", "/api/features/f/archive", 200},
		{"DELETE", "/api/features/f?purge=true", 204},
	} {
		key := "k-" + step.method + step.path
		first := s.must(step.status, step.method, step.path, nil, "Idempotency-Key", key)
		again := s.must(step.status, step.method, step.path, nil, "Idempotency-Key", key)
		if string(first.body) != string(again.body) {
			t.Errorf("%s %s retried: %s, first %s", step.method, step.path, again.body, first.body)
		}
	}
	events, err := s.svc.AuditEvents(context.Background(), audit.Query{Feature: "f", Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, string(e.Kind))
	}
	if got := strings.Join(kinds, " "); got != "create archive restore archive purge" {
		t.Errorf("audit kinds = %s, want each action once", got)
	}
}
