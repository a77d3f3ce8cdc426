package api_test

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

type planAnswer struct {
	Buckets         []feature.Bucket   `json:"buckets"`
	SharesAfter     map[string]float64 `json:"shares_after"`
	MaxError        float64            `json:"max_error"`
	WithinTolerance bool               `json:"within_tolerance"`
	Churn           float64            `json:"churn"`
	LowerBound      float64            `json:"lower_bound"`
	Report          feature.Report     `json:"report"`
}

// TestPlanThenApply: plan 10 % / 90 % for on/off at 100/100, which stores
// nothing, then apply the plan's buckets with If-Match: one new version
// whose shares are the plan's, values kept.
func TestPlanThenApply(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	tag := s.must(200, "GET", "/api/features/dark-mode", nil).header.Get("ETag")

	r := s.must(200, "POST", "/api/features/dark-mode/plan", map[string]any{"targets": map[string]float64{"on": 0.1, "off": 0.9}, "tolerance": 0.005})
	var p planAnswer
	if err := json.Unmarshal(r.body, &p); err != nil {
		t.Fatal(err)
	}
	if !p.WithinTolerance || p.MaxError > 0.005 || math.Abs(p.SharesAfter["on"]-0.1) > 0.005 {
		t.Errorf("plan %+v, want within 0.005 of 10 %%", p)
	}
	if p.Churn > 0.346 || math.Abs(p.LowerBound-0.3503) > 0.0001 || p.Report.Churn != p.Churn {
		t.Errorf("plan churn %v (report %v), bound %v; want at most 0.346, bound 0.3503", p.Churn, p.Report.Churn, p.LowerBound)
	}
	if p.Report.FromVersion != 1 || p.Report.ToVersion != 2 || p.Report.SharesAfter["on"] != p.SharesAfter["on"] {
		t.Errorf("report %+v does not go from version 1 to the plan's shares", p.Report)
	}
	if !strings.Contains(string(r.body), `"buckets":[{"name":"on","replicas":`) {
		t.Errorf("plan buckets are not name and replicas: %s", r.body)
	}
	if n := s.versions("dark-mode"); n != 1 {
		t.Fatalf("plan stored something: %d versions", n)
	}

	body := map[string]any{"buckets": p.Buckets}
	s.must(412, "PUT", "/api/features/dark-mode/buckets", body, "If-Match", `"9-000000000000"`)
	s.must(200, "PUT", "/api/features/dark-mode/buckets?dry_run=true", body, "If-Match", tag)
	s.must(409, "PUT", "/api/features/dark-mode/buckets", with(body, "max_churn", 0.1), "If-Match", tag)
	if n := s.versions("dark-mode"); n != 1 {
		t.Fatalf("refused or dry-run changes stored: %d versions", n)
	}
	r = s.must(200, "PUT", "/api/features/dark-mode/buckets", body, "If-Match", tag)
	var res struct {
		Feature struct {
			feature.Feature
			Shares map[string]float64 `json:"shares"`
		} `json:"feature"`
		Report feature.Report `json:"report"`
	}
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatal(err)
	}
	if res.Feature.Version != 2 || res.Report.Churn != p.Churn || res.Feature.Shares["on"] != p.SharesAfter["on"] {
		t.Errorf("applied: version %d, churn %v, shares %v; want 2, %v, %v", res.Feature.Version, res.Report.Churn, res.Feature.Shares, p.Churn, p.SharesAfter)
	}
	for _, b := range res.Feature.Buckets {
		if want := map[string]string{"on": "true", "off": "false"}[b.Name]; string(b.Value) != want {
			t.Errorf("bucket %s value %s, want %s kept", b.Name, b.Value, want)
		}
	}
	if n := s.versions("dark-mode"); n != 2 {
		t.Errorf("%d versions, want 2: the buckets replaced as one version", n)
	}
}

func with(body map[string]any, k string, v any) map[string]any {
	out := map[string]any{k: v}
	for bk, bv := range body {
		out[bk] = bv
	}
	return out
}

// TestCreateWithTargets: a feature created with target shares gets replicas
// within tolerance of them, and values from its buckets.
func TestCreateWithTargets(t *testing.T) {
	s := newServer(t, "", api.Options{})
	r := s.must(201, "POST", "/api/features", map[string]any{"key": "split",
		"targets": map[string]float64{"A": 0.5, "B": 0.3, "C": 0.2},
		"buckets": []map[string]any{{"name": "B", "value": 2}}})
	var res struct {
		Feature struct {
			feature.Feature
			Shares map[string]float64 `json:"shares"`
		} `json:"feature"`
	}
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]float64{"A": 0.5, "B": 0.3, "C": 0.2} {
		if got := res.Feature.Shares[name]; math.Abs(got-target) > plan.DefaultTolerance {
			t.Errorf("share of %s = %v, want %v within 0.005", name, got, target)
		}
	}
	if b := res.Feature.Buckets[0]; b.Name != "B" || string(b.Value) != "2" || len(res.Feature.Buckets) != 3 {
		t.Errorf("buckets %v, want B (value 2) first of 3", res.Feature.Buckets)
	}
}

