package api_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/feature"
)

// contractRules is the body of the contract, verbatim.
const contractRules = `{"rules":[{"name":"staff","conditions":[{"attribute":"email","op":"ends_with",
  "value":"@example.com"}],"serve":{"bucket":"on"}}, {"name":"rest-de","conditions":[{"attribute":"country",
  "op":"in","value":["DE","AT"]}],"serve":{"ring":true}}]}`

func newRulesServer(t *testing.T) *testServer {
	s := newServer(t, "", api.Options{})
	s.create(feature.Feature{Key: "checkout", Enabled: true, Salt: "checkout",
		Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}})
	return s
}

func TestRulesAPI(t *testing.T) {
	s := newRulesServer(t)
	got := s.must(http.StatusOK, "GET", "/api/features/checkout", nil)
	if !strings.Contains(string(got.body), `"rules":[]`) || !strings.Contains(string(got.body), `"bucket_by":""`) {
		t.Errorf("a feature without rules: %s, want rules [] and bucket_by \"\"", got.body)
	}
	etag := got.header.Get("ETag")

	// A dry run changes nothing.
	s.must(http.StatusOK, "PUT", "/api/features/checkout/rules?dry_run=true", contractRules)
	if f, _ := s.svc.Snapshot().Feature("checkout"); f.Version != 1 || len(f.Rules) != 0 {
		t.Fatalf("after a dry run: version %d, %d rules", f.Version, len(f.Rules))
	}
	res := s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", contractRules, "If-Match", etag).json(t)
	changed := res["feature"].(map[string]any)
	if rules := changed["rules"].([]any); len(rules) != 2 || changed["version"].(float64) != 2 {
		t.Fatalf("after PUT: %v", changed)
	}
	// The old ETag no longer matches.
	if r := s.do("PUT", "/api/features/checkout/rules", `{"rules":[]}`, "If-Match", etag); r.status != http.StatusPreconditionFailed {
		t.Errorf("PUT with a stale If-Match = %d %s, want 412", r.status, r.body)
	}
	vs := s.must(http.StatusOK, "GET", "/api/features/checkout/versions", nil).json(t)
	summary := vs["versions"].([]any)[0].(map[string]any)["summary"].(string)
	if want := "set rules: staff: if email ends with \"@example.com\" → serve on; rest-de: if country is one of [DE,AT] → serve ring"; summary != want {
		t.Errorf("summary %q, want %q", summary, want)
	}

	// The evaluation paths see the rules.
	e := s.must(http.StatusOK, "GET", "/evaluate?feature=checkout&user=u1&ctx.email=ann@example.com", nil).json(t)
	if e["bucket"] != "on" || e["reason"] != feature.ReasonTargetingMatch || e["rule"] != "staff" {
		t.Errorf("GET with ctx.email: %v", e)
	}
	e = s.must(http.StatusOK, "POST", "/evaluate", `{"user":"u1","context":{"email":"ann@example.com"}}`).json(t)
	if r := e["results"].(map[string]any)["checkout"].(map[string]any); r["bucket"] != "on" || r["rule"] != "staff" {
		t.Errorf("POST with context: %v", e)
	}
	o := s.must(http.StatusOK, "POST", "/ofrep/v1/evaluate/flags/checkout", `{"context":{"targetingKey":"u1","email":"ann@example.com"}}`).json(t)
	if o["variant"] != "on" || o["reason"] != "TARGETING_MATCH" || o["metadata"].(map[string]any)["rule"] != "staff" {
		t.Errorf("OFREP with context: %v", o)
	}

	// bucket_by.
	if f := s.must(http.StatusOK, "PATCH", "/api/features/checkout", `{"bucket_by":"org"}`).json(t)["feature"].(map[string]any); f["bucket_by"] != "org" {
		t.Errorf("PATCH bucket_by: %v", f)
	}
	o = s.must(http.StatusOK, "POST", "/ofrep/v1/evaluate/flags/checkout", `{"context":{"targetingKey":"u1"}}`).json(t)
	if o["reason"] != "DEFAULT" || o["variant"] != nil {
		t.Errorf("OFREP without org: %v, want DEFAULT without a variant", o)
	}
	first := s.must(http.StatusOK, "GET", "/evaluate?feature=checkout&user=u0&ctx.org=acme", nil).json(t)["bucket"]
	for i := range 20 {
		b := s.must(http.StatusOK, "GET", fmt.Sprintf("/evaluate?feature=checkout&user=u%d&ctx.org=acme", i), nil).json(t)["bucket"]
		if b != first {
			t.Fatalf("org acme: user u%d in %v, u0 in %v", i, b, first)
		}
	}
	s.must(http.StatusOK, "PATCH", "/api/features/checkout", `{"bucket_by":"","description":"by user again"}`)

	// The preview of a rule change says who moves, and stores nothing.
	p := s.must(http.StatusOK, "POST", "/api/features/checkout/preview",
		`{"rules":[{"name":"ent","conditions":[{"attribute":"plan","op":"eq","value":"enterprise"}],"serve":{"bucket":"on"}}]}`).json(t)
	texts := []string{}
	for _, r := range p["rules"].([]any) {
		texts = append(texts, r.(map[string]any)["text"].(string))
	}
	want := []string{"users matching plan = enterprise: what the rules before the change served them (or the ring) → on",
		`users matching email ends with "@example.com": on → the next matching rule, or the ring`,
		"users matching country is one of [DE,AT]: ring → the next matching rule, or the ring"}
	if strings.Join(texts, "\n") != strings.Join(want, "\n") {
		t.Errorf("preview:\n%s\nwant\n%s", strings.Join(texts, "\n"), strings.Join(want, "\n"))
	}
	if f, _ := s.svc.Snapshot().Feature("checkout"); len(f.Rules) != 2 {
		t.Errorf("the preview changed the rules: %v", f.Rules)
	}
	// {"rules":[]} removes them.
	s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", `{"rules":[]}`)
	if got := s.must(http.StatusOK, "GET", "/api/features/checkout", nil); !strings.Contains(string(got.body), `"rules":[]`) {
		t.Errorf("after removing the rules: %s", got.body)
	}
}

