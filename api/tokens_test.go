package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
)

type tokenAnswer struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Role       string     `json:"role"`
	Secret     string     `json:"token"`
	CreatedBy  string     `json:"created_by"`
	Active     bool       `json:"active"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
}

func (g *guardedServer) listTokens(t *testing.T) map[string]tokenAnswer {
	t.Helper()
	var list struct {
		Tokens []tokenAnswer `json:"tokens"`
	}
	body := g.must(t, 200, "admin", "GET", "/api/tokens", nil)
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]tokenAnswer{}
	for _, tok := range list.Tokens {
		if tok.Secret != "" || strings.Contains(body, `"hash"`) {
			t.Errorf("GET /api/tokens shows a secret or a hash: %s", body)
		}
		out[tok.Name+map[bool]string{true: "", false: " (revoked)"}[tok.Active]] = tok
	}
	return out
}

// TestTokensAPI: an admin creates a token (its secret in the answer, once),
// which then works; the list says when each was last used; a revoked token
// stops working at once.
func TestTokensAPI(t *testing.T) {
	g := newGuardedServer(t)
	var created tokenAnswer
	json.Unmarshal([]byte(g.must(t, 201, "admin", "POST", "/api/tokens", map[string]any{"name": "ci-bot", "role": "viewer"})), &created)
	if created.ID == "" || !strings.HasPrefix(created.Secret, "rlt_") || created.Role != "viewer" || created.CreatedBy != "admin-bot" || !created.Active {
		t.Fatalf("POST /api/tokens = %+v, want an ID, the secret, role viewer, made by admin-bot", created)
	}
	g.secrets["ci"] = created.Secret
	g.must(t, 200, "ci", "GET", "/api/features", nil)
	g.must(t, 403, "ci", "POST", "/api/features", twoBuckets)
	g.must(t, 409, "admin", "POST", "/api/tokens", map[string]any{"name": "ci-bot", "role": "editor"})

	// Uses are saved at the next refresh of the tokens.
	if err := g.tokens.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	list := g.listTokens(t)
	if tok := list["ci-bot"]; tok.LastUsedAt == nil || tok.ID != created.ID {
		t.Errorf("ci-bot in the list = %+v, want its last use recorded", tok)
	}
	if tok := list["editor-bot"]; tok.LastUsedAt != nil {
		t.Errorf("editor-bot = %+v, never used: want no last use", tok)
	}

	g.must(t, 204, "admin", "DELETE", "/api/tokens/"+created.ID, nil)
	g.must(t, 401, "ci", "GET", "/api/features", nil)
	g.must(t, 404, "admin", "DELETE", "/api/tokens/"+created.ID, nil)
	g.must(t, 404, "admin", "DELETE", "/api/tokens/nope", nil)
	if tok := g.listTokens(t)["ci-bot (revoked)"]; tok.RevokedAt == nil || tok.Active {
		t.Errorf("the revoked ci-bot = %+v, want it listed as revoked", tok)
	}
	// The name is free again.
	g.must(t, 201, "admin", "POST", "/api/tokens", map[string]any{"name": "ci-bot", "role": "sdk"})

	var kinds []string
	for _, e := range g.audit(t, "viewer", "/api/audit?actor=admin-bot&order=asc").Events {
		kinds = append(kinds, e.Kind+" "+e.Subject)
	}
	if want := "token_create ci-bot,token_revoke ci-bot,token_create ci-bot"; strings.Join(kinds, ",") != want {
		t.Errorf("admin-bot's audit events = %v, want %s", kinds, want)
	}
	// The secret is in no answer but the first, and not in the audit trail.
	if body := g.must(t, 200, "viewer", "GET", "/api/audit", nil); strings.Contains(body, created.Secret) {
		t.Error("the audit trail holds a token's secret")
	}
}

// TestTokensAbuse: bad names and roles are refused with 400, the number of
// active tokens is bounded (409), creations are rate-limited (429), and
// every token route needs an admin.
func TestTokensAbuse(t *testing.T) {
	g := newGuardedServer(t)
	for _, body := range []any{
		map[string]any{"name": strings.Repeat("n", 65), "role": "viewer"},
		map[string]any{"name": "", "role": "viewer"},
		map[string]any{"name": "has space", "role": "viewer"},
		map[string]any{"name": "x", "role": "root"},
		map[string]any{"name": "x", "role": 7},
		`{"name":"x","role":"viewer","extra":1}`,
		`not json`,
		map[string]any{"name": strings.Repeat("n", 2<<20), "role": "viewer"},
	} {
		status, answer := g.send(t, "admin", "POST", "/api/tokens", body)
		if status != http.StatusBadRequest && status != http.StatusUnprocessableEntity && status != http.StatusRequestEntityTooLarge {
			t.Errorf("POST /api/tokens %.60v = %d %.200s, want 400, 422 or 413", body, status, answer)
		}
	}
	for _, role := range []string{"editor", "viewer", "sdk", "client", "none"} {
		for _, r := range [][2]string{{"GET", "/api/tokens"}, {"POST", "/api/tokens"}, {"DELETE", "/api/tokens/x"}} {
			want := http.StatusForbidden
			if role == "none" {
				want = http.StatusUnauthorized
			}
			var body any
			if r[0] == "POST" {
				body = map[string]any{"name": "sneaky", "role": "admin"}
			}
			g.must(t, want, role, r[0], r[1], body)
		}
	}

	// Count: at most the maximum of active tokens (6 exist already).
	api.SetMaxActiveTokens(t, len(g.secrets)+2)
	g.must(t, 201, "admin", "POST", "/api/tokens", map[string]any{"name": "one", "role": "viewer"})
	g.must(t, 201, "admin", "POST", "/api/tokens", map[string]any{"name": "two", "role": "viewer"})
	if body := g.must(t, 409, "admin", "POST", "/api/tokens", map[string]any{"name": "three", "role": "viewer"}); !strings.Contains(body, "revoke") {
		t.Errorf("over the maximum = %s, want a message saying to revoke tokens", body)
	}

	// Rate: a burst, then 429 with Retry-After.
	api.SetMaxActiveTokens(t, 1000)
	limited := false
	for i := range 40 {
		status, _ := g.send(t, "admin", "POST", "/api/tokens", map[string]any{"name": fmt.Sprintf("burst-%d", i), "role": "viewer"})
		if status == http.StatusTooManyRequests {
			limited = true
			break
		}
		if status != http.StatusCreated {
			t.Fatalf("token %d: %d", i, status)
		}
	}
	if !limited {
		t.Error("40 token creations in a row were all accepted, want 429 after a burst")
	}
}

// TestFirstTokenOverHTTP: while no token exists the API is open (on
// loopback), and POST /api/tokens makes the first one; from then on
// requests need a token.
func TestFirstTokenOverHTTP(t *testing.T) {
	g := newAuthServer(t, nil, false)
	var created tokenAnswer
	json.Unmarshal([]byte(g.must(t, 201, "none", "POST", "/api/tokens", map[string]any{"name": "first", "role": "admin"})), &created)
	if created.Secret == "" || created.CreatedBy != "anonymous" {
		t.Fatalf("first token = %+v, want a secret, made by anonymous", created)
	}
	g.must(t, 401, "none", "GET", "/api/features", nil)
	g.secrets["admin"] = created.Secret
	g.must(t, 200, "admin", "GET", "/api/features", nil)
	if es := g.audit(t, "admin", "/api/audit?kind=token_create").Events; len(es) != 1 || es[0].Actor != "anonymous" {
		t.Errorf("token_create events = %+v, want one by anonymous", es)
	}
}
