package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/ramp"
)

type rampAnswer struct {
	Ramp ramp.Ramp `json:"ramp"`
}

type rampsAnswer struct {
	Ramps []ramp.Ramp `json:"ramps"`
}

func decodeAs[T any](t *testing.T, r response) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("answer %d: %v: %s", r.status, err, r.body)
	}
	return v
}

// TestRampRefusals: bad ramps are refused with a JSON 4xx whose code and
// message say what is wrong, and nothing is stored.
func TestRampRefusals(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.create(feature.Feature{Key: "f", Enabled: true, Salt: "f", Buckets: []feature.Bucket{{Name: "on", Replicas: 1}, {Name: "off", Replicas: 100}}})
	tests := []struct {
		name    string
		path    string
		body    any
		status  int
		code    string
		message string
	}{
		{"unknown feature", "/api/features/nope/ramps", map[string]any{"bucket": "on", "steps": []float64{1}}, 404, "not_found", `feature "nope" does not exist`},
		{"unknown bucket", "/api/features/f/ramps", map[string]any{"bucket": "blue", "steps": []float64{1}}, 404, "not_found", `no bucket "blue"`},
		{"no bucket", "/api/features/f/ramps", map[string]any{"steps": []float64{1}}, 400, "bad_request", "give the bucket"},
		{"no steps", "/api/features/f/ramps", map[string]any{"bucket": "on", "every": "24h"}, 422, "invalid", "at least one step"},
		{"steps not increasing", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.1, 0.5, 0.5}, "every": "24h"}, 422, "invalid", "must increase"},
		{"step above 1", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.1, 1.5}, "every": "24h"}, 422, "invalid", "at most 1"},
		{"step 0", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0, 0.5}, "every": "24h"}, 422, "invalid", "above 0"},
		{"bad duration", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.1, 0.5}, "every": "a day"}, 400, "bad_request", `every "a day" is not a duration`},
		{"negative duration", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.1, 0.5}, "every": "-1h"}, 400, "bad_request", "positive"},
		{"no every", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.1, 0.5}}, 422, "invalid", "every must be a positive duration"},
		{"bad time", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.1, 0.5}, "at": []string{"tomorrow", "2026-01-01T00:00:00Z"}}, 400, "bad_request", `at "tomorrow" is not a time`},
		{"times not increasing", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.1, 0.5}, "at": []string{"2026-01-02T00:00:00Z", "2026-01-01T00:00:00Z"}}, 422, "invalid", "times must increase"},
		{"every and at", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.5}, "every": "1h", "at": []string{"2026-01-02T00:00:00Z"}}, 422, "invalid", "not both"},
		{"bad max_churn", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.5}, "max_churn": 2}, 422, "invalid", "max_churn"},
		{"tolerance 0", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.5}, "tolerance": 0}, 422, "invalid", "tolerance 0 is out of range: give a fraction of users from 1e-06 to below 1"},
		{"tolerance finer than a user in a million", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.5}, "tolerance": 1e-9}, 422, "invalid", "tolerance 1e-09 is out of range"},
		{"tolerance 1", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.5}, "tolerance": 1}, 422, "invalid", "tolerance 1 is out of range"},
		{"unknown field", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.5}, "evry": "1h"}, 400, "bad_request", "evry"},
		{"share reached", "/api/features/f/ramps", map[string]any{"bucket": "off", "steps": []float64{0.2, 0.5}, "every": "24h"}, 422, "invalid", "nothing to ramp"},
		{"unknown ramp", "/api/features/f/ramps/nope/pause", nil, 404, "not_found", `ramp "nope" does not exist`},
		{"every overflows", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.1, 0.5, 1}, "every": "2562047h"}, 400, "bad_request", "longer than 100 years"},
		{"steps beyond 100 years", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.1, 0.5, 1}, "every": "500000h"}, 422, "invalid", "more than 100 years"},
		{"start in 9999", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.1, 0.5}, "every": "24h", "start": "9999-12-31T00:00:00Z"}, 400, "bad_request", "more than 100 years from now"},
		{"at in 9999", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.5}, "at": []string{"9999-12-31T23:00:00Z"}}, 400, "bad_request", "more than 100 years from now"},
		{"start in year 0", "/api/features/f/ramps", map[string]any{"bucket": "on", "steps": []float64{0.5}, "start": "0000-01-01T00:00:00+01:00"}, 400, "bad_request", "more than 100 years from now"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do("POST", tt.path, tt.body)
			var e struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.Unmarshal(r.body, &e); err != nil {
				t.Fatalf("POST %s = %d %s: not JSON", tt.path, r.status, r.body)
			}
			if r.status != tt.status || e.Error.Code != tt.code || !strings.Contains(e.Error.Message, tt.message) {
				t.Errorf("POST %s = %d %s, want %d, code %q, message containing %q", tt.path, r.status, r.body, tt.status, tt.code, tt.message)
			}
		})
	}
	if got := decodeAs[rampsAnswer](t, s.must(200, "GET", "/api/ramps", nil)); len(got.Ramps) != 0 {
		t.Errorf("refused ramps were stored: %+v", got.Ramps)
	}
}

