package api_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
)

// versions returns how many versions the feature key has (0: it is gone).
func (s *testServer) versions(key string) int {
	s.t.Helper()
	vs, err := s.svc.Versions(context.Background(), key, 0, 0)
	if feature.ErrorCode(err) == feature.ENotFound {
		return 0
	}
	if err != nil {
		s.t.Fatal(err)
	}
	return len(vs)
}

// TestEveryMutationHonoursGuards: dry_run, max_churn and If-Match work on
// every mutation, from the query or the body, and values that disagree are
// refused rather than settled toward the less safe one.
func TestEveryMutationHonoursGuards(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.create(feature.Feature{Key: "f", Enabled: true, Salt: "f",
		Buckets:   []feature.Bucket{{Name: "A", Replicas: 3}, {Name: "B", Replicas: 3}, {Name: "C", Replicas: 3}, {Name: "D", Replicas: 3}},
		Overrides: map[string]string{"vip": "A"}})
	tag := s.must(200, "GET", "/api/features/f", nil).header.Get("ETag")
	stale := `"1-000000000000"`

	mutations := []struct {
		name, method, path string
		body               map[string]any
		moves              bool // moves users, so that max_churn can refuse it
	}{
		{"delete feature", "DELETE", "/api/features/f", nil, true},
		{"patch", "PATCH", "/api/features/f", map[string]any{"enabled": false}, true},
		{"add bucket", "POST", "/api/features/f/buckets", map[string]any{"name": "E", "replicas": 300}, true},
		{"update bucket", "PUT", "/api/features/f/buckets/A", map[string]any{"replicas": 300}, true},
		{"remove bucket", "DELETE", "/api/features/f/buckets/D", nil, true},
		{"set buckets", "PUT", "/api/features/f/buckets", map[string]any{"buckets": []map[string]any{{"name": "A", "replicas": 30}, {"name": "B", "replicas": 3}}}, true},
		{"set override", "PUT", "/api/features/f/overrides/vip", map[string]any{"bucket": "B"}, false},
		{"clear override", "DELETE", "/api/features/f/overrides/vip", nil, false},
		{"reshuffle", "POST", "/api/features/f/reshuffle", map[string]any{}, true},
		{"rollback", "POST", "/api/features/f/rollback", map[string]any{"version": 1}, false},
	}
	with := func(body map[string]any, k string, v any) map[string]any {
		out := map[string]any{k: v}
		for bk, bv := range body {
			out[bk] = bv
		}
		return out
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			before := s.versions("f")
			refused := []struct {
				what   string
				query  string
				body   map[string]any
				header []string
				status int
			}{
				{"dry run in the body", "", with(m.body, "dry_run", true), nil, 200},
				{"dry run in the query", "?dry_run=true", m.body, nil, 200},
				{"max_churn in the body", "", with(m.body, "max_churn", 0.0001), nil, 409},
				{"max_churn in the query", "?max_churn=0.0001", m.body, nil, 409},
				{"stale If-Match", "", m.body, []string{"If-Match", stale}, 412},
				{"dry_run true in the query, false in the body", "?dry_run=true", with(m.body, "dry_run", false), nil, 400},
				{"dry_run given twice in the query", "?dry_run=true&dry_run=false", m.body, nil, 400},
				{"max_churn looser in the body", "?max_churn=0.0001", with(m.body, "max_churn", 1.0), nil, 400},
				{"max_churn given twice", "?max_churn=1&max_churn=0.0001", m.body, nil, 400},
				{"weak If-Match", "", m.body, []string{"If-Match", "W/" + tag}, 400},
				{"unquoted If-Match", "", m.body, []string{"If-Match", strings.Trim(tag, `"`)}, 400},
				{"If-Match of the version alone", "", m.body, []string{"If-Match", `"1"`}, 412},
				{"If-Match with a plus", "", m.body, []string{"If-Match", `"+1"`}, 412},
			}
			for _, r := range refused {
				if r.status == 409 && !m.moves {
					continue // an override moves one user: no share of users
				}
				var body any
				if r.body != nil {
					body = r.body
				}
				got := s.do(m.method, m.path+r.query, body, r.header...)
				if got.status != r.status {
					t.Errorf("%s %s%s (%s) = %d %s, want %d", m.method, m.path, r.query, r.what, got.status, got.body, r.status)
				}
				if n := s.versions("f"); n != before {
					t.Fatalf("%s %s%s (%s) changed the feature: %d versions, want %d", m.method, m.path, r.query, r.what, n, before)
				}
			}
		})
	}

	// A dry run of a delete says what it would do: everyone loses their bucket.
	res := s.must(200, "DELETE", "/api/features/f?dry_run=true", nil).json(t)
	if rep := res["report"].(map[string]any); rep["churn"] != 1.0 || res["dry_run"] != true {
		t.Errorf("dry-run delete = %v, want churn 1 and dry_run true", res)
	}
	// With the current tag a mutation applies.
	s.must(200, "PATCH", "/api/features/f", map[string]any{"description": "x"}, "If-Match", tag)
	s.must(200, "PUT", "/api/features/f/overrides/vip", map[string]any{"bucket": "B", "max_churn": 0}, "If-Match", `"2-`+tag[3:])
	s.must(204, "DELETE", "/api/features/f", nil, "If-Match", s.must(200, "GET", "/api/features/f", nil).header.Get("ETag"))
	if n := s.versions("f"); n != 3 {
		t.Fatalf("after an archive: %d versions, want the 3 kept", n)
	}

	// Create: max_churn counts everyone moving into the new feature's
	// buckets; If-Match cannot match a feature that does not exist.
	create := map[string]any{"key": "g", "buckets": []any{map[string]any{"name": "A"}}}
	s.must(409, "POST", "/api/features?max_churn=0.5", create)
	s.must(412, "POST", "/api/features", create, "If-Match", "*")
	s.must(400, "POST", "/api/features?dry_run=true", with(create, "dry_run", false))
	if n := s.versions("g"); n != 0 {
		t.Fatalf("refused creates made feature g (%d versions)", n)
	}
	s.must(201, "POST", "/api/features?max_churn=1", create)
}

