package evaluation_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/api/evaluation"
	"github.com/rollout/rollout/api/internal/apitest"
)

const (
	ofrepFlags = "/ofrep/v1/evaluate/flags"
	// tooLarge is a body over api.MaxBodyBytes.
	tooLargeUser = 2 << 20
)

func ofrepBody(user string) map[string]any {
	return map[string]any{"context": map[string]any{"targetingKey": user}}
}

// TestOFREPEvaluate pins the single-flag endpoint's answers, each status and
// error code of the OFREP spec among them.
func TestOFREPEvaluate(t *testing.T) {
	s := apitest.New(t, "", api.Options{})
	s.Seed()
	ring := s.Evaluate("checkout", "user-1")
	dark := s.Evaluate("dark-mode", "user-1")
	banner := s.Evaluate("banner", "user-1")
	limit := s.Evaluate("limit", "user-1")
	success := func(key, variant, value, reason string) map[string]any {
		var v any
		if err := json.Unmarshal([]byte(value), &v); err != nil {
			t.Fatal(err)
		}
		return map[string]any{"key": key, "value": v, "variant": variant, "reason": reason, "metadata": map[string]any{"version": 1.0}}
	}
	failure := func(key, code string) map[string]any {
		return map[string]any{"key": key, "errorCode": code, "errorDetails": "…"}
	}

	tests := []struct {
		name   string
		key    string
		body   any
		status int
		want   map[string]any
	}{
		{"string, ring", "checkout", ofrepBody("user-1"), 200, success("checkout", ring.Bucket, string(ring.Value), "SPLIT")},
		{"override", "checkout", ofrepBody("vip"), 200, success("checkout", "C", `"C"`, "TARGETING_MATCH")},
		{"boolean", "dark-mode", ofrepBody("user-1"), 200, success("dark-mode", dark.Bucket, string(dark.Value), "SPLIT")},
		{"object", "banner", ofrepBody("user-1"), 200, success("banner", banner.Bucket, string(banner.Value), "SPLIT")},
		{"number", "limit", ofrepBody("user-1"), 200, success("limit", limit.Bucket, string(limit.Value), "SPLIT")},
		{"disabled with fallback", "paused", ofrepBody("user-1"), 200, success("paused", "old", `"old-flow"`, "DISABLED")},
		{"disabled without fallback: no value", "killed", ofrepBody("user-1"), 200,
			map[string]any{"key": "killed", "reason": "DISABLED", "metadata": map[string]any{"version": 1.0}}},
		{"other context attributes ignored", "checkout",
			`{"context":{"targetingKey":"user-1","email":"a@example.com","plan":{"tier":2},"flags":5}}`, 200,
			success("checkout", ring.Bucket, string(ring.Value), "SPLIT")},
		{"unknown top-level field ignored", "checkout", `{"context":{"targetingKey":"user-1"},"extra":1}`, 200,
			success("checkout", ring.Bucket, string(ring.Value), "SPLIT")},

		{"malformed JSON", "checkout", `{"context":`, 400, failure("checkout", "PARSE_ERROR")},
		{"not an object", "checkout", `[1,2]`, 400, failure("checkout", "PARSE_ERROR")},
		{"trailing data", "checkout", `{"context":{"targetingKey":"u"}} {}`, 400, failure("checkout", "PARSE_ERROR")},
		{"empty body", "checkout", ``, 400, failure("checkout", "TARGETING_KEY_MISSING")},
		{"no context", "checkout", `{}`, 400, failure("checkout", "TARGETING_KEY_MISSING")},
		{"null context", "checkout", `{"context":null}`, 400, failure("checkout", "TARGETING_KEY_MISSING")},
		{"no targeting key", "checkout", `{"context":{"email":"a@example.com"}}`, 400, failure("checkout", "TARGETING_KEY_MISSING")},
		{"empty targeting key", "checkout", ofrepBody(""), 400, failure("checkout", "TARGETING_KEY_MISSING")},
		{"null targeting key", "checkout", `{"context":{"targetingKey":null}}`, 400, failure("checkout", "TARGETING_KEY_MISSING")},
		{"context not an object", "checkout", `{"context":"user-1"}`, 400, failure("checkout", "INVALID_CONTEXT")},
		{"targeting key not a string", "checkout", `{"context":{"targetingKey":42}}`, 400, failure("checkout", "INVALID_CONTEXT")},
		{"targeting key too long", "checkout", ofrepBody(strings.Repeat("u", 300)), 400, failure("checkout", "INVALID_CONTEXT")},
		{"unknown flag", "nope", ofrepBody("user-1"), 404, failure("nope", "FLAG_NOT_FOUND")},
		{"unknown flag, no targeting key", "nope", `{}`, 404, failure("nope", "FLAG_NOT_FOUND")},
		{"unknown flag, a context that is not an object", "nope", `{"context":5}`, 404, failure("nope", "FLAG_NOT_FOUND")},
		{"body too large", "checkout", ofrepBody(strings.Repeat("u", tooLargeUser)), 413, map[string]any{"errorDetails": "…"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.Do("POST", ofrepFlags+"/"+tt.key, tt.body)
			if r.Status != tt.status {
				t.Fatalf("POST %s/%s = %d %s, want %d", ofrepFlags, tt.key, r.Status, r.Body, tt.status)
			}
			if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type = %q, want application/json", ct)
			}
			got := r.JSON(t)
			if d, ok := got["errorDetails"].(string); ok && d != "" {
				got["errorDetails"] = "…" // any explanation will do
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("answer mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("wrong method", func(t *testing.T) {
		r := s.Do("GET", ofrepFlags+"/checkout", nil)
		if r.Status != 405 || r.JSON(t)["errorDetails"] == nil {
			t.Errorf("GET = %d %s, want 405 with errorDetails", r.Status, r.Body)
		}
	})
}

var etagPattern = regexp.MustCompile(`^"[0-9a-f]{32}"$`)

// TestOFREPBulk pins the bulk endpoint's answers and errors.
func TestOFREPBulk(t *testing.T) {
	s := apitest.New(t, "", api.Options{})
	s.Seed()

	r := s.Must(200, "POST", ofrepFlags, ofrepBody("user-1"))
	if etag := r.Header.Get("ETag"); !etagPattern.MatchString(etag) {
		t.Errorf("ETag = %q, want a strong ETag of 32 hex digits", etag)
	}
	var got struct {
		Flags    []map[string]any `json:"flags"`
		Metadata map[string]any   `json:"metadata"`
	}
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, f := range got.Flags {
		keys = append(keys, f["key"].(string))
		e := s.Evaluate(f["key"].(string), "user-1")
		_, hasValue := f["value"]
		if (e.Bucket != "") != hasValue || (e.Bucket != "" && f["variant"] != e.Bucket) {
			t.Errorf("flag %v, want bucket %q", f, e.Bucket)
		}
	}
	if want := []string{"banner", "checkout", "dark-mode", "killed", "limit", "paused"}; !cmp.Equal(keys, want) {
		t.Errorf("flags %v, want %v", keys, want)
	}
	if snap, _ := got.Metadata["snapshot"].(string); `"`+snap+`"` != r.Header.Get("ETag") {
		t.Errorf("metadata.snapshot = %q, want the ETag's value %s", got.Metadata["snapshot"], r.Header.Get("ETag"))
	}

	t.Run("context.flags restricts", func(t *testing.T) {
		r := s.Must(200, "POST", ofrepFlags, `{"context":{"targetingKey":"user-1","flags":["dark-mode","nope"]}}`)
		var got struct{ Flags []map[string]any }
		if err := json.Unmarshal(r.Body, &got); err != nil {
			t.Fatal(err)
		}
		dark := s.Evaluate("dark-mode", "user-1")
		want := []map[string]any{
			{"key": "dark-mode", "value": dark.Bucket == "on", "variant": dark.Bucket, "reason": "SPLIT", "metadata": map[string]any{"version": 1.0}},
			{"key": "nope", "errorCode": "FLAG_NOT_FOUND", "errorDetails": `feature "nope" does not exist`},
		}
		if diff := cmp.Diff(want, got.Flags); diff != "" {
			t.Errorf("flags mismatch (-want +got):\n%s", diff)
		}
	})

	errorTests := []struct {
		name, body string
		status     int
		code       string
	}{
		{"malformed JSON", `{"context":{`, 400, "PARSE_ERROR"},
		{"no targeting key", `{"context":{}}`, 400, "TARGETING_KEY_MISSING"},
		{"context not an object", `{"context":[]}`, 400, "INVALID_CONTEXT"},
		{"flags not a list", `{"context":{"targetingKey":"u","flags":"dark-mode"}}`, 400, "INVALID_CONTEXT"},
		{"flags not strings", `{"context":{"targetingKey":"u","flags":[1]}}`, 400, "INVALID_CONTEXT"},
		{"too many flags", fmt.Sprintf(`{"context":{"targetingKey":"u","flags":[%s"x"]}}`, strings.Repeat(`"x",`, evaluation.MaxBulkFeatures)), 400, "INVALID_CONTEXT"},
	}
	for _, tt := range errorTests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.Do("POST", ofrepFlags, tt.body)
			got := r.JSON(t)
			if r.Status != tt.status || got["errorCode"] != tt.code || got["errorDetails"] == "" || len(got) != 2 {
				t.Errorf("= %d %s, want %d {errorCode: %s, errorDetails}", r.Status, r.Body, tt.status, tt.code)
			}
		})
	}
}