func TestRulesAbuse(t *testing.T) {
	s := newRulesServer(t)
	rule := func(conds string) string {
		return `{"rules":[{"name":"r","conditions":[` + conds + `],"serve":{"bucket":"on"}}]}`
	}
	many := strings.Repeat(`{"attribute":"a","op":"eq","value":"x"},`, 10_000)
	many = many[:len(many)-1]
	list := make([]string, 0, 100_000)
	for i, n := 0, 0; n < 900_000; i++ {
		list = append(list, fmt.Sprintf("user-%07d", i))
		n += len(list[i]) + 3
	}
	bigList := `{"attribute":"user","op":"in","value":["` + strings.Join(list, `","`) + `"]}`
	deep := strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000)
	cases := map[string]struct {
		body string
		want int
	}{
		"unknown operator":  {rule(`{"attribute":"a","op":"like","value":"x"}`), 422},
		"invalid regexp":    {rule(`{"attribute":"a","op":"matches","value":"(a"}`), 422},
		"long regexp":       {rule(`{"attribute":"a","op":"matches","value":"` + strings.Repeat("a*", 200) + `"}`), 422},
		"10,000 conditions": {rule(many), 422},
		"a list of 900 KB":  {rule(bigList), 422},
		"deep JSON":         {rule(`{"attribute":"a","op":"eq","value":` + deep + `}`), 400},
		"deep in a rule":    {`{"rules":` + deep + `}`, 400},
		"over 1 MB":         {rule(strings.Replace(bigList, `"]}`, strings.Repeat("x", 200_000)+`"]}`, 1)), 413},
		"not a list":        {`{"rules":{"name":"r"}}`, 400},
		"no rules":          {`{}`, 400},
		"unknown field":     {`{"rules":[],"extra":1}`, 400},
		"unknown bucket":    {`{"rules":[{"name":"r","conditions":[],"serve":{"bucket":"maybe"}}]}`, 422},
		"bad semver":        {rule(`{"attribute":"v","op":"semver_gt","value":"four"}`), 422},
		"bad date":          {rule(`{"attribute":"d","op":"after","value":"tomorrow"}`), 422},
		"unknown segment":   {rule(`{"op":"in_segment","value":"nobody"}`), 422},
	}
	for name, tc := range cases {
		r := s.do("PUT", "/api/features/checkout/rules", tc.body)
		if r.status != tc.want || !strings.HasPrefix(string(r.body), "{") {
			t.Errorf("%s: %d %.200s, want %d with a JSON error", name, r.status, r.body, tc.want)
		}
		if r := s.do("POST", "/api/features/checkout/preview", tc.body); r.status != tc.want {
			t.Errorf("preview %s: %d %.200s, want %d", name, r.status, r.body, tc.want)
		}
	}
	if f, _ := s.svc.Snapshot().Feature("checkout"); f.Version != 1 || len(f.Rules) != 0 {
		t.Errorf("after refused changes: version %d, rules %v", f.Version, f.Rules)
	}
	for bad, want := range map[string]int{`{"bucket_by":"not valid!"}`: 422, `{"bucket_by":7}`: 400} {
		if r := s.do("PATCH", "/api/features/checkout", bad); r.status != want {
			t.Errorf("PATCH %s = %d %s, want %d", bad, r.status, r.body, want)
		}
	}
	// Contexts beyond the limits.
	q := url.Values{"feature": {"checkout"}, "user": {"u"}}
	for i := range feature.MaxContextAttrs + 1 {
		q.Set(fmt.Sprint("ctx.a", i), "x")
	}
	if r := s.do("GET", "/evaluate?"+q.Encode(), nil); r.status != http.StatusUnprocessableEntity {
		t.Errorf("GET with %d attributes = %d %s, want 422", feature.MaxContextAttrs+1, r.status, r.body)
	}
	long := strings.Repeat("x", feature.MaxContextValueLen+1)
	if r := s.do("POST", "/evaluate", `{"user":"u","context":{"a":"`+long+`"}}`); r.status != http.StatusUnprocessableEntity {
		t.Errorf("POST with a long attribute = %d %s, want 422", r.status, r.body)
	}
	// OFREP reads the context only for features that use it: give the
	// feature a rule.
	s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", rule(`{"attribute":"a","op":"eq","value":"x"}`))
	if r := s.do("POST", "/ofrep/v1/evaluate/flags/checkout", `{"context":{"targetingKey":"u","a":"`+long+`"}}`); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "INVALID_CONTEXT") {
		t.Errorf("OFREP with a long attribute = %d %s, want 400 INVALID_CONTEXT", r.status, r.body)
	}
	// Deeper than encoding/json reads, within an evaluation's body.
	deepContext := strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000)
	if r := s.do("POST", "/evaluate", `{"user":"u","context":{"a":`+deepContext+`}}`); r.status != http.StatusBadRequest {
		t.Errorf("POST with a deep context = %d %.200s, want 400", r.status, r.body)
	}
	if r := s.do("POST", "/evaluate", `{"user":"u","context":{"a":`+deep+`}}`); r.status != http.StatusRequestEntityTooLarge {
		t.Errorf("POST with a context of %d bytes = %d %.200s, want 413", len(deep), r.status, r.body)
	}
}

