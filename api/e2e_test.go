package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
)

// The API end to end: every route through a real server on a loopback port
// over a SQLite file, with JSON in and out, as apps and scripts use it.

// apiServer is the API served on a loopback port over a SQLite file, which
// restart serves anew; its helpers decode answers as JSON.
type apiServer struct {
	t  *testing.T
	ts *testServer
}

func startServer(t *testing.T) *apiServer {
	t.Helper()
	return &apiServer{t: t, ts: newServer(t, "", api.Options{})}
}

// restart writes the evaluation counts to the database, as the binary does
// when it stops, and serves the API anew over the same database file.
func (s *apiServer) restart() {
	s.t.Helper()
	if err := s.ts.svc.FlushExposures(context.Background()); err != nil {
		s.t.Fatalf("flush exposures: %v", err)
	}
	s.ts = newServer(s.t, s.ts.dbPath, api.Options{})
}

// errorCode returns the code of an error answer, or "".
func (r response) errorCode() string {
	var v struct {
		Error struct{ Code, Message string }
	}
	if json.Unmarshal(r.body, &v) != nil {
		return ""
	}
	return v.Error.Code
}

// do sends a request; body is sent as JSON unless it is a string.
func (s *apiServer) do(method, path string, body any, header ...string) response {
	s.t.Helper()
	return s.ts.do(method, path, body, header...)
}

// must sends a request and fails the test unless it answers want; it
// returns the answer's JSON object (nil for 204 and 304).
func (s *apiServer) must(want int, method, path string, body any, header ...string) map[string]any {
	s.t.Helper()
	r := s.ts.must(want, method, path, body, header...)
	if r.status == http.StatusNoContent || r.status == http.StatusNotModified {
		return nil
	}
	return r.json(s.t)
}

// etag returns the ETag of the feature key, as If-Match takes it.
func (s *apiServer) etag(key string) string {
	s.t.Helper()
	r := s.do("GET", "/api/features/"+url.PathEscape(key), nil)
	if r.status != http.StatusOK || r.header.Get("ETag") == "" {
		s.t.Fatalf("GET feature %s = %d %s with ETag %q", key, r.status, r.body, r.header.Get("ETag"))
	}
	return r.header.Get("ETag")
}

func (s *apiServer) evaluate(feature, user string) map[string]any {
	s.t.Helper()
	return s.must(200, "GET", "/evaluate?feature="+url.QueryEscape(feature)+"&user="+url.QueryEscape(user), nil)
}