// TestOFREPBulkETag: the ETag changes exactly when a feature changes, and
// If-None-Match with the current one answers 304.
func TestOFREPBulkETag(t *testing.T) {
	s := apitest.New(t, "", api.Options{})
	s.Seed()
	bulk := func(user string, header ...string) apitest.Response {
		t.Helper()
		return s.Do("POST", ofrepFlags, ofrepBody(user), header...)
	}
	etag1 := bulk("user-1").Header.Get("ETag")

	for _, inm := range []string{etag1, `"other", ` + etag1, "W/" + etag1, "*"} {
		r := bulk("user-1", "If-None-Match", inm)
		if r.Status != 304 || len(r.Body) != 0 || r.Header.Get("ETag") != etag1 {
			t.Errorf("If-None-Match: %s = %d %q (ETag %s), want 304 with no body and ETag %s", inm, r.Status, r.Body, r.Header.Get("ETag"), etag1)
		}
	}
	if got := bulk("user-1").Header.Get("ETag"); got != etag1 {
		t.Errorf("ETag without a change = %s, then %s", etag1, got)
	}
	if r := bulk("user-1", "If-None-Match", `"stale"`); r.Status != 200 {
		t.Errorf("stale If-None-Match = %d, want 200", r.Status)
	}
	// The answer depends on the user and on context.flags, and so does the
	// ETag: another user's tag is not a match.
	etag2 := bulk("user-2").Header.Get("ETag")
	if etag2 == etag1 || bulk("user-2", "If-None-Match", etag1).Status != 200 {
		t.Errorf("user-2's ETag %s: want it to differ from user-1's %s, and user-1's to get 200", etag2, etag1)
	}
	restricted := s.Must(200, "POST", ofrepFlags, `{"context":{"targetingKey":"user-1","flags":["banner"]}}`).Header.Get("ETag")
	if restricted == etag1 {
		t.Errorf("ETag with context.flags = %s, the same as without", restricted)
	}

	// A dry run changes nothing; a change does.
	s.Must(200, "PATCH", "/api/features/banner?dry_run=true", map[string]any{"description": "x"})
	if r := bulk("user-1", "If-None-Match", etag1); r.Status != 304 {
		t.Errorf("after a dry run: %d, want 304", r.Status)
	}
	s.Must(200, "PATCH", "/api/features/banner", map[string]any{"description": "x"})
	r := bulk("user-1", "If-None-Match", etag1)
	etag3 := r.Header.Get("ETag")
	if r.Status != 200 || etag3 == etag1 || !etagPattern.MatchString(etag3) {
		t.Fatalf("after a change: %d with ETag %s, want 200 with a new ETag (was %s)", r.Status, etag3, etag1)
	}
	if r := bulk("user-1", "If-None-Match", etag3); r.Status != 304 {
		t.Errorf("new ETag: %d, want 304", r.Status)
	}

	// A feature deleted and created again the same is a new feature.
	s.Must(204, "DELETE", "/api/features/limit", nil)
	s.Must(204, "DELETE", "/api/features/limit?purge=true", nil)
	etag4 := bulk("user-1").Header.Get("ETag")
	s.Must(201, "POST", "/api/features", map[string]any{"key": "limit", "buckets": []any{
		map[string]any{"name": "low", "value": 10}, map[string]any{"name": "high", "value": 20}}})
	etag5 := bulk("user-1").Header.Get("ETag")
	if etag4 == etag3 || etag5 == etag4 || etag5 == etag3 {
		t.Errorf("ETags before delete %s, after %s, after creating again %s: want all different", etag3, etag4, etag5)
	}

	// The same features on the same database: the same ETag after a restart.
	again := apitest.New(t, s.DBPath, api.Options{})
	if got := again.Do("POST", ofrepFlags, ofrepBody("user-1")).Header.Get("ETag"); got != etag5 {
		t.Errorf("ETag after restart = %s, want %s", got, etag5)
	}
}
