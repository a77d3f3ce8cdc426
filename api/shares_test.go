package api_test

import (
	"encoding/json"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// TestPlanModesAPI: a feature created by percentages without a tolerance
// is fine (within 0.05 points); a plan without tolerance or mode answers
// the nested plan of a two-bucket change with both options and their
// churn, and applying 50 → 10 → 50 % returns the ring it started from; a
// plan with a tolerance answers as before modes, without them.
func TestPlanModesAPI(t *testing.T) {
	// Plans end by their step budget alone, never by the clock, however
	// loaded the machine.
	s := newServer(t, "", api.Options{Plans: api.PlanLimits{Timeout: time.Hour}})
	var created struct {
		Feature struct {
			feature.Feature
			Shares map[string]float64 `json:"shares"`
		} `json:"feature"`
	}
	r := s.must(201, "POST", "/api/features", map[string]any{"key": "exp",
		"targets": map[string]float64{"off": 0.5, "on": 0.5},
		"buckets": []map[string]any{{"name": "off"}, {"name": "on"}}})
	if err := json.Unmarshal(r.body, &created); err != nil {
		t.Fatal(err)
	}
	for name, share := range created.Feature.Shares {
		if math.Abs(share-0.5) > 0.0005 {
			t.Errorf("created share of %s = %v, want 0.5 within 0.0005", name, share)
		}
	}
	first := created.Feature.Buckets

	var p struct {
		plan.Plan
		Report feature.Report `json:"report"`
	}
	r = s.must(200, "POST", "/api/features/exp/plan", map[string]any{"targets": map[string]float64{"off": 0.9, "on": 0.1}})
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	if p.Mode != "nested" || !slices.Equal(p.Varied, []string{"on"}) || p.Tolerance != 0.0005 || !p.WithinTolerance {
		t.Errorf("plan = mode %q varied %v tolerance %v within %v; want nested, on, 0.0005", p.Mode, p.Varied, p.Tolerance, p.WithinTolerance)
	}
	if nested, ok := p.Options["nested"]; !ok || nested.Churn != p.Churn || len(p.Options) != 1 {
		t.Errorf("options %+v, want nested alone (churn %v)", p.Options, p.Churn)
	}
	for _, m := range p.Report.Moves {
		if m.From != "on" || m.To != "off" {
			t.Errorf("50 → 10 moves %+v, want on → off only", m)
		}
	}
	s.must(200, "PUT", "/api/features/exp/buckets", map[string]any{"buckets": p.Buckets})
	r = s.must(200, "POST", "/api/features/exp/plan", map[string]any{"targets": map[string]float64{"off": 0.5, "on": 0.5}, "mode": "nested"})
	var back plan.Plan
	if err := json.Unmarshal(r.body, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Buckets) != 2 || back.Buckets[0].Replicas != first[0].Replicas || back.Buckets[1].Replicas != first[1].Replicas || back.Options != nil {
		t.Errorf("50 → 10 → 50 = %v (options %v), want %v, no options", back.Buckets, back.Options, first)
	}

	// 3 × 33.33 % is equal thirds.
	var thirds struct {
		Feature struct {
			Shares map[string]float64 `json:"shares"`
		} `json:"feature"`
	}
	r = s.must(201, "POST", "/api/features", map[string]any{"key": "thirds", "targets": map[string]float64{"A": 0.3333, "B": 0.3333, "C": 0.3333}})
	if err := json.Unmarshal(r.body, &thirds); err != nil {
		t.Fatal(err)
	}
	for name, share := range thirds.Feature.Shares {
		if math.Abs(share-1.0/3) > 0.0005 {
			t.Errorf("3 × 33.33 %%: share of %s = %v, want a third within 0.05 points", name, share)
		}
	}

	// Several buckets at once: both options, the exact one answered.
	s.must(201, "POST", "/api/features", map[string]any{"key": "abcd",
		"targets": map[string]float64{"A": 0.25, "B": 0.25, "C": 0.25, "D": 0.25}})
	r = s.must(200, "POST", "/api/features/abcd/plan", map[string]any{"targets": map[string]float64{"A": 0.4, "B": 0.1, "C": 0.3, "D": 0.2}})
	var several map[string]any
	if err := json.Unmarshal(r.body, &several); err != nil {
		t.Fatal(err)
	}
	options, _ := several["options"].(map[string]any)
	exact, _ := options["exact"].(map[string]any)
	if several["mode"] != "exact" || len(options) != 2 || exact["cross_churn"] == nil || several["cross_moves"] == nil || several["report"].(map[string]any)["range_churn"] == nil {
		t.Errorf("plan of several buckets = %s, want exact answered, both options, cross-moves, range churn", r.body)
	}

	r = s.must(200, "POST", "/api/features/exp/plan", map[string]any{"targets": map[string]float64{"off": 0.5, "on": 0.5}, "tolerance": 0.005})
	var legacy map[string]any
	if err := json.Unmarshal(r.body, &legacy); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"mode", "options", "cross_moves", "varied"} {
		if _, ok := legacy[k]; ok {
			t.Errorf("plan with a tolerance answers %q: %s", k, r.body)
		}
	}
}