// TestRampLifecycle: a ramp created through the API is listed, its first
// step (due at once) applies as a version by the actor ramp, and pause,
// resume and cancel move it, refusing moves that make no sense; a ramp is
// found only under its own feature.
func TestRampLifecycle(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	r := s.must(201, "POST", "/api/features/dark-mode/ramps", map[string]any{"bucket": "on", "steps": []float64{0.55, 0.75, 1}, "every": "24h", "max_churn": 0.3})
	started := decodeAs[rampAnswer](t, r).Ramp
	if started.State != ramp.Active || len(started.Steps) != 3 || started.Bucket != "on" || *started.MaxChurn != 0.3 || started.Steps[1].At.Sub(started.Steps[0].At).Hours() != 24 {
		t.Fatalf("created ramp %+v, want active, 3 steps a day apart, max_churn 0.3", started)
	}
	s.must(409, "POST", "/api/features/dark-mode/ramps", map[string]any{"bucket": "off", "steps": []float64{1}})
	s.must(201, "POST", "/api/features/banner/ramps", map[string]any{"bucket": "red", "steps": []float64{1}, "start": "2099-01-01T00:00:00Z"})

	if got := decodeAs[rampsAnswer](t, s.must(200, "GET", "/api/ramps", nil)); len(got.Ramps) != 2 {
		t.Errorf("GET /api/ramps: %d ramps, want 2", len(got.Ramps))
	}
	if got := decodeAs[rampsAnswer](t, s.must(200, "GET", "/api/features/dark-mode/ramps", nil)); len(got.Ramps) != 1 || got.Ramps[0].ID != started.ID {
		t.Errorf("GET …/dark-mode/ramps = %+v, want the one ramp", got.Ramps)
	}
	s.must(404, "GET", "/api/features/nope/ramps", nil)
	s.must(404, "GET", "/api/features/banner/ramps/"+started.ID, nil)

	if n, err := s.svc.ApplyDueRamps(context.Background()); n != 1 || err != nil {
		t.Fatalf("ApplyDueRamps = %d, %v; want 1 (the first step, due now), nil", n, err)
	}
	got := decodeAs[rampAnswer](t, s.must(200, "GET", "/api/features/dark-mode/ramps/"+started.ID, nil)).Ramp
	if got.Next != 1 || got.Steps[0].Version != 2 {
		t.Errorf("after the first step: next %d, step version %d; want 1, 2", got.Next, got.Steps[0].Version)
	}
	v := s.must(200, "GET", "/api/features/dark-mode/versions/2", nil).json(t)
	if v["actor"] != "ramp" || !strings.HasPrefix(v["summary"].(string), "ramp on: step 1 of 3, 55 %; off 54.97 % → 4") || !strings.HasSuffix(v["summary"].(string), "of users moved, all into on") {
		t.Errorf("version 2 by %v: %v; want ramp: ramp on: step 1 of 3, 55 %%; off 54.97 %% → 45…, on …; … of users moved, all into on", v["actor"], v["summary"])
	}

	base := "/api/features/dark-mode/ramps/" + started.ID
	if got := decodeAs[rampAnswer](t, s.must(200, "POST", base+"/pause", nil)).Ramp; got.State != ramp.Paused || got.Reason == "" {
		t.Errorf("paused: %s, reason %q", got.State, got.Reason)
	}
	s.must(409, "POST", base+"/pause", nil)
	s.must(200, "POST", base+"/resume", nil)
	s.must(409, "POST", base+"/resume", nil)
	s.must(400, "POST", base+"/cancel", map[string]any{"why": "no body wanted"})
	if got := decodeAs[rampAnswer](t, s.must(200, "POST", base+"/cancel", nil)).Ramp; got.State != ramp.Canceled {
		t.Errorf("canceled: %s", got.State)
	}
	s.must(409, "POST", base+"/cancel", nil)
	s.must(201, "POST", "/api/features/dark-mode/ramps", map[string]any{"bucket": "off", "steps": []float64{1}})
}
