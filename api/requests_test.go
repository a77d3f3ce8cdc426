package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/request"
	"github.com/rollout/rollout/rollout/settings"
)

// addEditor gives g another editor's token, sent as role name.
func (g *guardedServer) addEditor(t *testing.T, name string) {
	t.Helper()
	_, secret, err := g.tokens.Create(context.Background(), name, auth.RoleEditor, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	g.secrets[name] = secret
}

func decodeJSON[T any](t *testing.T, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decode %.200s: %v", body, err)
	}
	return v
}

type requestBody struct {
	Request request.Request `json:"request"`
	Report  feature.Report  `json:"report"`
	Feature struct {
		Version int `json:"version"`
	} `json:"feature"`
}

// TestEditorChurnLimit: editors change within the organisation's churn
// limit (25 % by default); above it, and any reshuffle, is a 403 saying
// it needs an admin or an approval; admins are not bound by it, though
// their own max_churn still is; the limit is a setting only admins change.
func TestEditorChurnLimit(t *testing.T) {
	g := newGuardedServer(t)
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)
	st := decodeJSON[settings.Settings](t, g.must(t, 200, "viewer", "GET", "/api/settings", nil))
	if st.MaxChurn != 0.25 || st.RequireApproval.All || len(st.RequireApproval.Features) != 0 || st.Version != 0 {
		t.Fatalf("default settings = %+v, want max_churn 0.25, no approvals, version 0", st)
	}
	// 50/50 → 50/40: about 5 % move.
	g.must(t, 200, "editor", "PUT", "/api/features/f/buckets/treatment", map[string]any{"replicas": 40})
	// → 50/5: about 40 % move.
	big := map[string]any{"replicas": 5}
	status, body := g.send(t, "editor", "PUT", "/api/features/f/buckets/treatment", big)
	if status != http.StatusForbidden || !strings.Contains(body, "more than the editors' limit of 25 %") || !strings.Contains(body, "needs an admin") || !strings.Contains(body, `"report"`) {
		t.Fatalf("editor's big change = %d %s, want 403 naming the limit and an admin, with the report", status, body)
	}
	// A dry run shows the editor what it would do, and what it needs.
	if dry := decodeJSON[struct{ Needs string }](t, g.must(t, 200, "editor", "PUT", "/api/features/f/buckets/treatment?dry_run=true", big)); dry.Needs != "admin" {
		t.Errorf("editor's dry run needs %q, want admin", dry.Needs)
	}
	if dry := decodeJSON[struct{ Needs string }](t, g.must(t, 200, "editor", "PUT", "/api/features/f/buckets/treatment?dry_run=true", map[string]any{"replicas": 41})); dry.Needs != "" {
		t.Errorf("editor's small dry run needs %q, want nothing", dry.Needs)
	}
	status, body = g.send(t, "editor", "POST", "/api/features/f/reshuffle", map[string]any{})
	if status != http.StatusForbidden || !strings.Contains(body, "reshuffle") {
		t.Fatalf("editor's reshuffle = %d %s, want 403", status, body)
	}
	// Admins: not bound by the limit, bound by their own guard.
	if status, body := g.send(t, "admin", "PUT", "/api/features/f/buckets/treatment?max_churn=0.1", big); status != http.StatusConflict {
		t.Fatalf("admin's change above its own max_churn = %d %s, want 409", status, body)
	}
	g.must(t, 200, "admin", "PUT", "/api/features/f/buckets/treatment", big)
	g.must(t, 200, "admin", "POST", "/api/features/f/reshuffle", map[string]any{})
	// Editors may not change the settings; an admin raises the limit.
	g.must(t, 403, "editor", "PUT", "/api/settings", map[string]any{"max_churn": 1})
	for _, bad := range []map[string]any{
		{"max_churn": 1.5}, {"max_churn": -0.1},
		{"require_approval": map[string]any{"features": []string{"Not A Key"}}},
		{"require_approval": map[string]any{"features": []string{"f", "f"}}},
		{"comment": strings.Repeat("x", rollout.MaxComment+1)},
	} {
		if status, body := g.send(t, "admin", "PUT", "/api/settings", bad); status != http.StatusUnprocessableEntity {
			t.Errorf("PUT /api/settings %v = %d %s, want 422", bad, status, body)
		}
	}
	for _, bad := range []string{`{"max_churn":"a lot"}`, `{"unknown":1}`, `[]`, `{"version":-1}`} {
		if status, body := g.sendRaw(t, "admin", "PUT", "/api/settings", bad); status != http.StatusBadRequest {
			t.Errorf("PUT /api/settings %s = %d %s, want 400", bad, status, body)
		}
	}
	st = decodeJSON[settings.Settings](t, g.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"max_churn": 0.9, "comment": "trust"}))
	if st.MaxChurn != 0.9 || st.Version != 1 || st.UpdatedBy != "admin-bot" {
		t.Fatalf("saved settings = %+v", st)
	}
	if status, body := g.send(t, "admin", "PUT", "/api/settings", map[string]any{"max_churn": 0.5, "version": 7}); status != http.StatusPreconditionFailed {
		t.Fatalf("PUT /api/settings with a stale version = %d %s, want 412", status, body)
	}
	g.must(t, 200, "editor", "PUT", "/api/features/f/buckets/treatment", map[string]any{"replicas": 60})
	es := g.audit(t, "viewer", "/api/audit?kind=settings").Events
	if len(es) != 1 || es[0].Actor != "admin-bot" || es[0].Comment != "trust" || es[0].Summary != "editors' churn limit 25 % → 90 %" {
		t.Fatalf("settings events = %+v, want one by admin-bot: editors' churn limit 25 %% → 90 %%", es)
	}
}