// TestIfMatchTagsTheFeature: after a delete and a re-create under the same
// key, the old feature's ETag, at the same version, no longer applies.
func TestIfMatchTagsTheFeature(t *testing.T) {
	s := newServer(t, "", api.Options{})
	create := map[string]any{"key": "f", "buckets": []any{map[string]any{"name": "A"}, map[string]any{"name": "B"}}}
	old := s.must(201, "POST", "/api/features", create).header.Get("ETag")
	s.must(204, "DELETE", "/api/features/f", nil, "If-Match", old)
	s.must(204, "DELETE", "/api/features/f?purge=true", nil)
	now := s.must(201, "POST", "/api/features", create).header.Get("ETag")
	if !strings.HasPrefix(old, `"1-`) || !strings.HasPrefix(now, `"1-`) || old == now {
		t.Fatalf("ETags of two features f at version 1: %s and %s, want two different \"1-…\" tags", old, now)
	}
	r := s.do("PATCH", "/api/features/f", map[string]any{"enabled": false}, "If-Match", old)
	if r.status != 412 || !strings.Contains(string(r.body), "deleted and created again") {
		t.Fatalf("PATCH with the old feature's ETag = %d %s, want 412 saying it was re-created", r.status, r.body)
	}
	s.must(200, "PATCH", "/api/features/f", map[string]any{"enabled": false}, "If-Match", now)
}

// openServer is the API and dashboard with access control but no token yet:
// the API is open, as on a fresh install.
func openServer(t *testing.T, anyHost bool) (*testServer, *auth.Tokens) {
	t.Helper()
	g := newAuthServer(t, nil, anyHost)
	return &testServer{t: t, URL: g.url, svc: g.svc, db: g.db}, g.tokens
}

