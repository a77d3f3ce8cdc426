package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestEditorSubmitsBigChange: an editor's change above the churn limit,
// refused as is, becomes a change request (202) when submitted
// (?submit=true or "submit": true), the feature unchanged until another
// person approves it; a dry run with submit says it needs an approval; a
// change within the limit applies as ever, submit or not; a bad submit is
// a 400.
func TestEditorSubmitsBigChange(t *testing.T) {
	g := newGuardedServer(t)
	g.addEditor(t, "carol")
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)
	big := map[string]any{"replicas": 5, "comment": "less treatment"}
	g.must(t, 403, "editor", "PUT", "/api/features/f/buckets/treatment", big)
	if dry := decodeJSON[struct{ Needs string }](t, g.must(t, 200, "editor", "PUT", "/api/features/f/buckets/treatment?dry_run=true&submit=true", big)); dry.Needs != "approval" {
		t.Errorf("dry run with submit needs %q, want approval", dry.Needs)
	}
	r := decodeJSON[requestBody](t, g.must(t, 202, "editor", "PUT", "/api/features/f/buckets/treatment?submit=true", big))
	if r.Request.State != "open" || r.Request.Author != "editor-bot" || r.Request.Change.Kind != "update_bucket" || r.Report.Churn < 0.25 ||
		!strings.Contains(r.Request.Summary, "would move") {
		t.Fatalf("submitted request = %+v, report churn %v", r.Request, r.Report.Churn)
	}
	if v := decodeJSON[struct{ Version int }](t, g.must(t, 200, "viewer", "GET", "/api/features/f", nil)).Version; v != 1 {
		t.Fatalf("feature at version %d after a submission, want 1 (unchanged)", v)
	}
	g.must(t, 403, "editor", "POST", "/api/requests/"+r.Request.ID+"/approve", nil) // not its author
	g.must(t, 200, "carol", "POST", "/api/requests/"+r.Request.ID+"/approve", map[string]any{"comment": "ok"})
	if v := decodeJSON[struct{ Version int }](t, g.must(t, 200, "viewer", "GET", "/api/features/f", nil)).Version; v != 2 {
		t.Fatalf("feature at version %d after the approval, want 2", v)
	}
	// Submit in the body; a reshuffle too.
	g.must(t, 202, "editor", "POST", "/api/features/f/reshuffle", map[string]any{"submit": true})
	// Within the limit: applied at once, submit or not.
	g.must(t, 200, "editor", "PUT", "/api/features/f/buckets/treatment?submit=true", map[string]any{"replicas": 6})
	for _, q := range []string{"?submit=maybe", "?submit=true&submit=false"} {
		if status, body := g.send(t, "editor", "PUT", "/api/features/f/buckets/treatment"+q, big); status != http.StatusBadRequest {
			t.Errorf("submit %s = %d %s, want 400", q, status, body)
		}
	}
}