// TestChangeRequests: where approvals are required, an editor's change is
// a 202 request with its preview, the feature unchanged; another person
// approves it (never its author), which applies it as a version naming
// both; a feature that moved on is previewed again (412) and approved
// again; reject and cancel close requests; the list filters by state.
func TestChangeRequests(t *testing.T) {
	g := newGuardedServer(t)
	g.addEditor(t, "carol")
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)
	g.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"require_approval": map[string]any{"features": []string{"f"}}})

	if dry := decodeJSON[struct{ Needs string }](t, g.must(t, 200, "editor", "PUT", "/api/features/f/buckets/treatment?dry_run=true", map[string]any{"replicas": 49})); dry.Needs != "approval" {
		t.Errorf("editor's dry run under approvals needs %q, want approval", dry.Needs)
	}
	body := g.must(t, 202, "editor", "PUT", "/api/features/f/buckets/treatment", map[string]any{"replicas": 10, "comment": "less"})
	r := decodeJSON[requestBody](t, body).Request
	if r.State != request.Open || r.Author != "editor-bot" || r.BaseVersion != 1 || r.IfMatch == "" || r.Report.Churn <= 0 || r.Comment != "less" ||
		!strings.Contains(r.Summary, "% of users would move") {
		t.Fatalf("request = %+v", r)
	}
	if v := decodeJSON[struct{ Version int }](t, g.must(t, 200, "viewer", "GET", "/api/features/f", nil)).Version; v != 1 {
		t.Fatalf("feature at version %d after a request, want 1 (nothing applied)", v)
	}
	list := decodeJSON[struct{ Requests []request.Request }](t, g.must(t, 200, "viewer", "GET", "/api/requests?state=open", nil)).Requests
	if len(list) != 1 || list[0].ID != r.ID {
		t.Fatalf("open requests = %+v", list)
	}
	g.must(t, 200, "viewer", "GET", "/api/requests/"+r.ID, nil)
	g.must(t, 404, "viewer", "GET", "/api/requests/nope", nil)
	g.must(t, 400, "viewer", "GET", "/api/requests?state=pending", nil)
	g.must(t, 400, "viewer", "GET", "/api/requests?limit=100000", nil)
	g.must(t, 403, "viewer", "POST", "/api/requests/"+r.ID+"/approve", nil)

	// Its author may not approve or reject it.
	if status, body := g.send(t, "editor", "POST", "/api/requests/"+r.ID+"/approve", nil); status != 403 || !strings.Contains(body, "another editor or an admin") {
		t.Fatalf("author's approval = %d %s, want 403", status, body)
	}
	g.must(t, 403, "editor", "POST", "/api/requests/"+r.ID+"/reject", nil)
	g.must(t, 403, "carol", "POST", "/api/requests/"+r.ID+"/cancel", nil)

	// The feature moves on: the approval previews again and refuses.
	g.must(t, 200, "admin", "PATCH", "/api/features/f", map[string]any{"description": "moved"})
	status, body := g.send(t, "carol", "POST", "/api/requests/"+r.ID+"/approve", map[string]any{"comment": "ok"})
	if status != http.StatusPreconditionFailed || !strings.Contains(body, "approve it again") || !strings.Contains(body, `"report"`) {
		t.Fatalf("approval after the feature moved on = %d %s, want 412 with the new preview", status, body)
	}
	again := decodeJSON[struct{ Request request.Request }](t, g.must(t, 200, "viewer", "GET", "/api/requests/"+r.ID, nil)).Request
	if again.State != request.Open || again.BaseVersion != 2 || again.Repreviewed != 1 || again.IfMatch == r.IfMatch {
		t.Fatalf("request after the new preview = %+v, want open at version 2", again)
	}
	body = g.must(t, 200, "carol", "POST", "/api/requests/"+r.ID+"/approve", map[string]any{"comment": "ok"})
	done := decodeJSON[requestBody](t, body)
	if done.Request.State != request.Applied || done.Request.DecidedBy != "carol" || done.Request.AppliedVersion != 3 || done.Feature.Version != 3 {
		t.Fatalf("approval = %s", body)
	}
	vs := g.must(t, 200, "viewer", "GET", "/api/features/f/versions/3", nil)
	if v := decodeJSON[rollout.Version](t, vs); v.Actor != "editor-bot, approved by carol" || v.Comment != "less" {
		t.Fatalf("version 3 = %+v, want made by editor-bot, approved by carol, with the author's comment", v)
	}
	g.must(t, 409, "admin", "POST", "/api/requests/"+r.ID+"/approve", nil)
	g.must(t, 409, "editor", "POST", "/api/requests/"+r.ID+"/cancel", nil)

	// Reject and cancel.
	r2 := decodeJSON[requestBody](t, g.must(t, 202, "editor", "POST", "/api/features/f/rollback", map[string]any{"version": 1})).Request
	r3 := decodeJSON[requestBody](t, g.must(t, 202, "carol", "PATCH", "/api/features/f", map[string]any{"enabled": false})).Request
	g.must(t, 200, "carol", "POST", "/api/requests/"+r2.ID+"/reject", map[string]any{"comment": "keep it"})
	g.must(t, 200, "carol", "POST", "/api/requests/"+r3.ID+"/cancel", nil)
	for state, want := range map[string]int{"open": 0, "applied": 1, "rejected": 1, "canceled": 1, "": 3} {
		list := decodeJSON[struct{ Requests []request.Request }](t, g.must(t, 200, "viewer", "GET", "/api/requests?state="+state, nil)).Requests
		if len(list) != want {
			t.Errorf("%d requests of state %q, want %d", len(list), state, want)
		}
	}
	// Admins' changes apply; editors' ramps of the feature are requests.
	g.must(t, 200, "admin", "PUT", "/api/features/f/buckets/treatment", map[string]any{"replicas": 30})
	g.must(t, 202, "editor", "POST", "/api/features/f/ramps", map[string]any{"bucket": "treatment", "steps": []float64{0.9, 1}, "every": "24h"})
	g.must(t, 201, "admin", "POST", "/api/features/f/ramps", map[string]any{"bucket": "treatment", "steps": []float64{0.9, 1}, "every": "24h"})

	var kinds []string
	for _, e := range g.audit(t, "viewer", "/api/audit?order=asc").Events {
		if strings.HasPrefix(string(e.Kind), "request_") {
			kinds = append(kinds, fmt.Sprintf("%s by %s", e.Kind, e.Actor))
		}
	}
	want := "request_create by editor-bot, request_approve by carol, request_create by editor-bot, request_create by carol, request_reject by carol, request_cancel by carol, request_create by editor-bot"
	if got := strings.Join(kinds, ", "); got != want {
		t.Errorf("request events:\n%s\nwant\n%s", got, want)
	}
}

