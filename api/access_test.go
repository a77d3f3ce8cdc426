package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
	"github.com/rollout/rollout/webhook"
)

// guardedServer is the API and the dashboard as the binary wires them,
// with tokens required, over a real SQLite store.
type guardedServer struct {
	e       *echo.Echo
	opts    api.Options // those e was made with
	url     string
	svc     *rollout.Service
	db      *store.DB
	tokens  *auth.Tokens
	auth    *api.Auth
	secrets map[string]string // by role
}

func newGuardedServer(t *testing.T) *guardedServer {
	t.Helper()
	return newAuthServer(t, auth.Roles, false)
}

// newAuthServer is the API and dashboard with access control, over a new
// SQLite store, with a token "<role>-bot" for each of roles (none: the API
// is open, as on a fresh install) and Auth.AnyHost set to anyHost.
func newAuthServer(t *testing.T, roles []auth.Role, anyHost bool) *guardedServer {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return newAuthServerOn(t, db, roles, anyHost)
}

// newAuthServerOn is newAuthServer over the store db.
func newAuthServerOn(t *testing.T, db *store.DB, roles []auth.Role, anyHost bool) *guardedServer {
	t.Helper()
	ctx := context.Background()
	tokens, err := auth.NewTokens(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := &guardedServer{db: db, tokens: tokens, secrets: map[string]string{}}
	for _, role := range roles {
		_, secret, err := tokens.Create(ctx, string(role)+"-bot", role, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		g.secrets[string(role)] = secret
	}
	envs, err := rollout.NewEnvironments(ctx, db, func(env string) rollout.Store { return db.In(env) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	g.svc, _ = envs.Service(rollout.Production)
	g.auth = api.NewAuth(tokens, nil)
	g.auth.AnyHost = anyHost
	exps := experiment.NewEnvironmentExperiments(func(env string) experiment.ExperimentStore { return db.In(env) })
	g.opts = api.Options{Auth: g.auth, Pprof: true, Webhooks: webhook.NewHooks(db, nil), Environments: envs, Experiments: exps,
		Routes: web.Routes(g.svc, web.Options{Sessions: g.auth})}
	g.e = api.New(g.svc, g.opts)
	srv := httptest.NewServer(g.e)
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

// send makes a request as role ("none": without a token).
func (g *guardedServer) send(t *testing.T, role, method, path string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, _ := json.Marshal(body)
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, g.url+path, rd)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if role != "none" {
		req.Header.Set("Authorization", "Bearer "+g.secrets[role])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	if strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		// A stream does not end: its status and first line are the answer.
		line, _ := bufio.NewReader(res.Body).ReadString('\n')
		return res.StatusCode, line
	}
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data)
}

// routes are the server's routes, "METHOD /pattern".
func (g *guardedServer) routes() []*echo.Route {
	var out []*echo.Route
	for _, r := range g.e.Routes() {
		if strings.ToUpper(r.Method) == r.Method && !strings.Contains(r.Method, "_") { // not echo's not-found routes
			out = append(out, r)
		}
	}
	return out
}

// TestEveryRouteHasAccess: each route the API and the dashboard register
// is declared, saying what it needs; a route added without a declaration
// would need an admin token, and this test names it.
func TestEveryRouteHasAccess(t *testing.T) {
	g := newGuardedServer(t)
	access := api.RouteAccess(g.opts)
	seen := map[string]bool{}
	for _, r := range g.routes() {
		route := r.Method + " " + r.Path
		seen[route] = true
		if _, ok := access[route]; !ok {
			t.Errorf("route %s is not in the access table", route)
		}
	}
	for route := range access {
		if !seen[route] {
			t.Errorf("the access table lists %s, which no route serves", route)
		}
	}
}

// routeBodies are valid bodies for the routes that read one, so that a
// request let through by mistake would really change something.
var routeBodies = map[string]any{
	"POST /evaluate":                         map[string]any{"user": "u"},
	"POST /ofrep/v1/evaluate/flags/:key":     map[string]any{"context": map[string]any{"targetingKey": "u"}},
	"POST /ofrep/v1/evaluate/flags":          map[string]any{"context": map[string]any{"targetingKey": "u"}},
	"POST /api/features":                     map[string]any{"key": "g", "buckets": []any{map[string]any{"name": "A"}}},
	"POST /api/tokens":                       map[string]any{"name": "matrix", "role": "admin"},
	"POST /api/webhooks":                     map[string]any{"url": "http://127.0.0.1:9/matrix"},
	"PATCH /api/features/:key":               map[string]any{"description": "changed"},
	"POST /api/features/:key/buckets":        map[string]any{"name": "Z", "replicas": 5},
	"PUT /api/features/:key/buckets/:name":   map[string]any{"replicas": 7},
	"PUT /api/features/:key/overrides/:user": map[string]any{"bucket": "B"},
	"POST /api/features/:key/preview":        map[string]any{"buckets": []any{map[string]any{"name": "A"}}},
	"POST /api/features/:key/reshuffle":      map[string]any{},
	"POST /api/features/:key/rollback":       map[string]any{"version": 1},
	"POST /api/exposures":                    map[string]any{"batch": "access-matrix", "exposures": []any{}},
	"POST /api/metrics":                      map[string]any{"key": "sales", "kind": "conversion"},
	"POST /api/track":                        map[string]any{"batch": "access-matrix", "events": []any{map[string]any{"metric": "m", "user": "u"}}},
	"POST /api/features/:key/experiments":    map[string]any{"name": "matrix", "control": "A", "metrics": []string{"m"}},
	"POST /api/features/:key/ramps":          map[string]any{"bucket": "A", "steps": []float64{0.9, 1}, "every": "24h"},
	"POST /api/features/:key/schedules": map[string]any{"at": time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339),
		"change": map[string]any{"kind": "patch", "body": map[string]any{"description": "scheduled"}}},
	"PUT /api/settings":              map[string]any{"max_churn": 0.3},
	"POST /api/requests/:id/approve": map[string]any{"comment": "ok"},
	"POST /api/requests/:id/reject":  map[string]any{"comment": "no"},
	"POST /api/requests/:id/cancel":  map[string]any{},
	"POST /api/plan":                 docBody,
	"POST /api/apply":                map[string]any{"document": docBody},
	"POST /api/segments":             map[string]any{"key": "g", "conditions": []any{map[string]any{"attribute": "plan", "op": "eq", "value": "pro"}}},
	"PUT /api/segments/:key":         map[string]any{"conditions": []any{map[string]any{"attribute": "plan", "op": "eq", "value": "team"}}},
	"POST /api/segments/:key/users":  map[string]any{"add": []string{"u1"}},
	"PUT /api/features/:key/rules": map[string]any{"rules": []any{map[string]any{"name": "staff",
		"conditions": []any{map[string]any{"attribute": "email", "op": "ends_with", "value": "@example.com"}}, "serve": map[string]any{"bucket": "A"}}}},
	"POST /ui/features/:key/test":     map[string]any{"user": "u", "context": map[string]any{"plan": "pro"}},
	"POST /api/environments":          map[string]any{"key": "qa", "name": "QA"},
	"PATCH /api/environments/:env":    map[string]any{"name": "Prod"},
	"POST /api/features/:key/promote": map[string]any{"from": "production", "to": "staging"},
	"POST /api/environments/promote":  map[string]any{"from": "production", "to": "staging", "features": []string{"f"}},
}

// docBody is a document that changes feature f.
var docBody = map[string]any{"features": []any{map[string]any{"key": "f", "buckets": []any{
	map[string]any{"name": "A", "replicas": 11}, map[string]any{"name": "B", "replicas": 10}}}}}

// paramValues are the existing things each path parameter names.
var paramValues = map[string]string{"key": "f", "name": "A", "user": "vip", "version": "1", "id": "r", "env": "production", "*": "x"}

// pathVariants turn a parameter's value into paths meant to fool a check
// that reads the path's text: encoded slashes and dots, dot segments and
// doubled slashes.
var pathVariants = []func(string) string{
	func(v string) string { return v + "%2Fpreview" },
	func(v string) string { return v + "%2F..%2F..%2Fpreview" },
	func(v string) string { return v + "%2f%2fpreview" },
	func(string) string { return "%2E%2E" },
	func(v string) string { return v + "/../preview" },
	func(v string) string { return "/" + v },
	func(v string) string { return v + "//preview" },
	func(v string) string { return "." },
}

// fill returns the route's pattern with each parameter set to its value,
// and the one at index vary (if >= 0) passed through variant.
func fill(pattern string, vary int, variant func(string) string) string {
	parts := strings.Split(pattern, "/")
	n := 0
	for i, p := range parts {
		name, isParam := strings.CutPrefix(p, ":")
		if p == "*" {
			name, isParam = "*", true
		}
		if !isParam {
			continue
		}
		v := paramValues[name]
		if n == vary {
			v = variant(v)
		}
		parts[i] = v
		n++
	}
	return strings.Join(parts, "/")
}

func params(pattern string) int {
	return strings.Count(pattern, "/:") + strings.Count(pattern, "*")
}

// allowedWithout says which paths may answer 2xx to a role that lacks a
// route's permission: the public ones, and what the role may do anyway.
func allowedWithout(role, method, path string) bool {
	public := strings.HasPrefix(path, "/healthz") || strings.HasPrefix(path, "/readyz") ||
		strings.HasPrefix(path, "/ui/login") || strings.HasPrefix(path, "/ui/logout") || strings.HasPrefix(path, "/ui/static/")
	switch role {
	case "none":
		return public
	case "client":
		return public || strings.HasPrefix(path, "/evaluate") || strings.HasPrefix(path, "/ofrep/") || path == "/api/track" && method == http.MethodPost
	case "sdk", "evaluate":
		return allowedWithout("client", method, path) ||
			strings.HasPrefix(path, "/sync/v1/") || path == "/api/exposures" && method == http.MethodPost
	case "viewer":
		return method == http.MethodGet || (strings.HasSuffix(path, "/preview") || path == "/api/plan") && method == http.MethodPost || allowedWithout("evaluate", method, path)
	}
	return true
}

// state is everything a write could change, as the API's readers see it.
func state(t *testing.T, g *guardedServer) string {
	t.Helper()
	var b bytes.Buffer
	for _, key := range g.svc.Snapshot().Keys() {
		f, _ := g.svc.Snapshot().Feature(key)
		vs, err := g.svc.Versions(context.Background(), key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		json.NewEncoder(&b).Encode(map[string]any{"feature": f, "versions": len(vs)})
	}
	toks, _ := g.tokens.List(context.Background())
	json.NewEncoder(&b).Encode(toks)
	json.NewEncoder(&b).Encode(g.svc.Snapshot().Segments())
	hooks, err := g.db.Webhooks(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	json.NewEncoder(&b).Encode(hooks)
	metrics, err := g.db.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	json.NewEncoder(&b).Encode(metrics)
	if f, ok := g.svc.Snapshot().Feature("f"); ok {
		xs, err := g.db.Experiments(context.Background(), f.ID)
		if err != nil {
			t.Fatal(err)
		}
		json.NewEncoder(&b).Encode(xs)
	}
	return b.String()
}

// TestRouteRoleMatrix sends every route, as every role, with every path
// parameter disguised in every way, and checks that what a role may do is
// decided by the route the request reached, never by the path's text: a
// role without the permission gets no 2xx from a route it may not use and
// changes nothing, and a role with it is let through.
func TestRouteRoleMatrix(t *testing.T) {
	g := newGuardedServer(t)
	ctx := context.Background()
	f := feature.Feature{Key: "f", Enabled: true, Salt: "f",
		Buckets:   []feature.Bucket{{Name: "A", Replicas: 10}, {Name: "B", Replicas: 10}},
		Overrides: map[string]string{"vip": "A", "vip/preview": "A"}}
	if _, err := g.svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.svc.Change(ctx, "f", change.Patch(ptr("second version"), nil, nil), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	seg := feature.Segment{Key: "f", Conditions: []feature.Condition{{Attribute: "plan", Op: feature.OpEq, Value: json.RawMessage(`"pro"`)}}}
	if _, err := g.svc.CreateSegment(ctx, seg, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}

	hook, err := webhook.NewHook("http://127.0.0.1:9/hook", "", nil, "admin", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	hook.ID = paramValues["id"] // DELETE /api/webhooks/:id would remove it
	if _, err := g.db.CreateWebhook(ctx, hook); err != nil {
		t.Fatal(err)
	}

	access := api.RouteAccess(g.opts)
	before := state(t, g)
	requests := 0
	for _, r := range g.routes() {
		route := r.Method + " " + r.Path
		need := access[route]
		for _, role := range []string{"none", "client", "sdk", "evaluate", "viewer", "editor"} {
			lacks := role == "none" || !auth.Role(role).Allows(need)
			if need < 0 || !lacks {
				continue // public, or the role may use the route: below
			}
			// The plain path: exactly 401 without a token, 403 with one.
			want := http.StatusForbidden
			if role == "none" {
				want = http.StatusUnauthorized
			}
			if r.Path == "/" || strings.HasPrefix(r.Path, "/ui") {
				if role == "none" && r.Method == http.MethodGet {
					want = http.StatusSeeOther // to the sign-in page
				}
			}
			if got, body := g.send(t, role, r.Method, fill(r.Path, -1, nil), routeBodies[route]); got != want {
				t.Errorf("%s as %s: %s %s = %d %.120s, want %d", route, role, r.Method, fill(r.Path, -1, nil), got, body, want)
			}
			requests++
			// Disguised paths: whatever route they reach, no 2xx from one
			// the role may not use.
			for i := range params(r.Path) {
				for _, variant := range pathVariants {
					path := fill(r.Path, i, variant)
					got, body := g.send(t, role, r.Method, path, routeBodies[route])
					requests++
					if got >= 200 && got < 300 && !allowedWithout(role, r.Method, path) {
						t.Errorf("%s as %s: %s %s = %d %.120s, want a refusal", route, role, r.Method, path, got, body)
					}
				}
			}
		}
	}
	if after := state(t, g); after != before {
		t.Errorf("requests by roles that may not write changed the store:\nbefore %s\nafter  %s", before, after)
	}

	// A purge needs an admin, though the route (an archive) needs an
	// editor: the route's QueryAccess decides, whatever else the query
	// holds.
	for _, role := range []string{"editor", "viewer", "sdk", "client"} {
		for _, q := range []string{"purge=true", "purge=1", "dry_run=true&purge=true", "purge=true&purge=false", "PURGE=true&purge=yes"} {
			if got, body := g.send(t, role, "DELETE", "/api/features/f?"+q, nil); got != http.StatusForbidden {
				t.Errorf("%s DELETE /api/features/f?%s = %d %.120s, want 403", role, q, got, body)
			}
		}
	}

	// The review's case: a viewer may not set or clear an override whose
	// user ID ends in /preview.
	for _, method := range []string{"PUT", "DELETE"} {
		if got, body := g.send(t, "viewer", method, "/api/features/f/overrides/vip%2Fpreview", map[string]any{"bucket": "B"}); got != http.StatusForbidden {
			t.Errorf("viewer %s …/overrides/vip%%2Fpreview = %d %s, want 403", method, got, body)
		}
	}

	// Roles with the permission are let through (as dry runs, so that
	// nothing changes between routes).
	for _, r := range g.routes() {
		route := r.Method + " " + r.Path
		need := access[route]
		for _, role := range []string{"admin", "editor", "viewer", "sdk", "evaluate", "client"} {
			if need < 0 || !auth.Role(role).Allows(need) {
				continue // public routes answer whatever their input deserves
			}
			path := fill(r.Path, -1, nil)
			if r.Method != http.MethodGet {
				path += "?dry_run=true"
			}
			if got, body := g.send(t, role, r.Method, path, routeBodies[route]); got == http.StatusUnauthorized || got == http.StatusForbidden {
				t.Errorf("%s as %s: %s %s = %d %.120s, want it allowed", route, role, r.Method, path, got, body)
			}
			requests++
		}
	}
	t.Logf("%d requests", requests)
}

// TestAppRoles pins what the app roles may do: client (browsers) only
// evaluates; sdk (servers running package client) also reads the sync API
// and sends exposures; evaluate, the role they split, keeps what it had,
// which is what sdk has.
func TestAppRoles(t *testing.T) {
	g := newGuardedServer(t)
	created, err := g.svc.Create(context.Background(), feature.Feature{Key: "f", Enabled: true,
		Buckets: []feature.Bucket{{Name: "A", Replicas: 1}}, Overrides: map[string]string{"vip@example.com": "A"}}, rollout.ChangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exposures := map[string]any{"batch": "app-roles-1", "exposures": []any{
		map[string]any{"feature": "f", "feature_id": created.Feature.ID, "version": 1, "bucket": "A", "count": 1}}}
	for _, tt := range []struct {
		method, path string
		body         any
		want         map[string]int // by role
	}{
		{"GET", "/evaluate?feature=f&user=u", nil, map[string]int{"client": 200, "sdk": 200, "evaluate": 200, "viewer": 200}},
		{"POST", "/evaluate", map[string]any{"user": "u"}, map[string]int{"client": 200, "sdk": 200, "evaluate": 200}},
		{"POST", "/ofrep/v1/evaluate/flags/f", map[string]any{"context": map[string]any{"targetingKey": "u"}}, map[string]int{"client": 200, "sdk": 200, "evaluate": 200}},
		{"POST", "/ofrep/v1/evaluate/flags", map[string]any{"context": map[string]any{"targetingKey": "u"}}, map[string]int{"client": 200, "sdk": 200, "evaluate": 200}},
		{"GET", "/sync/v1/snapshot", nil, map[string]int{"client": 403, "sdk": 200, "evaluate": 200, "viewer": 200}},
		{"GET", "/sync/v1/stream", nil, map[string]int{"client": 403, "sdk": 200, "evaluate": 200}},
		{"POST", "/api/exposures", exposures, map[string]int{"client": 403, "sdk": 200, "evaluate": 200}},
		{"GET", "/api/features/f", nil, map[string]int{"client": 403, "sdk": 403, "evaluate": 403, "viewer": 200}},
		{"GET", "/metrics", nil, map[string]int{"client": 403, "sdk": 403, "evaluate": 403}},
		{"GET", "/ui/", nil, map[string]int{"client": 403, "sdk": 403, "evaluate": 403}},
	} {
		for role, want := range tt.want {
			got, body := g.send(t, role, tt.method, tt.path, tt.body)
			if got != want {
				t.Errorf("%s %s as %s = %d %.120s, want %d", tt.method, tt.path, role, got, body, want)
			}
			if role == "client" && want == 403 && !strings.Contains(body, "role client") {
				t.Errorf("%s %s as client: %s, want the role named", tt.method, tt.path, body)
			}
		}
	}
}

// TestScopedTokenMatrix: a token scoped to one environment is refused
// (403) on every route that takes a token when it names another with
// ?env=, whatever its role: the environment of a request is decided once,
// from the token, before any handler.
func TestScopedTokenMatrix(t *testing.T) {
	g := newAuthServer(t, nil, false)
	ctx := context.Background()
	for _, role := range auth.Roles {
		_, secret, err := g.tokens.CreateIn(ctx, string(role)+"-staging", role, "staging", time.Now(), "")
		if err != nil {
			t.Fatal(err)
		}
		g.secrets[string(role)] = secret
	}
	access := api.RouteAccess(g.opts)
	for _, r := range g.routes() {
		route := r.Method + " " + r.Path
		if access[route] < 0 {
			continue // public: no token, no environment
		}
		for _, role := range auth.Roles {
			path := fill(r.Path, -1, nil)
			sep := "?"
			if strings.Contains(path, "?") {
				sep = "&"
			}
			if got, body := g.send(t, string(role), r.Method, path+sep+"env=production", routeBodies[route]); got != http.StatusForbidden {
				t.Errorf("%s as %s scoped to staging, asking for production: %d %.160s, want 403", route, role, got, body)
			}
		}
	}
}
