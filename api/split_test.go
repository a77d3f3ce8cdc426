package api_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/ring"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/storetest"
)

// TestSplitRule runs the split contract on SQLite and PostgreSQL.
func TestSplitRule(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testSplitRule(t, newServer(t, "", api.Options{})) })
	t.Run("postgres", func(t *testing.T) { testSplitRule(t, newPostgresServer(t, storetest.PostgresDSN(t), 0)) })
}

type splitFeature struct {
	Version int            `json:"version"`
	Rules   []feature.Rule `json:"rules"`
}

// splitShares are the exact shares of a rule's planned split ring.
func splitShares(t *testing.T, r feature.Rule) map[string]float64 {
	t.Helper()
	rg, err := ring.New(feature.SplitRingBuckets(r.Serve.SplitRing)...)
	if err != nil {
		t.Fatalf("split ring of %s: %v", r.Name, err)
	}
	return rg.Shares()
}

// testSplitRule: "enterprise customers: 50/50; everyone else: off". The
// split's exact shares come within 0.05 points; GET, POST and OFREP answer
// reason split (OFREP SPLIT) with the rule's name; 50 → 10 → 50 moves users
// only from on to off and back to exactly the same users; the preview of
// a change of the split gives the exact share of the rule's population
// that moves, between which buckets; renaming the rule, reordering rules
// and adding another rule move no one within the split; bad splits are
// refused with their field and change nothing.
func testSplitRule(t *testing.T, s *testServer) {
	s.create(feature.Feature{Key: "checkout", Enabled: true, Salt: "checkout",
		Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}})
	enterprise := func(name, on string) string {
		return `{"name":"` + name + `","conditions":[{"attribute":"plan","op":"eq","value":"enterprise"}],"serve":{"split":{"off":` + off(on) + `,"on":` + on + `}}}`
	}
	staff := `{"name":"staff","conditions":[{"attribute":"email","op":"ends_with","value":"@example.com"}],"serve":{"bucket":"on"}}`
	put := func(rules ...string) splitFeature {
		t.Helper()
		res := s.must(http.StatusOK, "PUT", "/api/features/checkout/rules", `{"rules":[`+strings.Join(rules, ",")+`]}`)
		var out struct {
			Feature splitFeature `json:"feature"`
		}
		if err := json.Unmarshal(res.body, &out); err != nil {
			t.Fatal(err)
		}
		return out.Feature
	}
	f := put(enterprise("enterprise", "0.5"))
	if got := splitShares(t, f.Rules[0]); math.Abs(got["on"]-0.5) > feature.SplitTolerance || math.Abs(got["off"]-0.5) > feature.SplitTolerance {
		t.Errorf("50/50 split's exact shares %v, want within 0.05 points", got)
	}

	// Every path answers the split with the rule's name.
	e := s.must(http.StatusOK, "GET", "/evaluate?feature=checkout&user=u1&ctx.plan=enterprise", nil).json(t)
	if e["reason"] != feature.ReasonSplit || e["rule"] != "enterprise" {
		t.Errorf("GET = %v, want reason split, rule enterprise", e)
	}
	p := s.must(http.StatusOK, "POST", "/evaluate", `{"user":"u1","context":{"plan":"enterprise"}}`).json(t)
	if r := p["results"].(map[string]any)["checkout"].(map[string]any); r["reason"] != feature.ReasonSplit || r["rule"] != "enterprise" || r["bucket"] != e["bucket"] {
		t.Errorf("POST = %v, GET %v", r, e)
	}
	o := s.must(http.StatusOK, "POST", "/ofrep/v1/evaluate/flags/checkout", `{"context":{"targetingKey":"u1","plan":"enterprise"}}`).json(t)
	if o["reason"] != "SPLIT" || o["metadata"].(map[string]any)["rule"] != "enterprise" || o["variant"] != e["bucket"] {
		t.Errorf("OFREP = %v, want SPLIT with rule enterprise and variant %v", o, e["bucket"])
	}

	// Whom the split serves what, for 2,000 users.
	buckets := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for i := range 2000 {
			user := fmt.Sprintf("user-%d", i)
			ev, err := s.svc.Snapshot().EvaluateContext("checkout", user, feature.Context{"plan": "enterprise"})
			if err != nil {
				t.Fatal(err)
			}
			out[user] = ev.Bucket
		}
		return out
	}
	at50 := buckets()
	on := 0
	for _, b := range at50 {
		if b == "on" {
			on++
		}
	}
	if on < 850 || on > 1150 {
		t.Errorf("%d of 2,000 enterprise users get on at 50%%", on)
	}

	// The preview of 50 → 10: the exact share of the rule's population that
	// moves, all from on to off.
	prev := s.must(http.StatusOK, "POST", "/api/features/checkout/preview", `{"rules":[`+enterprise("enterprise", "0.1")+`]}`).json(t)
	splits, _ := prev["splits"].([]any)
	if len(splits) != 1 {
		t.Fatalf("preview of 50 → 10: splits %v, want one", prev["splits"])
	}
	sc := splits[0].(map[string]any)
	churn := sc["churn"].(float64)
	if sc["rule"] != "enterprise" || math.Abs(churn-0.4) > 2*feature.SplitTolerance {
		t.Errorf("preview: %v, want rule enterprise moving 40%% ± 0.1 points", sc)
	}
	moves := sc["moves"].([]any)
	if len(moves) != 1 || moves[0].(map[string]any)["from"] != "on" || moves[0].(map[string]any)["to"] != "off" || moves[0].(map[string]any)["share"].(float64) != churn {
		t.Errorf("preview's moves %v, want all of %v from on to off", moves, churn)
	}
	if f, _ := s.svc.Snapshot().Feature("checkout"); len(f.Rules) != 1 || f.Rules[0].Serve.Split["on"] != 0.5 {
		t.Errorf("a preview changed the rules: %+v", f.Rules)
	}
	f = put(enterprise("enterprise", "0.1"))
	if got := splitShares(t, f.Rules[0]); math.Abs(got["on"]-0.1) > feature.SplitTolerance {
		t.Errorf("10%% split's exact share %v", got)
	}
	at10 := buckets()
	for u, b := range at10 {
		if b == "on" && at50[u] != "on" {
			t.Fatalf("user %s is on at 10%% but was %s at 50%%: not nested", u, at50[u])
		}
	}
	// The counted churn agrees with the preview's exact figure.
	moved := 0
	for u := range at10 {
		if at10[u] != at50[u] {
			moved++
		}
	}
	if d := float64(moved)/2000 - churn; math.Abs(d) > 0.05 {
		t.Errorf("%d of 2,000 users moved, the preview said %v", moved, churn)
	}
	put(enterprise("enterprise", "0.5"))
	for u, b := range buckets() {
		if b != at50[u] {
			t.Fatalf("50 → 10 → 50: user %s gets %s, had %s", u, b, at50[u])
		}
	}

	// Renaming, reordering and adding another rule move no one within the
	// split.
	put(staff, enterprise("enterprise", "0.5"))
	put(enterprise("big-customers", "0.5"), staff)
	for u, b := range buckets() {
		if b != at50[u] {
			t.Fatalf("after renaming and reordering: user %s gets %s, had %s", u, b, at50[u])
		}
	}

	// Bad splits: refused with their field, nothing changed.
	cur, _ := s.svc.Snapshot().Feature("checkout")
	bad := func(serve string) string {
		return `{"rules":[{"name":"r","conditions":[],"serve":` + serve + `}]}`
	}
	many := make([]string, feature.MaxSplitRules+1)
	for i := range many {
		many[i] = `{"name":"r` + fmt.Sprint(i) + `","conditions":[],"serve":{"split":{"on":1}}}`
	}
	for name, tc := range map[string]struct{ body, field string }{
		"sum not 1":        {bad(`{"split":{"on":0.5,"off":0.4}}`), "rules[0].serve.split"},
		"unknown bucket":   {bad(`{"split":{"on":0.5,"nope":0.5}}`), "rules[0].serve.split"},
		"negative share":   {bad(`{"split":{"on":1.5,"off":-0.5}}`), "rules[0].serve.split"},
		"split and bucket": {bad(`{"split":{"on":1},"bucket":"on"}`), "rules[0].serve"},
		"empty split":      {bad(`{"split":{}}`), "rules[0].serve.split"},
		"a ring, no split": {bad(`{"bucket":"on","split_ring":[{"name":"on","replicas":1}]}`), "rules[0].serve.split_ring"},
		"11 split rules":   {`{"rules":[` + strings.Join(many, ",") + `]}`, "rules[10].serve.split"},
	} {
		r := s.do("PUT", "/api/features/checkout/rules", tc.body)
		if r.status != 422 || !strings.Contains(string(r.body), `"field":"`+tc.field+`"`) {
			t.Errorf("%s: PUT = %d %.300s, want 422 at %s", name, r.status, r.body, tc.field)
		}
	}
	if now, _ := s.svc.Snapshot().Feature("checkout"); now.Version != cur.Version {
		t.Errorf("refused splits changed the feature: version %d → %d", cur.Version, now.Version)
	}
}

// off is 1 - on, as JSON.
func off(on string) string {
	var n float64
	fmt.Sscan(on, &n)
	return fmt.Sprint(math.Round((1-n)*1e9) / 1e9)
}