// TestPlanRefusals: bad plans, bucket lists and targets get a clear JSON
// 4xx and change nothing.
func TestPlanRefusals(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	tag := s.must(200, "GET", "/api/features/dark-mode", nil).header.Get("ETag")
	for _, tc := range []struct {
		name, method, path string
		body               any
		status             int
		want               string
	}{
		{"plan: no targets", "POST", "/api/features/dark-mode/plan", map[string]any{}, 400, "give the target share"},
		{"plan: empty targets", "POST", "/api/features/dark-mode/plan", map[string]any{"targets": map[string]any{}}, 422, "give the target share"},
		{"plan: sum not 1", "POST", "/api/features/dark-mode/plan", map[string]any{"targets": map[string]any{"on": 0.2, "off": 0.9}}, 422, "sum to 1.1"},
		{"plan: negative", "POST", "/api/features/dark-mode/plan", map[string]any{"targets": map[string]any{"on": -0.5, "off": 1.5}}, 422, "from 0 to 1"},
		{"plan: bucket left out", "POST", "/api/features/dark-mode/plan", map[string]any{"targets": map[string]any{"on": 1}}, 422, `do not name bucket \"off\"`},
		{"plan: unknown field", "POST", "/api/features/dark-mode/plan", map[string]any{"targets": map[string]any{"on": 0.5, "off": 0.5}, "tolerence": 0.01}, 400, "tolerence"},
		{"plan: tolerance 0", "POST", "/api/features/dark-mode/plan", map[string]any{"targets": map[string]any{"on": 0.5, "off": 0.5}, "tolerance": 0}, 422, "tolerance 0 is out of range"},
		{"plan: not a number", "POST", "/api/features/dark-mode/plan", `{"targets":{"on":"half","off":0.5}}`, 400, ""},
		{"plan: no feature", "POST", "/api/features/nope/plan", map[string]any{"targets": map[string]any{"on": 1}}, 404, "does not exist"},
		{"plan: removes the fallback", "POST", "/api/features/paused/plan", map[string]any{"targets": map[string]any{"old": 0, "new": 1}, "tolerance": 0.005}, 422, "fallback"},
		{"plan: unknown mode", "POST", "/api/features/paused/plan", map[string]any{"targets": map[string]any{"old": 0, "new": 1}, "mode": "closest"}, 422, `mode \"closest\" is unknown`},
		{"put: no buckets", "PUT", "/api/features/dark-mode/buckets", map[string]any{}, 400, "give the whole list"},
		{"put: empty list", "PUT", "/api/features/dark-mode/buckets", map[string]any{"buckets": []any{}}, 422, "at least one bucket"},
		{"put: no replicas", "PUT", "/api/features/dark-mode/buckets", map[string]any{"buckets": []any{map[string]any{"name": "on"}}}, 400, "has no replicas"},
		{"put: too many replicas", "PUT", "/api/features/dark-mode/buckets", map[string]any{"buckets": []any{map[string]any{"name": "on", "replicas": 20001}}}, 422, "between 0 and 20000"},
		{"put: duplicate", "PUT", "/api/features/dark-mode/buckets", map[string]any{"buckets": []any{map[string]any{"name": "on", "replicas": 5}, map[string]any{"name": "on", "replicas": 5}}}, 422, "appears twice"},
		{"put: unknown field", "PUT", "/api/features/dark-mode/buckets", map[string]any{"buckets": []any{map[string]any{"name": "on", "replicas": 5, "weight": 1}}}, 400, "weight"},
		{"create: targets and replicas", "POST", "/api/features", map[string]any{"key": "x", "targets": map[string]any{"A": 1}, "buckets": []any{map[string]any{"name": "A", "replicas": 5}}}, 400, "one or the other"},
		{"create: targets sum", "POST", "/api/features", map[string]any{"key": "x", "targets": map[string]any{"A": 0.5}}, 422, "sum to 0.5"},
		{"create: zero target", "POST", "/api/features", map[string]any{"key": "x", "targets": map[string]any{"A": 1, "B": 0}, "tolerance": 0.005}, 422, "share above 0"},
		{"create: all targets zero", "POST", "/api/features", map[string]any{"key": "x", "targets": map[string]any{"A": 0, "B": 0}}, 422, "sum to 0"},
		{"create: mode alone", "POST", "/api/features", map[string]any{"key": "x", "mode": "nested", "buckets": []any{map[string]any{"name": "B", "replicas": 1}}}, 400, "tolerance is for targets"},
		{"create: bucket without target", "POST", "/api/features", map[string]any{"key": "x", "targets": map[string]any{"A": 1}, "buckets": []any{map[string]any{"name": "B"}}}, 400, "has no target"},
		{"create: tolerance alone", "POST", "/api/features", map[string]any{"key": "x", "tolerance": 0.01, "buckets": []any{map[string]any{"name": "B"}}}, 400, "tolerance is for targets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := s.do(tc.method, tc.path, tc.body, "If-Match", tag)
			if tc.path == "/api/features" {
				r = s.do(tc.method, tc.path, tc.body)
			}
			if r.status != tc.status || !strings.Contains(string(r.body), tc.want) {
				t.Errorf("%s %s = %d %s, want %d with %q", tc.method, tc.path, r.status, r.body, tc.status, tc.want)
			}
			if e, _ := r.json(t)["error"].(map[string]any); e == nil || e["message"] == "" {
				t.Errorf("answer %s has no error message", r.body)
			}
		})
	}
	if n := s.versions("dark-mode"); n != 1 {
		t.Errorf("dark-mode has %d versions after refusals, want 1", n)
	}
	if n := s.versions("x"); n != 0 {
		t.Errorf("feature x was created")
	}
}
