package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollout/rollout/rollout"
)

// TestEnvironmentsAsCode: export, plan and apply with --env read and
// change that environment alone, through the server rollout serve runs.
func TestEnvironmentsAsCode(t *testing.T) {
	s := startServer(t, "")
	s.must(201, "POST", "/api/features", abcFeature("checkout"))
	s.must(201, "POST", "/api/environments", map[string]any{"key": "staging", "name": "Staging"})
	file := filepath.Join(t.TempDir(), "staging.yaml")
	if _, err := runWith(t, s.m.URL(), "", "export", "--env", "staging", "--out", file); err != nil {
		t.Fatalf("export --env staging: %v", err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "enabled: false") {
		t.Fatalf("staging's export does not show checkout switched off:\n%s", data)
	}
	editDocument(t, file, func(d *rollout.Document) { on := true; d.Features[0].Enabled = &on })
	out, err := runWith(t, s.m.URL(), "", "plan", "--env", "staging", "-f", file)
	if err == nil || !strings.Contains(out, "checkout") {
		t.Fatalf("plan --env staging = %v\n%s\nwant a change of checkout (exit 2)", err, out)
	}
	if _, err := runWith(t, s.m.URL(), "", "apply", "--env", "staging", "-f", file); err != nil {
		t.Fatalf("apply --env staging: %v", err)
	}
	if got := s.must(200, "GET", "/api/features/checkout?env=staging", nil)["enabled"]; got != true {
		t.Errorf("checkout in staging after the apply: enabled = %v, want true", got)
	}
	prod := s.must(200, "GET", "/api/features/checkout", nil)
	if prod["enabled"] != true || prod["version"] != float64(1) {
		t.Errorf("checkout in production after staging's apply = %v, want it unchanged", prod)
	}
	if _, err := runWith(t, s.m.URL(), "", "export", "--env", "nowhere"); err == nil || !strings.Contains(err.Error(), "unknown_environment") {
		t.Errorf("export --env nowhere = %v, want unknown_environment", err)
	}
}
