package main

import (
	"os"
	"strings"
	"testing"
)

// TestObservabilityWiring checks what serve.Server wires for operators: readiness
// on the real database, metrics, OFREP.
func TestObservabilityWiring(t *testing.T) {
	s := startServer(t, "")
	s.must(201, "POST", "/api/features", abcFeature("f"))
	s.must(200, "GET", "/healthz", nil)
	if got := s.must(200, "GET", "/readyz", nil); got["status"] != "ready" {
		t.Errorf("readyz = %v", got)
	}
	r := s.do("POST", "/ofrep/v1/evaluate/flags", map[string]any{"context": map[string]any{"targetingKey": "u"}})
	if r.status != 200 || r.header.Get("ETag") == "" {
		t.Errorf("OFREP bulk evaluation = %d %s (ETag %q), want 200 with an ETag", r.status, r.body, r.header.Get("ETag"))
	}
	metrics := string(s.do("GET", "/metrics", nil).body)
	for _, want := range []string{
		`rollout_changes_applied_total{kind="create"} 1`,
		`rollout_snapshot_features 1`,
		`rollout_http_requests_total{method="GET",route="/readyz",status="200"} 1`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("GET /metrics lacks %s", want)
		}
	}

	// Readiness asks the database itself.
	if err := os.Rename(s.dbPath, s.dbPath+".away"); err != nil {
		t.Fatal(err)
	}
	if got := s.must(503, "GET", "/readyz", nil); got["status"] != "unavailable" {
		t.Errorf("readyz with the database gone = %v", got)
	}
}
