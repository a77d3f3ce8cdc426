package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestAuditActorContains: /api/audit?actor_contains= keeps the events
// whose actor holds the text, in any case, and its next page keeps the
// filter; actor stays exact; an overlong one is a 400.
func TestAuditActorContains(t *testing.T) {
	g := newGuardedServer(t)
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)
	g.must(t, 200, "admin", "PATCH", "/api/features/f", map[string]any{"description": "a"})
	g.must(t, 200, "admin", "PATCH", "/api/features/f", map[string]any{"description": "b"})
	actors := func(a auditAnswer) string {
		var out []string
		for _, e := range a.Events {
			out = append(out, e.Actor)
		}
		return strings.Join(out, " ")
	}
	if got := actors(g.audit(t, "viewer", "/api/audit?actor_contains=BOT&kind=change")); got != "admin-bot admin-bot" {
		t.Errorf("actor_contains=BOT, changes = %q", got)
	}
	if got := actors(g.audit(t, "viewer", "/api/audit?actor_contains=editor")); got != "editor-bot" {
		t.Errorf("actor_contains=editor = %q", got)
	}
	if got := actors(g.audit(t, "viewer", "/api/audit?actor=bot")); got != "" {
		t.Errorf("actor=bot (exact) = %q, want none", got)
	}
	page := g.audit(t, "viewer", "/api/audit?actor_contains=admin&limit=1")
	if page.Next == nil || !strings.Contains(*page.Next, "actor_contains=admin") {
		t.Fatalf("next = %v, want it to keep actor_contains", page.Next)
	}
	if status, body := g.send(t, "viewer", "GET", "/api/audit?actor_contains="+strings.Repeat("x", 1001), nil); status != http.StatusBadRequest || !strings.Contains(body, "actor_contains") {
		t.Errorf("overlong actor_contains = %d %s, want 400", status, body)
	}
}
