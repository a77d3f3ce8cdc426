package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// benchRules is 5 rules of 2 conditions each that benchContext matches
// none of, so that every rule is tried.
func benchRules() []feature.Rule {
	c := func(attr, op string, v any) feature.Condition {
		raw, _ := json.Marshal(v)
		if v == nil {
			raw = nil
		}
		return feature.Condition{Attribute: attr, Op: op, Value: raw}
	}
	return []feature.Rule{
		{Name: "staff", Conditions: []feature.Condition{c("email", "ends_with", "@staff.example"), c("beta", "eq", true)}, Serve: feature.Serve{Bucket: "A"}},
		{Name: "enterprise", Conditions: []feature.Condition{c("plan", "eq", "enterprise"), c("seats", "gte", 100)}, Serve: feature.Serve{Bucket: "B"}},
		{Name: "dach", Conditions: []feature.Condition{c("country", "in", []string{"DE", "AT", "CH"}), c("plan", "neq", "free")}, Serve: feature.Serve{Ring: true}},
		{Name: "new-app", Conditions: []feature.Condition{c("app_version", "semver_gte", "5.0.0"), c("email", "present", nil)}, Serve: feature.Serve{Bucket: "C"}},
		{Name: "old", Conditions: []feature.Condition{c("created", "before", "2020-01-01T00:00:00Z"), c("plan", "starts_with", "legacy")}, Serve: feature.Serve{Bucket: "control"}},
	}
}

const benchContext = `"email":"user-4711@example.com","plan":"pro","country":"FR","seats":12,"beta":false,"app_version":"4.2.1"`

// BenchmarkOFREPEvaluateRules is BenchmarkOFREPEvaluate for a feature with
// 5 rules of 2 conditions, evaluated with a 6-attribute context, beside
// the bare handler answering the same bytes (issue #22: at least 0.80 of
// the bare handler under wrk), and the same request for a feature without
// rules (its context then is not even read).
func BenchmarkOFREPEvaluateRules(b *testing.B) {
	h, svc, _ := benchAPI(b, false)
	if _, err := svc.Change(context.Background(), "feature-07", change.SetRules(benchRules()), rollout.ChangeOptions{}); err != nil {
		b.Fatal(err)
	}
	for _, key := range []string{"feature-07", "feature-08"} {
		br := newBenchRequest(http.MethodPost, "/ofrep/v1/evaluate/flags/"+key, `{"context":{"targetingKey":"user-4711@example.com",`+benchContext+`}}`, "")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, br.next())
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
		answer := rec.Body.Bytes()
		name := "rules"
		if key == "feature-08" {
			name = "no-rules"
		}
		b.Run(name+"/baseline", func(b *testing.B) { benchServe(b, bare(bytes.Clone(answer)), br, len(answer)) })
		b.Run(name+"/api", func(b *testing.B) { benchServe(b, h, br, len(answer)) })
	}
}

// BenchmarkEvaluateRulesContext is GET /evaluate with the 6 attributes of
// benchContext as ctx. parameters, and POST /evaluate with them as a
// context, for a feature with 5 rules of 2 conditions, each beside the
// bare handler answering the same bytes: what an ordinary context costs
// each route.
func BenchmarkEvaluateRulesContext(b *testing.B) {
	h, svc, _ := benchAPI(b, false)
	if _, err := svc.Change(context.Background(), "feature-07", change.SetRules(benchRules()), rollout.ChangeOptions{}); err != nil {
		b.Fatal(err)
	}
	var ctx map[string]any
	if err := json.Unmarshal([]byte("{"+benchContext+"}"), &ctx); err != nil {
		b.Fatal(err)
	}
	q := url.Values{"feature": {"feature-07"}, "user": {"user-4711@example.com"}}
	for k, v := range ctx {
		q.Set("ctx."+k, fmt.Sprint(v))
	}
	for _, r := range []struct{ name, method, target, body string }{
		{"get", http.MethodGet, "/evaluate?" + q.Encode(), ""},
		{"post", http.MethodPost, "/evaluate", `{"user":"user-4711@example.com","features":["feature-07"],"context":{` + benchContext + `}}`},
	} {
		br := newBenchRequest(r.method, r.target, r.body, "")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, br.next())
		if rec.Code != http.StatusOK {
			b.Fatalf("%d %s", rec.Code, rec.Body)
		}
		answer := rec.Body.Bytes()
		b.Run(r.name+"/baseline", func(b *testing.B) { benchServe(b, bare(bytes.Clone(answer)), br, len(answer)) })
		b.Run(r.name+"/api", func(b *testing.B) { benchServe(b, h, br, len(answer)) })
	}
}