func abcFeature(key string) map[string]any {
	return map[string]any{
		"key": key, "salt": "",
		"buckets": []map[string]any{{"name": "A", "replicas": 3}, {"name": "B", "replicas": 3}, {"name": "C", "replicas": 3}},
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 5e-8 }

type vectors struct {
	Rings []struct {
		Buckets []struct {
			Name     string `json:"name"`
			Replicas int    `json:"replicas"`
		} `json:"buckets"`
		Keys   []string           `json:"keys"`
		Expect []string           `json:"expect"`
		Shares map[string]float64 `json:"shares"`
	} `json:"rings"`
}

// TestGoldenVectorsOverHTTP creates a feature per reference ring with an
// empty salt and checks every key evaluates as the reference says.
func TestGoldenVectorsOverHTTP(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "ring", "testdata", "ring_vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	s := startServer(t)
	for i, r := range v.Rings {
		key := fmt.Sprintf("golden-%d", i)
		s.must(201, "POST", "/api/features", map[string]any{"key": key, "salt": "", "buckets": r.Buckets})
		f := s.must(200, "GET", "/api/features/"+key, nil)
		for name, want := range r.Shares {
			if got := f["shares"].(map[string]any)[name].(float64); got != want {
				t.Errorf("%s: shares[%s] = %v, want %v", key, name, got, want)
			}
		}
		for k, user := range r.Keys {
			got := s.evaluate(key, user)
			if got["bucket"] != r.Expect[k] || got["reason"] != "ring" {
				t.Errorf("%s: evaluate(%q) = %v, want bucket %q", key, user, got, r.Expect[k])
			}
		}
	}
}

// TestAddFourthBucket is the product's promise: growing A, B, C to A, B, C,
// D moves exactly D's share, all of it into D.
func TestAddFourthBucket(t *testing.T) {
	s := startServer(t)
	s.must(201, "POST", "/api/features", abcFeature("checkout"))

	preview := s.must(200, "POST", "/api/features/checkout/preview", map[string]any{"buckets": []map[string]any{
		{"name": "A", "replicas": 3}, {"name": "B", "replicas": 3}, {"name": "C", "replicas": 3}, {"name": "D", "replicas": 3},
	}})
	checkAddD := func(what string, rep map[string]any) {
		t.Helper()
		if churn := rep["churn"].(float64); !near(churn, 0.2226766) {
			t.Errorf("%s: churn = %v, want 0.2226766", what, churn)
		}
		moves := rep["moves"].([]any)
		for _, m := range moves {
			if m.(map[string]any)["to"] != "D" {
				t.Errorf("%s: move %v does not go into D", what, m)
			}
		}
		if len(moves) != 3 {
			t.Errorf("%s: %d moves, want one from each of A, B, C", what, len(moves))
		}
		if rep["modulo_churn"].(float64) != 0.75 {
			t.Errorf("%s: modulo_churn = %v, want 0.75", what, rep["modulo_churn"])
		}
	}
	checkAddD("preview", preview)
	if v := s.must(200, "GET", "/api/features/checkout", nil)["version"]; v != 1.0 {
		t.Fatalf("preview changed the feature: version %v", v)
	}

	res := s.must(200, "POST", "/api/features/checkout/buckets", map[string]any{"name": "D", "replicas": 3})
	checkAddD("add", res["report"].(map[string]any))
	if res["feature"].(map[string]any)["version"] != 2.0 {
		t.Errorf("version after add = %v, want 2", res["feature"].(map[string]any)["version"])
	}
}

func TestEvaluate(t *testing.T) {
	s := startServer(t)
	s.must(201, "POST", "/api/features", map[string]any{
		"key": "banner", "buckets": []map[string]any{{"name": "on", "value": true}, {"name": "off", "value": false}},
	})
	s.must(201, "POST", "/api/features", map[string]any{
		"key": "theme", "buckets": []map[string]any{{"name": "dark", "value": map[string]any{"bg": "#000"}}},
	})

	t.Run("one", func(t *testing.T) {
		got := s.evaluate("theme", "user-1")
		want := map[string]any{"feature": "theme", "user": "user-1", "bucket": "dark",
			"value": map[string]any{"bg": "#000"}, "version": 1.0, "reason": "ring"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("evaluate = %v, want %v", got, want)
		}
	})
	t.Run("salt defaults to the key", func(t *testing.T) {
		// The same buckets under another key assign users differently.
		s.must(201, "POST", "/api/features", map[string]any{"key": "banner2",
			"buckets": []map[string]any{{"name": "on", "value": true}, {"name": "off", "value": false}}})
		differ := 0
		for i := range 200 {
			u := fmt.Sprint("u", i)
			if s.evaluate("banner", u)["bucket"] != s.evaluate("banner2", u)["bucket"] {
				differ++
			}
		}
		if differ < 50 || differ > 150 {
			t.Errorf("%d of 200 users differ between two features with the same buckets; want about half", differ)
		}
	})
	t.Run("bulk", func(t *testing.T) {
		got := s.must(200, "POST", "/evaluate", map[string]any{"user": "u1", "features": []string{"banner", "nope", "theme"}})
		results := got["results"].(map[string]any)
		if results["banner"].(map[string]any)["reason"] != "ring" || results["theme"].(map[string]any)["bucket"] != "dark" {
			t.Errorf("bulk results = %v", results)
		}
		if code := results["nope"].(map[string]any)["error"].(map[string]any)["code"]; code != "not_found" {
			t.Errorf("unknown feature entry = %v, want a not_found error", results["nope"])
		}
		all := s.must(200, "POST", "/evaluate", map[string]any{"user": "u1"})["results"].(map[string]any)
		if len(all) != 3 {
			t.Errorf("bulk without features: %d results, want every feature (3)", len(all))
		}
	})
	t.Run("errors", func(t *testing.T) {
		for _, tt := range []struct {
			method, path string
			body         any
			status       int
		}{
			{"GET", "/evaluate?feature=nope&user=u", nil, 404},
			{"GET", "/evaluate?feature=banner", nil, 400},
			{"GET", "/evaluate?user=u", nil, 400},
			{"GET", "/evaluate?feature=banner&user=" + strings.Repeat("x", 257), nil, 422},
			{"GET", "/evaluate?feature=banner&user=%ff", nil, 422},
			{"POST", "/evaluate", `{"user":`, 400},
			{"POST", "/evaluate", `{"user":"u","features":"banner"}`, 400},
			{"POST", "/evaluate", `{"user":"u","color":"red"}`, 400},
			{"POST", "/evaluate", `{"features":["banner"]}`, 422},
			{"POST", "/evaluate", "", 400},
		} {
			r := s.do(tt.method, tt.path, tt.body)
			if r.status != tt.status || r.errorCode() == "" {
				t.Errorf("%s %s %v = %d %s, want %d with a JSON error", tt.method, tt.path, tt.body, r.status, r.body, tt.status)
			}
		}
	})
}

// TestChangesAndHistory drives every mutation, the guards, the history and
// rollback, then restarts the server and checks everything survived.
func TestChangesAndHistory(t *testing.T) {
	s := startServer(t)
	created := s.must(201, "POST", "/api/features", abcFeature("checkout"))
	if rep := created["report"].(map[string]any); rep["from_version"] != 0.0 || rep["churn"] != 1.0 {
		t.Errorf("create report = %v, want from_version 0 and every user newly assigned", rep)
	}
	users := make([]string, 300)
	v1 := map[string]any{}
	for i := range users {
		users[i] = fmt.Sprint("user:", i)
		v1[users[i]] = s.evaluate("checkout", users[i])["bucket"]
	}

	t.Run("max_churn refuses and changes nothing", func(t *testing.T) {
		r := s.do("POST", "/api/features/checkout/buckets?max_churn=0.1", map[string]any{"name": "D", "replicas": 3})
		if r.status != 409 || r.errorCode() != "max_churn_exceeded" {
			t.Fatalf("add D with max_churn 0.1 = %d %s, want 409 max_churn_exceeded", r.status, r.body)
		}
		rep := r.json(t)["error"].(map[string]any)["report"].(map[string]any)
		if !near(rep["churn"].(float64), 0.2226766) {
			t.Errorf("refused report churn = %v", rep["churn"])
		}
		if v := s.must(200, "GET", "/api/features/checkout", nil)["version"]; v != 1.0 {
			t.Errorf("version after refused change = %v, want 1", v)
		}
	})
	t.Run("dry run stores nothing", func(t *testing.T) {
		res := s.must(200, "POST", "/api/features/checkout/buckets?dry_run=true", map[string]any{"name": "D", "replicas": 3})
		if res["dry_run"] != true || res["feature"].(map[string]any)["version"] != 2.0 {
			t.Errorf("dry run answer = %v", res)
		}
		if v := s.must(200, "GET", "/api/features/checkout", nil)["version"]; v != 1.0 {
			t.Errorf("version after dry run = %v, want 1", v)
		}
	})
	t.Run("If-Match", func(t *testing.T) {
		r := s.do("POST", "/api/features/checkout/buckets", map[string]any{"name": "D", "replicas": 3}, "If-Match", `"7"`)
		if r.status != 412 || r.errorCode() != "precondition_failed" {
			t.Fatalf("stale If-Match = %d %s, want 412", r.status, r.body)
		}
		tag := s.etag("checkout")
		if !strings.HasPrefix(tag, `"1-`) {
			t.Fatalf("ETag of version 1 = %s, want \"1-…\"", tag)
		}
		res := s.do("POST", "/api/features/checkout/buckets", map[string]any{"name": "D", "replicas": 3, "max_churn": 0.25}, "If-Match", tag)
		if res.status != 200 || res.header.Get("ETag") != `"2-`+tag[3:] {
			t.Fatalf("add D = %d %s (ETag %s), want 200 with ETag \"2-…\"", res.status, res.body, res.header.Get("ETag"))
		}
	})
	for _, u := range users {
		got := s.evaluate("checkout", u)["bucket"]
		if got != v1[u] && got != "D" {
			t.Errorf("after adding D, %s moved %v -> %v: only moves into D are allowed", u, v1[u], got)
		}
	}

	s.must(200, "PUT", "/api/features/checkout/buckets/A", map[string]any{"replicas": 50})
	s.must(200, "PUT", "/api/features/checkout/buckets/B", map[string]any{"value": map[string]any{"color": "blue"}})
	s.must(200, "PUT", "/api/features/checkout/overrides/vip@example.com", map[string]any{"bucket": "C"})
	if got := s.evaluate("checkout", "vip@example.com"); got["bucket"] != "C" || got["reason"] != "override" {
		t.Errorf("override: evaluate = %v, want C by override", got)
	}
	s.must(200, "DELETE", "/api/features/checkout/buckets/D", nil)
	s.must(200, "PATCH", "/api/features/checkout", map[string]any{"enabled": false, "fallback": "A"})
	if got := s.evaluate("checkout", "user:1"); got["bucket"] != "A" || got["reason"] != "disabled" {
		t.Errorf("disabled with fallback A: evaluate = %v", got)
	}
	off := s.must(200, "PATCH", "/api/features/checkout", map[string]any{"fallback": ""})
	if off["feature"].(map[string]any)["fallback"] != nil {
		t.Errorf("fallback after clearing = %v", off["feature"].(map[string]any)["fallback"])
	}
	if got := s.evaluate("checkout", "user:1"); got["bucket"] != nil || got["value"] != nil || got["reason"] != "disabled" {
		t.Errorf("disabled without fallback: evaluate = %v, want null bucket and value", got)
	}
	s.must(200, "PATCH", "/api/features/checkout", map[string]any{"enabled": true, "description": "checkout flow"})
	s.must(200, "DELETE", "/api/features/checkout/overrides/vip@example.com", nil)

	rolled := s.must(200, "POST", "/api/features/checkout/rollback", map[string]any{"version": 1})
	if rolled["feature"].(map[string]any)["version"] != 11.0 {
		t.Errorf("rollback made version %v, want 11", rolled["feature"].(map[string]any)["version"])
	}
	for _, u := range users {
		if got := s.evaluate("checkout", u)["bucket"]; got != v1[u] {
			t.Errorf("after rollback to 1, %s is in %v, want %v", u, got, v1[u])
		}
	}

	checkHistory := func() {
		t.Helper()
		vs := s.must(200, "GET", "/api/features/checkout/versions", nil)["versions"].([]any)
		if len(vs) != 11 {
			t.Fatalf("%d versions, want 11", len(vs))
		}
		for i, v := range vs {
			v := v.(map[string]any)
			if v["version"] != float64(11-i) || v["summary"] == "" || v["actor"] == "" || v["time"] == "" {
				t.Errorf("versions[%d] = %v: want version %d with summary, actor and time, newest first", i, v, 11-i)
			}
		}
		v2 := s.must(200, "GET", "/api/features/checkout/versions/2", nil)
		if sum, _ := v2["summary"].(string); !strings.HasPrefix(sum, "added bucket D; ") || !strings.HasSuffix(sum, "22.27 % of users moved, all into D") || !near(v2["report"].(map[string]any)["churn"].(float64), 0.2226766) {
			t.Errorf("version 2 = %v", v2)
		}
		page := s.must(200, "GET", "/api/features/checkout/versions?before=5&limit=2", nil)["versions"].([]any)
		if len(page) != 2 || page[0].(map[string]any)["version"] != 4.0 {
			t.Errorf("versions?before=5&limit=2 = %v", page)
		}
	}
	checkHistory()

	s.restart()
	checkHistory()
	for _, u := range users {
		if got := s.evaluate("checkout", u)["bucket"]; got != v1[u] {
			t.Errorf("after restart, %s is in %v, want %v", u, got, v1[u])
		}
	}
	if f := s.must(200, "GET", "/api/features/checkout", nil); f["description"] != "" || f["version"] != 11.0 {
		t.Errorf("after restart, feature = %v", f)
	}

	s.must(204, "DELETE", "/api/features/checkout", nil, "If-Match", s.etag("checkout"))
	s.must(404, "GET", "/api/features/checkout", nil)
	s.must(404, "GET", "/evaluate?feature=checkout&user=u", nil)
	s.restart()
	s.must(404, "GET", "/api/features/checkout", nil)
}

func TestReshuffle(t *testing.T) {
	s := startServer(t)
	s.must(201, "POST", "/api/features", abcFeature("exp"))
	before := map[string]any{}
	for i := range 400 {
		before[fmt.Sprint(i)] = s.evaluate("exp", fmt.Sprint(i))["bucket"]
	}
	res := s.must(200, "POST", "/api/features/exp/reshuffle", map[string]any{"salt": "2026-q4"})
	rep := res["report"].(map[string]any)
	if rep["method"] != "expected" || rep["churn"].(float64) < 0.4 {
		t.Errorf("reshuffle report = %v, want the expected churn of independent re-hashing", rep)
	}
	moved := 0
	for u, b := range before {
		if s.evaluate("exp", u)["bucket"] != b {
			moved++
		}
	}
	if want := rep["churn"].(float64) * 400; math.Abs(float64(moved)-want) > 60 {
		t.Errorf("%d of 400 users moved, report expected %.0f", moved, want)
	}
	if res["feature"].(map[string]any)["salt"] != "2026-q4" {
		t.Errorf("salt = %v", res["feature"].(map[string]any)["salt"])
	}
	s.must(422, "POST", "/api/features/exp/reshuffle", map[string]any{"salt": "2026-q4"})
}

// TestErrors sends every kind of bad request to every endpoint: each gets a
// JSON error with its 4xx status, and nothing changes.
func TestErrors(t *testing.T) {
	s := startServer(t)
	s.must(201, "POST", "/api/features", abcFeature("f"))
	s.must(200, "PUT", "/api/features/f/overrides/vip", map[string]any{"bucket": "A"})

	tests := []struct {
		method, path string
		body         any
		status       int
		code         string
	}{
		{"POST", "/api/features", abcFeature("f"), 409, "conflict"},
		{"POST", "/api/features", `{"key":"g","buckets":[{"name":"A"}],"extra":1}`, 400, "bad_request"},
		{"POST", "/api/features", `{"key":"g","buckets":[{"name":"A","replicas":"3"}]}`, 400, "bad_request"},
		{"POST", "/api/features", `{"key":"g","buckets":[{"name":"A"}]} {}`, 400, "bad_request"},
		{"POST", "/api/features", `[1,2]`, 400, "bad_request"},
		{"POST", "/api/features", `{"key":"g",`, 400, "bad_request"},
		{"POST", "/api/features", map[string]any{"key": "Bad Key", "buckets": []any{map[string]any{"name": "A"}}}, 422, "invalid"},
		{"POST", "/api/features", map[string]any{"key": "g"}, 422, "invalid"},
		{"POST", "/api/features", map[string]any{"key": "g", "buckets": []any{map[string]any{"name": "A#1"}}}, 422, "invalid"},
		{"POST", "/api/features", map[string]any{"key": "g", "buckets": []any{map[string]any{"name": "A"}, map[string]any{"name": "A"}}}, 422, "invalid"},
		{"POST", "/api/features", map[string]any{"key": "g", "buckets": []any{map[string]any{"name": "A", "replicas": 0}}}, 422, "invalid"},
		{"POST", "/api/features", map[string]any{"key": "g", "buckets": []any{map[string]any{"name": "A", "replicas": 20001}}}, 422, "invalid"},
		{"POST", "/api/features", map[string]any{"key": "g", "buckets": []any{map[string]any{"name": "A", "replicas": 2000}, map[string]any{"name": "B", "replicas": 2000}, map[string]any{"name": "C", "replicas": 2000}, map[string]any{"name": "D", "replicas": 2000}, map[string]any{"name": "E", "replicas": 2000}, map[string]any{"name": "F", "replicas": 2000}, map[string]any{"name": "G", "replicas": 2000}, map[string]any{"name": "H", "replicas": 2000}, map[string]any{"name": "I", "replicas": 2000}, map[string]any{"name": "J", "replicas": 2000}, map[string]any{"name": "K", "replicas": 1}}}, 422, "invalid"},
		{"POST", "/api/features", map[string]any{"key": "g", "fallback": "Z", "buckets": []any{map[string]any{"name": "A"}}}, 422, "invalid"},
		{"POST", "/api/features", `{"key":"g","buckets":[{"name":"A","replicas":1e400}]}`, 400, "bad_request"},
		{"POST", "/api/features", `{"key":"g","buckets":[{"name":"A","replicas":3.5}]}`, 400, "bad_request"},
		{"POST", "/api/features", `{"key":"g","buckets":[{"name":"A","value":{"x":` + strings.Repeat("1", MaxTestValue) + `}}]}`, 422, "invalid"},
		{"POST", "/api/features", `{"key":"g","buckets":[{"name":"A"}],"description":"` + strings.Repeat("x", 2<<20) + `"}`, 413, "too_large"},
		{"GET", "/api/features/nope", nil, 404, "not_found"},
		{"PATCH", "/api/features/nope", map[string]any{"enabled": false}, 404, "not_found"},
		{"PATCH", "/api/features/f", map[string]any{}, 422, "invalid"},
		{"PATCH", "/api/features/f", map[string]any{"enabled": "no"}, 400, "bad_request"},
		{"PATCH", "/api/features/f", map[string]any{"fallback": "Z"}, 422, "invalid"},
		{"DELETE", "/api/features/nope", nil, 404, "not_found"},
		{"DELETE", "/api/features/f", nil, 412, "precondition_failed"}, // with If-Match below
		{"POST", "/api/features/f/buckets", map[string]any{"name": "A", "replicas": 3}, 409, "conflict"},
		{"POST", "/api/features/f/buckets", map[string]any{"name": "", "replicas": 3}, 422, "invalid"},
		{"POST", "/api/features/f/buckets?max_churn=2", map[string]any{"name": "D"}, 400, "bad_request"},
		{"POST", "/api/features/f/buckets?max_churn=abc", map[string]any{"name": "D"}, 400, "bad_request"},
		{"POST", "/api/features/f/buckets?dry_run=maybe", map[string]any{"name": "D"}, 400, "bad_request"},
		{"POST", "/api/features/nope/buckets", map[string]any{"name": "D"}, 404, "not_found"},
		{"PUT", "/api/features/f/buckets/Z", map[string]any{"replicas": 3}, 404, "not_found"},
		{"PUT", "/api/features/f/buckets/A", map[string]any{}, 422, "invalid"},
		{"PUT", "/api/features/f/buckets/A", map[string]any{"replicas": -1}, 422, "invalid"},
		{"PUT", "/api/features/f/buckets/A", map[string]any{"value": "x"}, 412, "precondition_failed"}, // If-Match below
		{"DELETE", "/api/features/f/buckets/Z", nil, 404, "not_found"},
		{"DELETE", "/api/features/f/buckets/A", nil, 409, "conflict"}, // vip's override names it
		{"PUT", "/api/features/f/overrides/u1", map[string]any{"bucket": "Z"}, 422, "invalid"},
		{"PUT", "/api/features/f/overrides/" + strings.Repeat("u", 300), map[string]any{"bucket": "A"}, 422, "invalid"},
		{"DELETE", "/api/features/f/overrides/nobody", nil, 404, "not_found"},
		{"POST", "/api/features/f/preview", map[string]any{}, 400, "bad_request"},
		{"POST", "/api/features/f/preview", map[string]any{"buckets": []any{}}, 422, "invalid"},
		{"POST", "/api/features/nope/preview", map[string]any{"buckets": []any{map[string]any{"name": "A"}}}, 404, "not_found"},
		{"POST", "/api/features/f/rollback", map[string]any{}, 400, "bad_request"},
		{"POST", "/api/features/f/rollback", map[string]any{"version": 99}, 404, "not_found"},
		{"GET", "/api/features/f/versions/99", nil, 404, "not_found"},
		{"GET", "/api/features/f/versions/x", nil, 400, "bad_request"},
		{"GET", "/api/features/f/versions?limit=-1", nil, 400, "bad_request"},
		{"GET", "/api/features/nope/versions", nil, 404, "not_found"},
		{"GET", "/api/nothing", nil, 404, "not_found"},
		{"PUT", "/api/features", nil, 405, "method_not_allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			var header []string
			if tt.status == 412 {
				header = []string{"If-Match", `"9"`}
			}
			r := s.do(tt.method, tt.path, tt.body, header...)
			if r.status != tt.status || r.errorCode() != tt.code {
				t.Errorf("= %d %.300s, want %d %s", r.status, r.body, tt.status, tt.code)
			}
			if !strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
				t.Errorf("Content-Type = %q, want JSON", r.header.Get("Content-Type"))
			}
		})
	}
	// Nothing changed.
	if v := s.must(200, "GET", "/api/features/f", nil)["version"]; v != 2.0 {
		t.Errorf("version after bad requests = %v, want 2", v)
	}
	if n := len(s.must(200, "GET", "/api/features", nil)["features"].([]any)); n != 1 {
		t.Errorf("%d features after bad requests, want 1", n)
	}
}

