package api

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// encodingJSON is what echo's Context.JSON writes for v.
func encodingJSON(t *testing.T, v any) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

var tricky = []feature.Evaluation{
	{Feature: "checkout", User: "user1", Bucket: "B", Value: json.RawMessage(`"B"`), Version: 1, Reason: feature.ReasonRing},
	{Feature: "killed", User: "user1", Version: 7, Reason: feature.ReasonDisabled},
	{Feature: "banner", User: "<script>&amp;</script>", Bucket: "red", Value: json.RawMessage(`{"color":"red","size":1}`), Version: 2, Reason: feature.ReasonOverride},
	{Feature: "spaces", User: "u", Bucket: "A", Value: json.RawMessage(`{ "a" : [1, 2] ,"b":"x y"}`), Version: 3, Reason: feature.ReasonRing},
	{Feature: "html", User: "u", Bucket: "A", Value: json.RawMessage(`"<b>&</b>"`), Version: 3, Reason: feature.ReasonRing},
	{Feature: "unicode", User: "zoë \u2028 \xff", Bucket: "A", Value: json.RawMessage(`"café \u2028 \" \\"`), Version: 4, Reason: feature.ReasonRing},
	{Feature: "escapes", User: "tab\there\n\"q\"\\", Bucket: "A", Value: json.RawMessage(`"a\"b\\"`), Version: 5, Reason: feature.ReasonRing},
	{Feature: "nil-value", User: "u", Bucket: "A", Version: 1, Reason: feature.ReasonRing},
}

func TestAppendEvaluationIsEncodingJSON(t *testing.T) {
	m := NewMetrics()
	for _, e := range tricky {
		t.Run(e.Feature, func(t *testing.T) {
			want := encodingJSON(t, evaluationJSON(e))
			if got := string(appendEvaluation(nil, e)) + "\n"; got != want {
				t.Errorf("appendEvaluation(%+v) = %s, want %s", e, got, want)
			}
			// The hot path's parts, around the user's JSON string.
			a := newAnswer(m, e)
			if got := string(a.appendTo(nil, appendJSONString(nil, e.User))) + "\n"; got != want {
				t.Errorf("answer of %+v = %s, want %s", e, got, want)
			}
		})
	}
}

func TestBulkAnswerIsEncodingJSON(t *testing.T) {
	m := NewMetrics()
	const user = "u<1>\u2028"
	// Entries come sorted by key, once each, as evaluateMany adds them.
	entries := map[string]result{
		"nope":   {key: "nope", err: &errorDetail{Code: feature.ENotFound, Message: `feature "nope" does not exist`}},
		"<nope>": {key: "<nope>", err: &errorDetail{Code: feature.ENotFound, Message: `feature "<nope>" does not exist`}},
	}
	for _, e := range tricky {
		entries[e.Feature] = result{key: e.Feature, a: newAnswer(m, e)}
	}
	var r results
	for _, k := range slices.Sorted(maps.Keys(entries)) {
		r.add(k, entries[k].a, entries[k].err)
	}
	u := appendJSONString(nil, user)
	got := string(append(append(r.appendJSON(append([]byte(nil), `{"results":`...), u), `,"user":`...), append(u, "}\n"...)...))
	want := encodingJSON(t, map[string]any{"user": user, "results": r.json(user)})
	if got != want {
		t.Errorf("bulk answer = %s, want %s", got, want)
	}
}

// referenceEvaluateRequest decodes body as decode does.
func referenceEvaluateRequest(body []byte) (evaluateRequest, error) {
	c := echo.New().NewContext(httptest.NewRequest("POST", "/evaluate", bytes.NewReader(body)), httptest.NewRecorder())
	var req evaluateRequest
	err := decode(c, &req)
	return req, err
}

var evaluateBodies = []string{
	`{"user":"u","features":["a","b"]}`,
	` { "features" : [ "a" , "b" ] , "user" : "u" } `,
	`{"user":"u"}`,
	`{"user":"u","features":null}`,
	`{"user":"u","features":[]}`,
	`{"user":"u","features":["a"],"features":["b","c"]}`,
	`{"user":"u","features":["a"],"features":null}`,
	`{"user":"u","user":"v"}`,
	`{"user":"\u0075\n","features":["\"x\"","é","\ud800"]}`,
	`{"us\u0065r":"u"}`,
	`{"User":"u"}`,
	`{"user":"u","other":1}`,
	`{"user":1}`,
	`{"user":null}`,
	`{"user":"u","features":[1]}`,
	`{"user":"u","features":"a"}`,
	`{"user":"u"} {}`,
	`[]`,
	``,
	`{"user":"u"`,
	"{\"user\":\"\xff\"}",
	`{"user":"u","context":{"plan":"pro","seats":12,"beta":true,"groups":["a","b"],"o":{"x":1},"n":null,"mixed":["a",1]}}`,
	`{"context":null,"user":"u","features":["a"]}`,
	`{"user":"u","context":{"plan":"pro","plan":"free"}}`,
	`{"user":"u","context":{"big":1e400}}`,
	`{"user":"u","context":{"pl\u0061n":"pr\u006f"}}`,
	`{"user":"u","context":[]}`,
	`{"user":"u","context":{},"context":{}}`,
}