// TestEvaluationPathsAgree evaluates random contexts through GET
// /evaluate, POST /evaluate and OFREP, and compares each with the
// service's own evaluation.
func TestEvaluationPathsAgree(t *testing.T) {
	s := newRulesServer(t)
	s.must(http.StatusOK, "POST", "/api/features/checkout/buckets", `{"name":"beta","replicas":50}`)
	s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", `{"rules":[
	  {"name":"staff","conditions":[{"attribute":"email","op":"ends_with","value":"@example.com"},{"attribute":"plan","op":"neq","value":"free"}],"serve":{"bucket":"beta"}},
	  {"name":"big","conditions":[{"attribute":"seats","op":"gte","value":50}],"serve":{"bucket":"on"}},
	  {"name":"new-app","conditions":[{"attribute":"version","op":"semver_gte","value":"4.2.0"}],"serve":{"ring":true,"bucket_by":"org"}},
	  {"name":"de","conditions":[{"attribute":"country","op":"in","value":["DE","AT"]},{"attribute":"email","op":"matches","value":"^[a-m]"}],"serve":{"bucket":"off"}},
	  {"name":"old","conditions":[{"attribute":"signup","op":"before","value":"2020-01-01T00:00:00Z"}],"serve":{"bucket":"on"}}]}`)
	rng := rand.New(rand.NewPCG(1, 22))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	for i := range 300 {
		user := fmt.Sprintf("user-%d", rng.IntN(1000))
		ctx := map[string]string{}
		maybe := func(name string, v string) {
			if rng.IntN(3) > 0 {
				ctx[name] = v
			}
		}
		maybe("email", pick("ann@example.com", "bob@example.org", "zoe@example.com", "kim@x.de"))
		maybe("plan", pick("free", "pro", "enterprise"))
		maybe("seats", fmt.Sprint(rng.IntN(100)))
		maybe("version", pick("4.1.9", "4.2.0", "4.10.1", "5.0.0-rc.1", "garbage"))
		maybe("org", pick("acme", "globex", "initech"))
		maybe("country", pick("DE", "AT", "FR"))
		maybe("signup", pick("2019-05-01T00:00:00Z", "2023-05-01T00:00:00Z", "not a date"))

		// The domain, with the attributes as strings, as a query gives them.
		want := feature.Context{}
		for k, v := range ctx {
			want[k] = v
		}
		e, err := s.svc.Snapshot().PeekContext("checkout", user, want)
		if err != nil {
			t.Fatal(err)
		}
		q := url.Values{"feature": {"checkout"}, "user": {user}}
		for k, v := range ctx {
			q.Set("ctx."+k, v)
		}
		get := s.must(http.StatusOK, "GET", "/evaluate?"+q.Encode(), nil).json(t)
		body, _ := json.Marshal(map[string]any{"user": user, "context": ctx, "features": []string{"checkout"}})
		post := s.must(http.StatusOK, "POST", "/evaluate", string(body)).json(t)["results"].(map[string]any)["checkout"].(map[string]any)
		octx := map[string]any{"targetingKey": user}
		for k, v := range ctx {
			octx[k] = v
		}
		body, _ = json.Marshal(map[string]any{"context": octx})
		ofrep := s.must(http.StatusOK, "POST", "/ofrep/v1/evaluate/flags/checkout", string(body)).json(t)
		bucket := func(v any) string { s, _ := v.(string); return s }
		rule := func(v any) string { s, _ := v.(string); return s }
		var meta map[string]any
		meta, _ = ofrep["metadata"].(map[string]any)
		if bucket(get["bucket"]) != e.Bucket || bucket(post["bucket"]) != e.Bucket || bucket(ofrep["variant"]) != e.Bucket ||
			get["reason"] != e.Reason || post["reason"] != e.Reason || rule(get["rule"]) != e.Rule || rule(post["rule"]) != e.Rule || rule(meta["rule"]) != e.Rule {
			t.Fatalf("case %d, user %s, context %v: domain %s by %s %s; GET %v; POST %v; OFREP %v", i, user, ctx, e.Bucket, e.Reason, e.Rule, get, post, ofrep)
		}
		// Numbers typed as numbers agree with their text, through POST
		// and OFREP too.
		if n, ok := ctx["seats"]; ok {
			var typed float64
			fmt.Sscan(n, &typed)
			want["seats"] = typed
			e2, _ := s.svc.Snapshot().PeekContext("checkout", user, want)
			if e2.Bucket != e.Bucket || e2.Rule != e.Rule {
				t.Fatalf("seats %s as a number: %s by %s, as text %s by %s", n, e2.Bucket, e2.Rule, e.Bucket, e.Rule)
			}
			typedCtx := map[string]any{"seats": typed}
			for k, v := range ctx {
				if k != "seats" {
					typedCtx[k] = v
				}
			}
			body, _ := json.Marshal(map[string]any{"user": user, "context": typedCtx, "features": []string{"checkout"}})
			post := s.must(http.StatusOK, "POST", "/evaluate", string(body)).json(t)["results"].(map[string]any)["checkout"].(map[string]any)
			typedCtx["targetingKey"] = user
			body, _ = json.Marshal(map[string]any{"context": typedCtx})
			ofrep := s.must(http.StatusOK, "POST", "/ofrep/v1/evaluate/flags/checkout", string(body)).json(t)
			if bucket(post["bucket"]) != e.Bucket || bucket(ofrep["variant"]) != e.Bucket || rule(post["rule"]) != e.Rule {
				t.Fatalf("case %d, seats as a number %v: POST %v, OFREP %v; want %s by %s", i, typed, post, ofrep, e.Bucket, e.Rule)
			}
		}
	}
}

// TestOFREPStaticWithoutTargetingKey: a flag whose answer cannot depend
// on the user answers STATIC (or DISABLED) without a targeting key; the
// others still need one.
func TestOFREPStaticWithoutTargetingKey(t *testing.T) {
	s := newRulesServer(t)
	s.create(feature.Feature{Key: "one", Enabled: true, Salt: "one", Buckets: []feature.Bucket{{Name: "on", Replicas: 10}, {Name: "off", Replicas: 0}}})
	s.create(feature.Feature{Key: "off", Enabled: false, Salt: "off", Fallback: "b", Buckets: []feature.Bucket{{Name: "a", Replicas: 1}, {Name: "b", Replicas: 1}}})
	for _, body := range []string{``, `{}`, `{"context":{}}`, `{"context":{"plan":"pro"}}`} {
		o := s.must(http.StatusOK, "POST", "/ofrep/v1/evaluate/flags/one", body).json(t)
		if o["variant"] != "on" || o["reason"] != "STATIC" {
			t.Errorf("one with %q: %v, want on, STATIC", body, o)
		}
		if o := s.must(http.StatusOK, "POST", "/ofrep/v1/evaluate/flags/off", body).json(t); o["variant"] != "b" || o["reason"] != "DISABLED" {
			t.Errorf("off with %q: %v, want b, DISABLED", body, o)
		}
		if r := s.do("POST", "/ofrep/v1/evaluate/flags/checkout", body); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "TARGETING_KEY_MISSING") {
			t.Errorf("checkout with %q = %d %s, want 400 TARGETING_KEY_MISSING", body, r.status, r.body)
		}
	}
	if o := s.must(http.StatusOK, "POST", "/ofrep/v1/evaluate/flags/one", `{"context":{"targetingKey":"u"}}`).json(t); o["reason"] != "STATIC" {
		t.Errorf("one with a key: %v", o)
	}
	// A rule makes it depend on the context, not on the user: it still
	// answers without a key, as OpenFeature's evaluation suite expects,
	// with the ring's one bucket as its DEFAULT and the rule's otherwise.
	s.must(http.StatusOK, "PUT", "/api/features/one/rules", `{"rules":[{"name":"r","conditions":[{"attribute":"plan","op":"eq","value":"x"}],"serve":{"bucket":"off"}}]}`)
	if o := s.must(http.StatusOK, "POST", "/ofrep/v1/evaluate/flags/one", `{}`).json(t); o["variant"] != "on" || o["reason"] != "DEFAULT" {
		t.Errorf("one with a rule, without a key: %v, want on, DEFAULT", o)
	}
	if o := s.must(http.StatusOK, "POST", "/ofrep/v1/evaluate/flags/one", `{"context":{"plan":"x"}}`).json(t); o["variant"] != "off" || o["reason"] != "TARGETING_MATCH" {
		t.Errorf("one with a rule, without a key, matching it: %v, want off, TARGETING_MATCH", o)
	}
	if o := s.must(http.StatusOK, "POST", "/ofrep/v1/evaluate/flags/one", `{"context":{"targetingKey":"u"}}`).json(t); o["variant"] != "on" || o["reason"] != "DEFAULT" {
		t.Errorf("one with a rule and a key: %v, want on, DEFAULT", o)
	}
}

// TestContextNeverLogged: with every request logged, and evaluations that
// fail, a context's attributes appear in no log line, and nothing of them
// is stored.
func TestContextNeverLogged(t *testing.T) {
	var logs strings.Builder
	var mu sync.Mutex
	s := newServer(t, "", api.Options{RequestLog: api.LogAll, SampleEvaluations: 1,
		Logger: slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logs.Write(p)
		}), nil))})
	s.create(feature.Feature{Key: "checkout", Enabled: true, Salt: "checkout",
		Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}},
		Rules:   []feature.Rule{{Name: "r", Conditions: []feature.Condition{{Attribute: "email", Op: "ends_with", Value: json.RawMessage(`"@example.com"`)}}, Serve: feature.Serve{Bucket: "on"}}}})
	const secret = "s3cret-attribute-value"
	s.must(http.StatusOK, "GET", "/evaluate?feature=checkout&user=u1&ctx.email="+secret, nil)
	s.must(http.StatusOK, "POST", "/evaluate", `{"user":"u1","context":{"email":"`+secret+`"}}`)
	s.must(http.StatusOK, "POST", "/ofrep/v1/evaluate/flags/checkout", `{"context":{"targetingKey":"u1","email":"`+secret+`"}}`)
	s.do("GET", "/evaluate?feature=nope&user=u1&ctx.email="+secret, nil)
	s.do("POST", "/evaluate", `{"user":"u1","context":{"email":"`+secret+strings.Repeat("x", feature.MaxContextValueLen)+`"}}`)
	s.do("POST", "/ofrep/v1/evaluate/flags/checkout", `{"context":{"targetingKey":"u1","email":"`+secret+strings.Repeat("x", feature.MaxContextValueLen)+`"}}`)
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "/evaluate") {
		t.Fatalf("nothing was logged: %q", logs.String())
	}
	if strings.Contains(logs.String(), secret) {
		t.Errorf("a context attribute was logged:\n%s", logs.String())
	}
	data, err := os.ReadFile(s.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(s.dbPath + "-wal")
	if strings.Contains(string(data)+string(wal), secret) {
		t.Errorf("a context attribute was stored in the database")
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestValidationErrorField: what the domain refuses is a 422 invalid on
// every route, targeting's included, whose error names the field of the
// body as "field" and at the start of its message; a document with the
// same mistake says the same, its field and message within the feature's
// or segment's place in the document.
func TestValidationErrorField(t *testing.T) {
	s := newRulesServer(t)
	s.must(http.StatusCreated, "POST", "/api/segments", `{"key":"staff","conditions":[]}`)
	rules := `[{"name":"ok","conditions":[],"serve":{"bucket":"off"}},{"name":"staff","conditions":[{"attribute":"plan","op":"eq","value":"pro"},{"attribute":"seats","op":"gt","value":"ten"}],"serve":{"bucket":"on"}}]`
	buckets := `[{"name":"off","replicas":100},{"name":"o n","replicas":100}]`
	segment := `[{"attribute":"plan","op":"eq","value":"pro"},{"attribute":"v","op":"semver_gt","value":"four"}]`
	doc := func(f, segs string) string {
		return `{"features":[{"key":"a","buckets":[{"name":"on","share":1}]},{"key":"b","buckets":[{"name":"on","share":1}]},` + f + `],"segments":[` + segs + `]}`
	}
	type apiError struct {
		Code, Message, Field string
	}
	errorOf := func(t *testing.T, r response) apiError {
		t.Helper()
		var body struct{ Error apiError }
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatalf("%s: not a JSON error", r.body)
		}
		return body.Error
	}
	tests := []struct {
		name, method, path, body string
		field                    string
		doc                      string // the same mistake in a document
		docField                 string
	}{
		{"rules", "PUT", "/api/features/checkout/rules", `{"rules":` + rules + `}`, "rules[1].conditions[1].value",
			doc(`{"key":"checkout","buckets":[{"name":"off","share":0.5},{"name":"on","share":0.5}],"rules":`+rules+`}`, ``), "features[2].rules[1].conditions[1].value"},
		{"rules preview", "POST", "/api/features/checkout/preview", `{"rules":` + rules + `}`, "rules[1].conditions[1].value", "", ""},
		{"create", "POST", "/api/features", `{"key":"new","buckets":` + buckets + `}`, "buckets[1].name",
			doc(`{"key":"new","buckets":`+buckets+`}`, ``), "features[2].buckets[1].name"},
		{"overrides", "PUT", "/api/features/checkout/overrides/u1", `{"bucket":"maybe"}`, "", "", ""},
		{"bucket_by", "PATCH", "/api/features/checkout", `{"bucket_by":"not valid!"}`, "bucket_by",
			doc(`{"key":"checkout","buckets":[{"name":"off","share":0.5},{"name":"on","share":0.5}],"bucket_by":"not valid!"}`, ``), "features[2].bucket_by"},
		{"segment", "PUT", "/api/segments/staff", `{"description":"","conditions":` + segment + `}`, "conditions[1].value",
			doc(`{"key":"c","buckets":[{"name":"on","share":1}]}`, `{"key":"beta","conditions":[]},{"key":"staff","conditions":`+segment+`}`), "segments[1].conditions[1].value"},
		{"context", "GET", "/evaluate?feature=checkout&user=u1&" + strings.Repeat("ctx.a=x&", feature.MaxContextList+1), "", "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body any
			if tt.body != "" {
				body = tt.body
			}
			r := s.do(tt.method, tt.path, body)
			e := errorOf(t, r)
			if r.status != http.StatusUnprocessableEntity || e.Code != feature.EInvalid {
				t.Fatalf("%s %s = %d %s, want 422 invalid", tt.method, tt.path, r.status, r.body)
			}
			if e.Field != tt.field || !strings.HasPrefix(e.Message, tt.field) {
				t.Errorf("%s %s: field %q, message %q; want field %q, which the message starts with", tt.method, tt.path, e.Field, e.Message, tt.field)
			}
			if tt.doc == "" {
				return
			}
			for _, path := range []string{"/api/plan", "/api/apply"} {
				body := any(tt.doc)
				if path == "/api/apply" {
					body = `{"document":` + tt.doc + `}`
				}
				r := s.do("POST", path, body)
				d := errorOf(t, r)
				if r.status != http.StatusUnprocessableEntity || d.Field != tt.docField {
					t.Errorf("POST %s = %d %s, want 422 at %q", path, r.status, r.body, tt.docField)
				}
				if want := strings.TrimSuffix(tt.docField, tt.field) + e.Message; d.Message != want {
					t.Errorf("POST %s says %q, want what %s %s says at its place: %q", path, d.Message, tt.method, tt.path, want)
				}
			}
		})
	}
	if f, _ := s.svc.Snapshot().Feature("checkout"); f.Version != 1 {
		t.Errorf("after refused changes checkout is at version %d, want 1", f.Version)
	}
}

// TestContextErrorsSaidOnce: a context the domain refuses is refused with
// feature.ValidateContext's words on every evaluation route: the query's
// context, a body's and OFREP's (in its own shape, INVALID_CONTEXT).
func TestContextErrorsSaidOnce(t *testing.T) {
	s := newRulesServer(t)
	// OFREP reads the context only for features that use it.
	s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", `{"rules":[{"name":"r","conditions":[{"attribute":"a","op":"eq","value":"x"}],"serve":{"bucket":"on"}}]}`)
	long := strings.Repeat("x", feature.MaxContextValueLen+1)
	many := map[string]any{}
	q := url.Values{"feature": {"checkout"}, "user": {"u1"}}
	for i := range feature.MaxContextAttrs + 1 {
		many[fmt.Sprint("a", i)] = "x"
		q.Set(fmt.Sprint("ctx.a", i), "x")
	}
	list := make([]string, feature.MaxContextList+1)
	for _, tt := range []struct {
		name  string
		ctx   feature.Context
		query url.Values
		body  map[string]any
	}{
		{"a long string", feature.Context{"a": long}, url.Values{"feature": {"checkout"}, "user": {"u1"}, "ctx.a": {long}}, map[string]any{"a": long}},
		{"a long list", feature.Context{"a": list}, url.Values{"feature": {"checkout"}, "user": {"u1"}, "ctx.a": list}, map[string]any{"a": list}},
		{"too many attributes", feature.Context(many), q, many},
	} {
		t.Run(tt.name, func(t *testing.T) {
			want := feature.ErrorMessage(feature.ValidateContext(tt.ctx))
			if want == "" {
				t.Fatalf("ValidateContext(%s) accepts it", tt.name)
			}
			withKey := map[string]any{"targetingKey": "u1"}
			maps.Copy(withKey, tt.body)
			for _, r := range []struct {
				method, path string
				body         any
				status       int
				field        string
			}{
				{"GET", "/evaluate?" + tt.query.Encode(), nil, http.StatusUnprocessableEntity, "message"},
				{"POST", "/evaluate", map[string]any{"user": "u1", "context": tt.body}, http.StatusUnprocessableEntity, "message"},
				{"POST", "/evaluate", map[string]any{"user": "u1", "features": []string{"checkout"}, "context": tt.body}, http.StatusUnprocessableEntity, "message"},
				{"POST", "/ofrep/v1/evaluate/flags/checkout", map[string]any{"context": withKey}, http.StatusBadRequest, "errorDetails"},
			} {
				got := s.do(r.method, r.path, r.body)
				msg := ""
				if e, ok := got.json(t)["error"].(map[string]any); ok {
					msg, _ = e[r.field].(string)
				} else {
					msg, _ = got.json(t)[r.field].(string)
				}
				if got.status != r.status || msg != want {
					t.Errorf("%s %.60s = %d %.300s, want %d saying %q", r.method, r.path, got.status, got.body, r.status, want)
				}
			}
		})
	}
}