const MaxTestValue = 9000

func TestPathEscapes(t *testing.T) {
	s := startServer(t)
	s.must(201, "POST", "/api/features", abcFeature("f"))
	for _, user := range []string{"a b", "a/b", "ünï", "100%"} {
		s.must(200, "PUT", "/api/features/f/overrides/"+url.PathEscape(user), map[string]any{"bucket": "B"})
		if got := s.evaluate("f", user); got["bucket"] != "B" || got["reason"] != "override" {
			t.Errorf("override for %q: evaluate = %v", user, got)
		}
	}
}

// TestCrossSiteRequestsRefused: a page on another site cannot change
// features through the visitor's browser; the same request from curl can.
func TestCrossSiteRequestsRefused(t *testing.T) {
	s := startServer(t)
	body := abcFeature("f")
	for _, h := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Origin", "https://evil.example"},
	} {
		r := s.do("POST", "/api/features", body, h...)
		if r.status != 403 || r.errorCode() != "forbidden" {
			t.Errorf("POST with %s: %s = %d %s, want 403 forbidden", h[0], h[1], r.status, r.body)
		}
	}
	s.must(404, "GET", "/api/features/f", nil)
	s.must(201, "POST", "/api/features", body, "Sec-Fetch-Site", "same-origin")
	// Reads and evaluation stay open to browsers on other sites.
	s.must(200, "GET", "/evaluate?feature=f&user=u", nil, "Sec-Fetch-Site", "cross-site")
}

