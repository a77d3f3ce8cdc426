package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollout/rollout/cmd/internal/serve"
)

// createToken makes a token with the rollout token command, in the
// database at db, which it creates first as serve would if it is missing.
func createToken(t *testing.T, db, name, role string) string {
	t.Helper()
	createDatabase(t, db)
	secret, stderr, err := runCLI(t, "token", "create", "--name", name, "--role", role, "--db", db)
	if err != nil {
		t.Fatalf("token create %s: %v\n%s", name, err, stderr)
	}
	return strings.TrimSpace(secret)
}

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func bearer(secret string) []string { return []string{"Authorization", "Bearer " + secret} }

func TestRoles(t *testing.T) {
	db := filepath.Join(t.TempDir(), "rollout.db")
	tokens := map[string]string{}
	for _, role := range []string{"admin", "editor", "viewer", "evaluate", "sdk", "client"} {
		tokens[role] = createToken(t, db, role+"-bot", role)
	}
	logs := &syncBuffer{}
	m := &serve.Server{Addr: "127.0.0.1:0", DBPath: db, Log: slog.New(slog.NewTextHandler(logs, nil)), Pprof: true}
	if err := m.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, m: m, dbPath: db}
	t.Cleanup(s.stop)
	created := s.must(201, "POST", "/api/features", abcFeature("f"), bearer(tokens["editor"])...)
	exposure := map[string]any{"feature": "f", "feature_id": created["feature"].(map[string]any)["id"], "version": 1, "bucket": "A", "count": 1}

	tests := []struct {
		name, method, path string
		body               any
		want               map[string]int // by role; "none" is no token
	}{
		{"evaluate", "GET", "/evaluate?feature=f&user=u", nil,
			map[string]int{"admin": 200, "editor": 200, "viewer": 200, "evaluate": 200, "sdk": 200, "client": 200, "none": 401}},
		{"ofrep", "POST", "/ofrep/v1/evaluate/flags/f", map[string]any{"context": map[string]any{"targetingKey": "u"}},
			map[string]int{"admin": 200, "editor": 200, "viewer": 200, "evaluate": 200, "sdk": 200, "client": 200, "none": 401}},
		{"read", "GET", "/api/features/f", nil,
			map[string]int{"admin": 200, "editor": 200, "viewer": 200, "evaluate": 403, "sdk": 403, "client": 403, "none": 401}},
		{"preview", "POST", "/api/features/f/preview", map[string]any{"buckets": []any{map[string]any{"name": "A"}}},
			map[string]int{"admin": 200, "editor": 200, "viewer": 200, "evaluate": 403, "sdk": 403, "client": 403, "none": 401}},
		{"change", "PATCH", "/api/features/f?dry_run=true", map[string]any{"description": "x"},
			map[string]int{"admin": 200, "editor": 200, "viewer": 403, "evaluate": 403, "sdk": 403, "client": 403, "none": 401}},
		{"metrics", "GET", "/metrics", nil,
			map[string]int{"admin": 200, "editor": 200, "viewer": 200, "evaluate": 403, "sdk": 403, "client": 403, "none": 401}},
		{"pprof", "GET", "/debug/pprof/", nil,
			map[string]int{"admin": 200, "editor": 403, "viewer": 403, "evaluate": 403, "sdk": 403, "client": 403, "none": 401}},
		{"snapshot", "GET", "/sync/v1/snapshot", nil,
			map[string]int{"admin": 200, "editor": 200, "viewer": 200, "evaluate": 200, "sdk": 200, "client": 403, "none": 401}},
		{"exposures", "POST", "/api/exposures", map[string]any{"batch": "roles-batch-1", "exposures": []any{exposure}},
			map[string]int{"admin": 200, "editor": 200, "viewer": 200, "evaluate": 200, "sdk": 200, "client": 403, "none": 401}},
		{"health", "GET", "/healthz", nil,
			map[string]int{"admin": 200, "editor": 200, "viewer": 200, "evaluate": 200, "sdk": 200, "client": 200, "none": 200}},
	}
	for _, tt := range tests {
		for role, want := range tt.want {
			var header []string
			if role != "none" {
				header = bearer(tokens[role])
			}
			r := s.do(tt.method, tt.path, tt.body, header...)
			if r.status != want {
				t.Errorf("%s as %s: %s %s = %d %.200s, want %d", tt.name, role, tt.method, tt.path, r.status, r.body, want)
			}
			if want == 401 && !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s as %s: 401 without WWW-Authenticate: Bearer", tt.name, role)
			}
		}
	}

	// X-API-Key, as OFREP providers send it, works like Bearer; a wrong or
	// malformed token is a 401.
	s.must(200, "GET", "/api/features/f", nil, "X-API-Key", tokens["viewer"])
	s.must(401, "GET", "/api/features/f", nil, bearer(tokens["viewer"]+"x")...)
	s.must(401, "GET", "/api/features/f", nil, "Authorization", "Basic dXNlcjpwYXNz")

	// The actor of a change is its token's name.
	s.must(200, "PUT", "/api/features/f/buckets/A", map[string]any{"replicas": 5}, bearer(tokens["admin"])...)
	vs := s.must(200, "GET", "/api/features/f/versions", nil, bearer(tokens["viewer"])...)["versions"].([]any)
	if a0, a1 := vs[0].(map[string]any)["actor"], vs[1].(map[string]any)["actor"]; a0 != "admin-bot" || a1 != "editor-bot" {
		t.Errorf("actors = %v, %v; want admin-bot, editor-bot", a0, a1)
	}

	// Tokens never reach the logs.
	for role, secret := range tokens {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("the %s token appears in the logs", role)
		}
	}

	// A token revoked with the command stops working within the refresh
	// interval, and one created while the server runs starts working.
	if _, _, err := runCLI(t, "token", "revoke", "--name", "viewer-bot", "--db", db); err != nil {
		t.Fatal(err)
	}
	late := createToken(t, db, "late", "viewer")
	waitStatus(t, s, "GET", "/api/features/f", bearer(tokens["viewer"]), 401)
	waitStatus(t, s, "GET", "/api/features/f", bearer(late), 200)
}

