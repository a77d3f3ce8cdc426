package api_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// TestMetrics sends traffic of every kind and finds it counted in GET
// /metrics with the right labels and values.
func TestMetrics(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	before := s.scrape()
	version0, _ := sample(before, "rollout_snapshot_version")

	ring := s.evaluate("checkout", "user-1")
	for range 3 {
		s.must(200, "GET", "/evaluate?feature=checkout&user=user-1", nil)
	}
	s.must(200, "POST", "/evaluate", map[string]any{"user": "vip", "features": []string{"checkout", "nope"}})
	for range 2 {
		s.must(200, "POST", ofrepFlags+"/killed", ofrepBody("user-1"))
	}
	s.must(200, "POST", ofrepFlags, `{"context":{"targetingKey":"user-1","flags":["paused","nope"]}}`)
	s.must(404, "POST", ofrepFlags+"/nope", ofrepBody("user-1"))
	s.must(404, "GET", "/api/features/nope", nil)
	s.must(404, "GET", "/no/such/path", nil)
	s.must(200, "PATCH", "/api/features/banner", map[string]any{"description": "x"})
	s.must(200, "PATCH", "/api/features/banner?dry_run=true", map[string]any{"description": "y"})
	s.must(200, "POST", "/api/features/banner/buckets", map[string]any{"name": "green"})
	s.must(204, "DELETE", "/api/features/limit", nil)

	fams := s.scrape()
	tests := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"rollout_evaluations_total", []string{"feature", "checkout", "bucket", ring.Bucket, "reason", "ring"}, 3},
		{"rollout_evaluations_total", []string{"feature", "checkout", "bucket", "C", "reason", "override"}, 1},
		{"rollout_evaluations_total", []string{"feature", "killed", "reason", "disabled"}, 2}, // no bucket
		{"rollout_evaluations_total", []string{"feature", "paused", "bucket", "old", "reason", "disabled"}, 1},

		{"rollout_http_requests_total", []string{"method", "GET", "route", "/evaluate", "status", "200"}, 3},
		{"rollout_http_requests_total", []string{"method", "POST", "route", "/evaluate", "status", "200"}, 1},
		{"rollout_http_requests_total", []string{"method", "POST", "route", "/ofrep/v1/evaluate/flags/:key", "status", "200"}, 2},
		{"rollout_http_requests_total", []string{"method", "POST", "route", "/ofrep/v1/evaluate/flags/:key", "status", "404"}, 1},
		{"rollout_http_requests_total", []string{"method", "POST", "route", "/ofrep/v1/evaluate/flags", "status", "200"}, 1},
		{"rollout_http_requests_total", []string{"method", "GET", "route", "/api/features/:key", "status", "404"}, 1},
		{"rollout_http_requests_total", []string{"method", "PATCH", "route", "/api/features/:key", "status", "200"}, 2},
		{"rollout_http_requests_total", []string{"method", "GET", "route", "unmatched", "status", "404"}, 1},
		{"rollout_http_request_duration_seconds", []string{"method", "GET", "route", "/evaluate"}, 3},
		{"rollout_http_request_duration_seconds", []string{"method", "PATCH", "route", "/api/features/:key"}, 2},

		{"rollout_changes_applied_total", []string{"kind", "patch"}, 1}, // the dry run is not counted
		{"rollout_changes_applied_total", []string{"kind", "add_bucket"}, 1},
		{"rollout_changes_applied_total", []string{"kind", "archive"}, 1},

		{"rollout_snapshot_features", nil, 5},
		{"rollout_snapshot_version", nil, version0 + 3},
	}
	for _, tt := range tests {
		got, ok := sample(fams, tt.name, tt.labels...)
		if !ok || got != tt.want {
			t.Errorf("%s%v = %v (found: %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
	if _, ok := sample(fams, "rollout_evaluations_total", "feature", "nope", "bucket", "", "reason", ""); ok {
		t.Errorf("an unknown feature was counted as evaluated")
	}
	if age, ok := sample(fams, "rollout_snapshot_age_seconds"); !ok || age < 0 || age > 60 {
		t.Errorf("rollout_snapshot_age_seconds = %v (found: %v), want the seconds since the last change", age, ok)
	}
	if _, ok := sample(fams, "go_goroutines"); !ok {
		t.Errorf("go_goroutines missing: want the Go runtime's metrics too")
	}
}

// busyStore fails every update as a locked database does.
type busyStore struct{ rollout.Store }

func (busyStore) UpdateFeature(context.Context, feature.Feature, rollout.Version) error {
	return fmt.Errorf("update feature: %w", feature.Errorf(feature.EUnavailable, "the database is busy: try again shortly"))
}

// TestMetricsStoreErrors: failures of the store are counted by operation and
// code; answers such as "not found" are not failures.
func TestMetricsStoreErrors(t *testing.T) {
	s := newServerOver(t, "", api.Options{}, func(st rollout.Store) rollout.Store { return busyStore{st} })
	s.seed()
	s.must(503, "PATCH", "/api/features/banner", map[string]any{"description": "x"})
	s.must(503, "PATCH", "/api/features/banner", map[string]any{"description": "x"})
	s.must(404, "GET", "/api/features/banner/versions/99", nil)

	fams := s.scrape()
	if got, ok := sample(fams, "rollout_store_errors_total", "op", "update_feature", "code", "unavailable"); !ok || got != 2 {
		t.Errorf("rollout_store_errors_total{op=update_feature,code=unavailable} = %v (found: %v), want 2", got, ok)
	}
	if n := len(fams["rollout_store_errors_total"].GetMetric()); n != 1 {
		t.Errorf("rollout_store_errors_total has %d series, want 1: %v", n, fams["rollout_store_errors_total"])
	}
	if _, ok := sample(fams, "rollout_changes_applied_total", "kind", "patch"); ok {
		t.Errorf("a failed change was counted as applied")
	}
}