func TestUserHistory(t *testing.T) {
	s := startServer(t)
	s.must(201, "POST", "/api/features", abcFeature("f"))
	s.must(200, "PUT", "/api/features/f/overrides/user1", map[string]any{"bucket": "A"})
	s.must(200, "PATCH", "/api/features/f", map[string]any{"enabled": false})
	got := s.must(200, "GET", "/api/features/f/users/user1", nil)
	if now := got["now"].(map[string]any); now["reason"] != "disabled" || now["bucket"] != nil {
		t.Errorf("now = %v, want disabled with no bucket", now)
	}
	var buckets, reasons []any
	for _, v := range got["versions"].([]any) {
		buckets = append(buckets, v.(map[string]any)["bucket"])
		reasons = append(reasons, v.(map[string]any)["reason"])
	}
	// Newest first: disabled, overridden to A, and the reference ring's B.
	if fmt.Sprint(buckets) != "[<nil> A B]" || fmt.Sprint(reasons) != "[disabled override ring]" {
		t.Errorf("history buckets %v reasons %v, want [<nil> A B] [disabled override ring]", buckets, reasons)
	}
	s.must(404, "GET", "/api/features/nope/users/user1", nil)
	s.must(422, "GET", "/api/features/f/users/"+strings.Repeat("u", 300), nil)
}