// TestChangeRequestAbuse: a huge change body is a 413, an author's open
// requests are capped, and two approvals at once apply the change once.
func TestChangeRequestAbuse(t *testing.T) {
	g := newGuardedServer(t)
	g.addEditor(t, "carol")
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)
	g.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"require_approval": map[string]any{"all": true}})

	huge := map[string]any{"description": strings.Repeat("x", 2<<20)}
	if status, body := g.send(t, "editor", "PATCH", "/api/features/f", huge); status != http.StatusRequestEntityTooLarge {
		t.Fatalf("a huge change = %d %.200s, want 413", status, body)
	}
	if status, _ := g.send(t, "admin", "PUT", "/api/settings", map[string]any{"require_approval": map[string]any{"features": make([]string, settings.MaxApprovalFeatures+1)}}); status/100 != 4 {
		t.Fatalf("too many features in the policy = %d, want 4xx", status)
	}
	var ids []string
	for i := range request.MaxOpen {
		r := decodeJSON[requestBody](t, g.must(t, 202, "editor", "PATCH", "/api/features/f", map[string]any{"description": fmt.Sprint("d", i)})).Request
		ids = append(ids, r.ID)
	}
	if status, body := g.send(t, "editor", "PATCH", "/api/features/f", map[string]any{"description": "one more"}); status != http.StatusConflict || !strings.Contains(body, "open change requests") {
		t.Fatalf("request over the cap = %d %s, want 409", status, body)
	}
	// Another author is not capped by editor-bot's requests.
	g.must(t, 202, "carol", "PATCH", "/api/features/f", map[string]any{"description": "carol's"})

	// Two approvals of one request at once: exactly one applies.
	var wg sync.WaitGroup
	statuses := make([]int, 2)
	for i, who := range []string{"admin", "carol"} {
		wg.Go(func() { statuses[i], _ = g.send(t, who, "POST", "/api/requests/"+ids[0]+"/approve", nil) })
	}
	wg.Wait()
	ok := 0
	for _, s := range statuses {
		switch s {
		case 200:
			ok++
		case 409:
		default:
			t.Errorf("concurrent approval = %d, want 200 or 409", s)
		}
	}
	if ok != 1 {
		t.Fatalf("concurrent approvals = %v, want exactly one 200", statuses)
	}
	if v := decodeJSON[struct{ Version int }](t, g.must(t, 200, "viewer", "GET", "/api/features/f", nil)).Version; v != 2 {
		t.Fatalf("feature at version %d, want 2: one approval applied", v)
	}
	if n := len(g.audit(t, "viewer", "/api/audit?kind=request_approve").Events); n != 1 {
		t.Fatalf("%d request_approve events, want 1", n)
	}
	// The others, previewed at version 1, now re-preview on approval.
	g.must(t, 412, "carol", "POST", "/api/requests/"+ids[1]+"/approve", nil)
	g.must(t, 200, "carol", "POST", "/api/requests/"+ids[1]+"/approve", nil)
}

