package api_test

import (
	"math"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/plan"
	"github.com/rollout/rollout/rollout/ramp"
)

// TestRollbackKeepOverrides: a rollback restores the old version's
// overrides (the preview names the pinned users it would release), and
// with keep_overrides the pins made since stay; a pin whose bucket the old
// version lacks goes either way.
// The preview's feature shows the overrides the rollback would keep.
func TestRollbackKeepOverrides(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()                                                                                          // checkout v1: A, B, C; vip → C
	s.must(200, "PUT", "/api/features/checkout/overrides/alice", map[string]any{"bucket": "B"})       // v2
	s.must(200, "POST", "/api/features/checkout/buckets", map[string]any{"name": "D", "replicas": 3}) // v3
	s.must(200, "PUT", "/api/features/checkout/overrides/bob", map[string]any{"bucket": "D"})         // v4

	pre := s.must(200, "POST", "/api/features/checkout/rollback", map[string]any{"version": 1, "dry_run": true}).json(t)
	// The preview's feature lacks the pins the rollback would release
	// (alice's ring bucket may be B anyway, so its report may not list her).
	if ov := pre["feature"].(map[string]any)["overrides"].(map[string]any); len(ov) != 1 || ov["vip"] != "C" {
		t.Errorf("rollback preview overrides %v, want vip → C only", ov)
	}
	changes, _ := pre["report"].(map[string]any)["override_changes"].([]any)
	if len(changes) == 0 || changes[len(changes)-1].(map[string]any)["user"] != "bob" {
		t.Errorf("rollback preview override changes %v, want bob's at least", changes)
	}
	got := s.must(200, "POST", "/api/features/checkout/rollback", map[string]any{"version": 1, "keep_overrides": true, "comment": "keep the pins"}).json(t)
	ov := got["feature"].(map[string]any)["overrides"].(map[string]any)
	if len(ov) != 2 || ov["alice"] != "B" || ov["vip"] != "C" {
		t.Errorf("kept overrides after rollback = %v, want alice → B and vip → C (bob's D is gone)", ov)
	}
	v := s.must(200, "GET", "/api/features/checkout/versions/5", nil).json(t)
	if !strings.HasPrefix(v["summary"].(string), "rolled back to version 1, keeping the pinned users") {
		t.Errorf("version 5 summary %q", v["summary"])
	}
	s.must(200, "POST", "/api/features/checkout/rollback", map[string]any{"version": 2})
	s.must(400, "POST", "/api/features/checkout/rollback", map[string]any{"version": 2, "keep_overrides": "yes"})
	got = s.must(200, "POST", "/api/features/checkout/rollback", map[string]any{"version": 1}).json(t)
	if ov := got["feature"].(map[string]any)["overrides"].(map[string]any); len(ov) != 1 || ov["vip"] != "C" {
		t.Errorf("overrides after a plain rollback = %v, want version 1's vip → C only", ov)
	}
}

// TestRampDryRun: "dry_run": true answers each step's share and movement
// and stores nothing; a bad dry run is refused as a ramp would be.
func TestRampDryRun(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	body := map[string]any{"bucket": "on", "steps": []float64{0.6, 0.8, 1}, "every": "24h", "start": "2099-01-01T09:00:00Z", "comment": "slowly", "dry_run": true}
	pre := decodeAs[struct {
		DryRun bool               `json:"dry_run"`
		Ramp   ramp.Ramp          `json:"ramp"`
		Steps  []ramp.StepPreview `json:"steps"`
	}](t, s.must(200, "POST", "/api/features/dark-mode/ramps", body))
	if !pre.DryRun || len(pre.Steps) != 3 || pre.Ramp.Comment != "slowly" || pre.Ramp.Tolerance != plan.DefaultTolerance {
		t.Fatalf("dry run = %+v", pre)
	}
	prev := s.must(200, "GET", "/api/features/dark-mode", nil).json(t)["shares"].(map[string]any)["on"].(float64)
	for i, st := range pre.Steps {
		if st.Error != "" || math.Abs(st.Reached-st.Share) > plan.DefaultTolerance || math.Abs(st.Churn-(st.Reached-prev)) > 1e-9 || !strings.Contains(st.Summary, "all into on") {
			t.Errorf("step %d preview %+v (from %v)", i+1, st, prev)
		}
		prev = st.Reached
	}
	if got := decodeAs[rampsAnswer](t, s.must(200, "GET", "/api/ramps", nil)); len(got.Ramps) != 0 {
		t.Errorf("a dry run stored %+v", got.Ramps)
	}
	body["steps"] = []float64{0.3, 0.4}
	s.must(422, "POST", "/api/features/dark-mode/ramps", body)
	body["comment"] = strings.Repeat("x", rollout.MaxComment+1)
	body["steps"] = []float64{0.6}
	s.must(422, "POST", "/api/features/dark-mode/ramps", body)
	delete(body, "dry_run")
	body["comment"] = "for real"
	r := decodeAs[rampAnswer](t, s.must(201, "POST", "/api/features/dark-mode/ramps", body)).Ramp
	if r.Comment != "for real" {
		t.Errorf("ramp comment %q", r.Comment)
	}
}