// TestExposures counts evaluations per bucket in memory, shows them next to
// the exact shares, and keeps them across a restart (flushed at shutdown).
func TestExposures(t *testing.T) {
	s := startServer(t)
	s.must(201, "POST", "/api/features", abcFeature("f"))
	for i := range 2000 {
		s.evaluate("f", fmt.Sprint("user:", i))
	}
	s.must(200, "POST", "/evaluate", map[string]any{"user": "u", "features": []string{"f"}})

	check := func(when string) {
		t.Helper()
		got := s.must(200, "GET", "/api/features/f/exposures", nil)
		if got["total"] != 2001.0 || got["version"] != 1.0 {
			t.Fatalf("%s: exposures = %v, want 2001 evaluations at version 1", when, got)
		}
		var sum float64
		for _, b := range got["buckets"].([]any) {
			b := b.(map[string]any)
			sum += b["count"].(float64)
			if math.Abs(b["observed_share"].(float64)-b["exact_share"].(float64)) > 0.03 {
				t.Errorf("%s: bucket %v observed %.3f, exact %.3f", when, b["bucket"], b["observed_share"], b["exact_share"])
			}
		}
		if sum != 2001 {
			t.Errorf("%s: bucket counts add up to %v, want 2001", when, sum)
		}
	}
	check("in memory")
	s.restart()
	check("after restart")

	// Counts of a later version are kept apart.
	s.must(200, "POST", "/api/features/f/buckets", map[string]any{"name": "D", "replicas": 3})
	s.evaluate("f", "someone")
	got := s.must(200, "GET", "/api/features/f/exposures", nil)
	if got["total"] != 1.0 || len(got["versions"].([]any)) < 4 {
		t.Errorf("after a change: exposures = %v, want 1 evaluation at version 2 and version 1's counts kept", got)
	}
	s.must(404, "GET", "/api/features/nope/exposures", nil)
}