// sendRaw makes a request as role with body as it is, and headers given
// as name, value pairs.
func (g *guardedServer) sendRaw(t *testing.T, role, method, path, body string, headers ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, g.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+g.secrets[role])
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data)
}

// TestEditorDocuments: an editor's document is held to the editors' churn
// limit and may not touch a feature approvals cover (it cannot become a
// request); creating features from it is not held; an admin's applies.
func TestEditorDocuments(t *testing.T) {
	g := newGuardedServer(t)
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)
	// Replicas, as twoBuckets has them (50 each): 50/40 moves about 5 %,
	// 50/5 about 40 %.
	doc := func(key string, control, treatment int) map[string]any {
		return map[string]any{"document": map[string]any{"features": []any{map[string]any{"key": key, "buckets": []any{
			map[string]any{"name": "control", "replicas": control}, map[string]any{"name": "treatment", "replicas": treatment}}}}}}
	}
	if status, body := g.send(t, "editor", "POST", "/api/apply", doc("f", 50, 5)); status != http.StatusForbidden || !strings.Contains(body, "more than the editors' limit of 25 %") {
		t.Fatalf("editor's big document = %d %s, want 403", status, body)
	}
	g.must(t, 200, "editor", "POST", "/api/apply", doc("f", 50, 40))
	g.must(t, 200, "editor", "POST", "/api/apply", doc("new", 1, 1)) // a create
	g.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"require_approval": map[string]any{"features": []string{"f"}}})
	if status, body := g.send(t, "editor", "POST", "/api/apply", doc("f", 50, 41)); status != http.StatusForbidden || !strings.Contains(body, "needs approvals") {
		t.Fatalf("editor's document of a feature under approvals = %d %s, want 403", status, body)
	}
	g.must(t, 200, "admin", "POST", "/api/apply", doc("f", 50, 5))
	if v := decodeJSON[struct{ Version int }](t, g.must(t, 200, "viewer", "GET", "/api/features/f", nil)).Version; v != 3 {
		t.Fatalf("f at version %d, want 3 (the editor's small document, then the admin's)", v)
	}
}

// TestChangeRequestIdempotent: an editor's change that becomes a request,
// retried with its Idempotency-Key, answers the same 202 and makes one
// request.
func TestChangeRequestIdempotent(t *testing.T) {
	g := newGuardedServer(t)
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)
	g.must(t, 200, "admin", "PUT", "/api/settings", map[string]any{"require_approval": map[string]any{"all": true}})
	var answers []string
	for range 2 {
		status, body := g.sendRaw(t, "editor", "PATCH", "/api/features/f", `{"description":"once"}`, "Idempotency-Key", "req-1")
		if status != http.StatusAccepted {
			t.Fatalf("PATCH with Idempotency-Key = %d %s, want 202", status, body)
		}
		answers = append(answers, body)
	}
	if answers[0] != answers[1] {
		t.Errorf("retry answered %s, first %s", answers[1], answers[0])
	}
	if n := len(decodeJSON[struct{ Requests []request.Request }](t, g.must(t, 200, "viewer", "GET", "/api/requests", nil)).Requests); n != 1 {
		t.Errorf("%d requests after a retried change, want 1", n)
	}
	if n := len(g.audit(t, "viewer", "/api/audit?kind=request_create").Events); n != 1 {
		t.Errorf("%d request_create events, want 1", n)
	}
}