// waitStatus polls until a request answers want, for up to three refresh
// intervals.
func waitStatus(t *testing.T, s *server, method, path string, header []string, want int) {
	t.Helper()
	deadline := time.Now().Add(3 * serve.TokenRefreshInterval)
	for {
		r := s.do(method, path, nil, header...)
		if r.status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s = %d, want %d within %v", method, path, r.status, want, 3*serve.TokenRefreshInterval)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestListenRules(t *testing.T) {
	db := filepath.Join(t.TempDir(), "rollout.db")
	open := func(addr string, insecure bool) error {
		m := &serve.Server{Addr: addr, DBPath: db, Insecure: insecure}
		err := m.Open(context.Background())
		if err == nil {
			m.Close()
		}
		return err
	}
	if err := open("0.0.0.0:0", false); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("no token, all interfaces: err = %v, want a refusal", err)
	}
	if err := open("127.0.0.1:0", false); err != nil {
		t.Errorf("no token, loopback: %v", err)
	}
	if err := open("[::1]:0", false); err != nil && !strings.Contains(err.Error(), "address") {
		t.Errorf("no token, IPv6 loopback: %v", err)
	}
	if err := open("0.0.0.0:0", true); err != nil {
		t.Errorf("no token, --insecure: %v", err)
	}
	createToken(t, db, "admin", "admin")
	if err := open("0.0.0.0:0", false); err != nil {
		t.Errorf("with a token, all interfaces: %v", err)
	}
}

// TestDashboardSignIn: the dashboard asks for a token, keeps a session
// cookie, and its script's API calls ride on that cookie.
func TestDashboardSignIn(t *testing.T) {
	db := filepath.Join(t.TempDir(), "rollout.db")
	secret := createToken(t, db, "pm", "editor")
	s := startServer(t, db)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string, cookies ...*http.Cookie) *http.Response {
		req, _ := http.NewRequest("GET", s.m.URL()+path, nil)
		for _, c := range cookies {
			req.AddCookie(c)
		}
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	if res := get("/ui/features/f"); res.StatusCode != 303 || !strings.HasPrefix(res.Header.Get("Location"), "/ui/login?next=") {
		t.Fatalf("GET /ui/ without a session = %d to %q, want 303 to the sign-in page", res.StatusCode, res.Header.Get("Location"))
	}
	if res := get("/ui/login"); res.StatusCode != 200 {
		t.Fatalf("GET /ui/login = %d", res.StatusCode)
	}
	login := func(token string, header ...string) *http.Response {
		req, _ := http.NewRequest("POST", s.m.URL()+"/ui/login", strings.NewReader("token="+token+"&next=%2Fui%2F"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	if res := login("rlt_wrong"); res.StatusCode != 401 || len(res.Cookies()) != 0 {
		t.Errorf("sign-in with a wrong token = %d with %d cookies, want 401 and none", res.StatusCode, len(res.Cookies()))
	}
	if res := login(secret, "Sec-Fetch-Site", "cross-site"); res.StatusCode != 403 {
		t.Errorf("cross-site sign-in = %d, want 403", res.StatusCode)
	}
	res := login(secret)
	if res.StatusCode != 303 || res.Header.Get("Location") != "/ui/" {
		t.Fatalf("sign-in = %d to %q, want 303 to /ui/", res.StatusCode, res.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == "rollout_session" {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || strings.Contains(session.Value, secret) {
		t.Fatalf("session cookie = %+v, want HttpOnly, SameSite=Strict, not holding the token", session)
	}
	if res := get("/ui/", session); res.StatusCode != 200 {
		t.Errorf("GET /ui/ with the session = %d, want 200", res.StatusCode)
	}
	// The page's script calls the API with the cookie; the change's actor is
	// the token's name.
	req, _ := http.NewRequest("POST", s.m.URL()+"/api/features", strings.NewReader(`{"key":"f","buckets":[{"name":"A"}]}`))
	req.AddCookie(session)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 201 {
		t.Fatalf("API call with the session cookie = %v, %v; want 201", res.StatusCode, err)
	}
	if v := s.must(200, "GET", "/api/features/f/versions/1", nil, bearer(secret)...); v["actor"] != "pm" {
		t.Errorf("actor = %v, want pm", v["actor"])
	}
	forged := *session
	forged.Value = session.Value[:len(session.Value)-2] + "xx"
	if res := get("/ui/", &forged); res.StatusCode != 303 {
		t.Errorf("GET /ui/ with a forged session = %d, want 303 to sign in", res.StatusCode)
	}
	// Revoking the token ends its sessions.
	runCLI(t, "token", "revoke", "--name", "pm", "--db", db)
	deadline := time.Now().Add(3 * serve.TokenRefreshInterval)
	for get("/ui/", session).StatusCode != 303 {
		if time.Now().After(deadline) {
			t.Fatal("a session of a revoked token still works")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
