package main

import (
	"context"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollout/rollout/cmd/internal/serve"
)

// TestRampSurvivesRestart: the server runs the ramp runner; a ramp whose
// first step is due applies it, survives a restart, and the restarted
// server applies the second step when its clock reaches the step's time:
// two versions by ramp. The servers' clock is moved, not waited for.
func TestRampSurvivesRestart(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "rollout.db")
	var ahead atomic.Int64 // how far the servers' clock is ahead of the machine's
	clock := func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	start := func() *server {
		t.Helper()
		m := &serve.Server{Addr: "127.0.0.1:0", DBPath: dbPath, RampInterval: 20 * time.Millisecond, Clock: clock}
		if err := m.Open(context.Background()); err != nil {
			t.Fatalf("open server: %v", err)
		}
		s := &server{t: t, m: m, dbPath: dbPath}
		t.Cleanup(s.stop)
		return s
	}
	s := start()
	s.must(201, "POST", "/api/features", abcFeature("checkout"))
	now := time.Now().UTC()
	second := now.Add(time.Hour)
	ramp := s.must(201, "POST", "/api/features/checkout/ramps", map[string]any{
		"bucket": "A", "steps": []float64{0.6, 1},
		"at": []string{now.Add(-time.Minute).Format(time.RFC3339Nano), second.Format(time.RFC3339Nano)},
	})["ramp"].(map[string]any)
	path := "/api/features/checkout/ramps/" + ramp["id"].(string)
	waitRamp := func(s *server, next float64) map[string]any {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := s.must(200, "GET", path, nil)["ramp"].(map[string]any)
			if r["next"].(float64) >= next || time.Now().After(deadline) {
				return r
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if r := waitRamp(s, 1); r["next"] != 1.0 || r["state"] != "active" {
		t.Fatalf("first step: ramp %v, want active at step 1", r)
	}
	s.stop()
	s = start()
	if r := s.must(200, "GET", path, nil)["ramp"].(map[string]any); r["next"] != 1.0 {
		t.Fatalf("after the restart, before the second step's time: ramp %v, want at step 1", r)
	}
	ahead.Store(int64(time.Hour + time.Minute))
	if r := waitRamp(s, 2); r["state"] != "done" {
		t.Fatalf("after the restart: ramp %v, want done", r)
	}
	f := s.must(200, "GET", "/api/features/checkout", nil)
	bs := f["buckets"].([]any)
	for _, b := range bs {
		b := b.(map[string]any)
		if (b["name"] == "A") != (b["replicas"].(float64) > 0) {
			t.Errorf("after the last step the buckets are %v, want A with replicas, the others kept at 0", bs)
		}
	}
	vs := s.must(200, "GET", "/api/features/checkout/versions", nil)["versions"].([]any)
	var got []string
	for _, v := range vs {
		v := v.(map[string]any)
		got = append(got, v["actor"].(string)+": "+v["summary"].(string))
	}
	want := []string{"ramp: ramp A: step 2 of 2, 100 %", "ramp: ramp A: step 1 of 2, 60 %", "anonymous: created"}
	// Each step's summary goes on in percentages: "…; A 0 % → 60 %, ….
	if len(got) != 3 || !strings.HasPrefix(got[0], want[0]+"; ") || !strings.HasPrefix(got[1], want[1]+"; ") || got[2] != want[2] {
		t.Errorf("history %q, want %q", got, want)
	}
}