// TestOpenAPIAnswersOnlyLoopbackHosts: with no token, a page that reached
// the server through a DNS name rebound to 127.0.0.1 is refused, whatever
// Sec-Fetch-Site it claims; loopback names pass.
func TestOpenAPIAnswersOnlyLoopbackHosts(t *testing.T) {
	s, tokens := openServer(t, false)
	port := s.URL[strings.LastIndex(s.URL, ":"):]
	create := map[string]any{"key": "f", "buckets": []any{map[string]any{"name": "A"}}}
	for _, host := range []string{"attacker.example" + port, "attacker.example", "127.0.0.1.nip.io" + port, "10.0.0.1" + port, "localhost.attacker.example"} {
		for _, req := range []struct{ method, path string }{{"POST", "/api/features"}, {"GET", "/api/features"}, {"GET", "/ui/"}} {
			r := s.do(req.method, req.path, create, "Host", host, "Sec-Fetch-Site", "same-origin")
			if req.method == "GET" {
				r = s.do(req.method, req.path, nil, "Host", host, "Sec-Fetch-Site", "same-origin")
			}
			if r.status != http.StatusForbidden {
				t.Errorf("%s %s with Host %s = %d %.100s, want 403", req.method, req.path, host, r.status, r.body)
			}
		}
	}
	if n := s.versions("f"); n != 0 {
		t.Fatal("a request for a foreign host created a feature")
	}
	for _, host := range []string{"127.0.0.1" + port, "localhost" + port, "LOCALHOST" + port, "[::1]" + port, "127.0.0.2" + port, "localhost"} {
		s.must(200, "GET", "/api/features", nil, "Host", host)
	}
	s.must(201, "POST", "/api/features", create, "Host", "localhost"+port)

	// Once tokens are required, a token is the guard and any host name
	// (a load balancer's, a real domain) is fine.
	_, secret, err := tokens.Create(context.Background(), "admin", auth.RoleAdmin, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	s.must(200, "GET", "/api/features", nil, "Host", "rollout.example.com", "Authorization", "Bearer "+secret)

	// --insecure serves any host while open.
	insecure, _ := openServer(t, true)
	insecure.must(200, "GET", "/api/features", nil, "Host", "rollout.internal"+port)
}

// TestBearerAndAPIKey: an empty Authorization: Bearer does not hide a valid
// X-API-Key.
func TestBearerAndAPIKey(t *testing.T) {
	g := newGuardedServer(t)
	for _, header := range [][]string{
		{"Authorization", "Bearer", "X-API-Key", g.secrets["viewer"]},
		{"Authorization", "Bearer ", "X-API-Key", g.secrets["viewer"]},
		{"Authorization", "Bearer " + g.secrets["viewer"], "X-API-Key", "wrong"},
	} {
		req, _ := http.NewRequest("GET", g.url+"/api/features", nil)
		for i := 0; i < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Errorf("headers %q: GET /api/features = %d, want 200", header[0:3:3], res.StatusCode)
		}
	}
}

// TestSignOutEndsTheSession: a session cookie saved before signing out no
// longer works afterwards, while another session of the same token does.
func TestSignOutEndsTheSession(t *testing.T) {
	g := newGuardedServer(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	signIn := func() *http.Cookie {
		res, err := noRedirect.PostForm(g.url+"/ui/login", url.Values{"token": {g.secrets["viewer"]}, "next": {"/ui/"}})
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		for _, ck := range res.Cookies() {
			if ck.Name == api.SessionCookie && ck.Value != "" {
				return ck
			}
		}
		t.Fatalf("sign-in = %d without a session cookie", res.StatusCode)
		return nil
	}
	get := func(ck *http.Cookie) int {
		req, _ := http.NewRequest("GET", g.url+"/api/features", nil)
		req.AddCookie(ck)
		res, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	saved, other := signIn(), signIn()
	if get(saved) != 200 || get(other) != 200 {
		t.Fatal("a fresh session does not work")
	}
	req, _ := http.NewRequest("POST", g.url+"/ui/logout", nil)
	req.AddCookie(saved)
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := get(saved); got != http.StatusUnauthorized {
		t.Errorf("the signed-out session's cookie, replayed: GET = %d, want 401", got)
	}
	if got := get(other); got != 200 {
		t.Errorf("another session of the same token after the sign-out: GET = %d, want 200", got)
	}
}