func FuzzParseEvaluateRequest(f *testing.F) {
	for _, b := range evaluateBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, ok := parseEvaluateRequest(body)
		want, err := referenceEvaluateRequest(body)
		if !ok {
			return // decode reads it
		}
		// The context is read by readContext, which refuses what
		// feature.ContextFromJSON refuses, and more (strings that are not
		// UTF-8, as OFREP).
		var ctx feature.Context
		details := ""
		if got.contextJSON != nil {
			ctx, details = readContext(got.contextJSON, got.text, nil)
		}
		if err != nil {
			if details == "" {
				t.Fatalf("parseEvaluateRequest(%q) accepted what decode refuses: %v", body, err)
			}
			return
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(evaluateRequest{}), cmpopts.IgnoreFields(evaluateRequest{}, "Context")); diff != "" {
			t.Errorf("parseEvaluateRequest(%q) differs from decode (-want +got):\n%s", body, diff)
		}
		if got.contextJSON == nil {
			if want.Context != nil {
				t.Errorf("parseEvaluateRequest(%q) has no context, decode %v", body, want.Context)
			}
			return
		}
		if details == "" {
			wantCtx, err := feature.ContextFromJSON(want.Context)
			if err != nil {
				t.Fatalf("readContext of %q accepted what ContextFromJSON refuses: %v", body, err)
			}
			if diff := cmp.Diff(wantCtx, ctx, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("readContext of %q differs from ContextFromJSON (-want +got):\n%s", body, diff)
			}
		}
	})
}

func FuzzEvaluateQuery(f *testing.F) {
	for _, q := range []string{
		"feature=f&user=u", "user=u&feature=f&pretty", "feature=a&feature=b&user=%75+x", "user=u%zz&user=v",
		"%66eature=f&user=a%40b.c", "feature=f;user=u", "&&feature=&user=u&pretty=0", "=x&feature", "",
	} {
		f.Add(q)
	}
	e := echo.New()
	f.Fuzz(func(t *testing.T, raw string) {
		r := httptest.NewRequest("GET", "/evaluate", nil)
		r.URL.RawQuery = raw
		feature, user, pretty := evaluateQuery(e.NewContext(r, nil))
		q, _ := url.ParseQuery(raw)
		_, wantPretty := q["pretty"]
		if feature != q.Get("feature") || user != q.Get("user") || pretty != wantPretty {
			t.Errorf("evaluateQuery(%q) = %q, %q, %v, want %q, %q, %v", raw, feature, user, pretty, q.Get("feature"), q.Get("user"), wantPretty)
		}
	})
}

// TestEvaluateAnswersAreEncodingJSON: through the router, every answer of
// /evaluate is byte for byte what encoding/json writes, which ?pretty still
// uses: compacted, the pretty answer is the plain one.
func TestEvaluateAnswersAreEncodingJSON(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw := func(v string) json.RawMessage { return json.RawMessage(v) }
	for _, f := range []feature.Feature{
		{Key: "html", Enabled: true, Salt: "html", Overrides: map[string]string{"<vip>": "b"},
			Buckets: []feature.Bucket{{Name: "a", Replicas: 50, Value: raw(`"<b>a & b</b>"`)}, {Name: "b", Replicas: 50, Value: raw(`{"text": "x y", "n": [1, 2]}`)}}},
		{Key: "unicode", Enabled: true, Salt: "", Buckets: []feature.Bucket{{Name: "a", Replicas: 10, Value: raw(`"café \u2028"`)}, {Name: "b", Replicas: 10}}},
		{Key: "killed", Enabled: false, Salt: "killed", Buckets: []feature.Bucket{{Name: "a", Replicas: 10}}},
		{Key: "paused", Enabled: false, Salt: "paused", Fallback: "a", Buckets: []feature.Bucket{{Name: "a", Replicas: 10, Value: raw(`true`)}}},
	} {
		if _, err := svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e := New(svc, Options{})
	serve := func(method, target, body string) string {
		t.Helper()
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest(method, target, strings.NewReader(body)))
		if w.Code != http.StatusOK {
			t.Fatalf("%s %s %s = %d %s, want 200", method, target, body, w.Code, w.Body)
		}
		return w.Body.String()
	}
	users := []string{"u1", "<vip>", "a&b", "zoë", "x\u2028y", "tab\tq\"uote"}
	for _, key := range []string{"html", "unicode", "killed", "paused"} {
		for _, u := range users {
			target := "/evaluate?" + url.Values{"feature": {key}, "user": {u}}.Encode()
			plain, pretty := serve("GET", target, ""), serve("GET", target+"&pretty", "")
			var compact bytes.Buffer
			if err := json.Compact(&compact, []byte(pretty)); err != nil {
				t.Fatal(err)
			}
			if got, want := plain, compact.String()+"\n"; got != want {
				t.Errorf("GET %s = %s, want %s", target, got, want)
			}
		}
	}
	for _, body := range []string{
		`{"user":"u1"}`,
		`{"user":"<vip>","features":["unicode","html","nope","<nope>","html","killed","paused"]}`,
		`{"features":["html"],"user":"a\u0026b"}`,
		`{"user":"u1","features":[]}`,
	} {
		plain, pretty := serve("POST", "/evaluate", body), serve("POST", "/evaluate?pretty", body)
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(pretty)); err != nil {
			t.Fatal(err)
		}
		if got, want := plain, compact.String()+"\n"; got != want {
			t.Errorf("POST /evaluate %s = %s, want %s", body, got, want)
		}
	}
}

// TestNewRequestID: IDs from many batches are all different, 26 characters
// of the base32 alphabet, each a header value no append can write into
// another's.
func TestNewRequestID(t *testing.T) {
	seen := map[string]bool{}
	for range 10_000 {
		v := newRequestID()
		if len(v) != 1 || cap(v) != 1 {
			t.Fatalf("value %q has len %d, cap %d; want 1, 1", v, len(v), cap(v))
		}
		id := v[0]
		if len(id) != 26 || strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != "" {
			t.Fatalf("ID %q: want 26 characters of the base32 alphabet", id)
		}
		if seen[id] {
			t.Fatalf("ID %q handed out twice", id)
		}
		seen[id] = true
	}
}
