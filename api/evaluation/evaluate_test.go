package evaluation

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollout/rollout/api/internal/jsonscan"
	"github.com/rollout/rollout/rollout/feature"
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
	m := newTestMetrics()
	for _, e := range tricky {
		t.Run(e.Feature, func(t *testing.T) {
			want := encodingJSON(t, JSONOf(e))
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
	m := newTestMetrics()
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

// referenceEvaluateRequest decodes body as package api's decoder
// (Options.Decode) does: exactly one JSON object, without unknown fields or
// repeated keys, into an evaluateRequest.
func referenceEvaluateRequest(body []byte) (evaluateRequest, error) {
	var req evaluateRequest
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '{' {
		return req, errors.New("the request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return req, errors.New("the request body must hold one JSON value and nothing after it")
	}
	if first, _, ok := jsonscan.RepeatedField(body, reflect.TypeOf(&req)); ok {
		return req, fmt.Errorf("key %q appears twice", first)
	}
	return req, nil
}

// testMetrics count evaluations in a registry of their own.
type testMetrics struct{ evaluations *prometheus.CounterVec }

func newTestMetrics() *testMetrics {
	return &testMetrics{prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rollout_evaluations_total"},
		[]string{"feature", "bucket", "reason"})}
}

func (m *testMetrics) Evaluations(feature, bucket, reason string) prometheus.Counter {
	return m.evaluations.WithLabelValues(feature, bucket, reason)
}

func (m *testMetrics) ForgetFeatures(keys []string) {
	for _, k := range keys {
		m.evaluations.DeletePartialMatch(prometheus.Labels{"feature": k})
	}
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
