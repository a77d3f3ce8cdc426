package api_test

import (
	"context"
	"maps"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
)

// TestNULUserRefused: a user ID holding a NUL byte, which PostgreSQL cannot
// store, is refused with a 4xx on every path that takes one, and no
// override is stored.
func TestNULUserRefused(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	before := s.versions("checkout")
	for _, tt := range []struct {
		method, path string
		body         any
		want         int
	}{
		{"GET", "/evaluate?feature=checkout&user=a%00b", nil, 422},
		{"POST", "/evaluate", `{"user":"a\u0000b","features":["checkout"]}`, 422},
		{"POST", "/ofrep/v1/evaluate/flags/checkout", `{"context":{"targetingKey":"a\u0000b"}}`, 400},
		{"POST", "/ofrep/v1/evaluate/flags", `{"context":{"targetingKey":"a\u0000b"}}`, 400},
		{"PUT", "/api/features/checkout/overrides/a%00b", `{"bucket":"A"}`, 422},
		{"POST", "/api/features", `{"key":"nul","buckets":[{"name":"A"}],"overrides":{"a\u0000b":"A"}}`, 422},
		{"GET", "/api/features/checkout/users/a%00b", nil, 422},
	} {
		r := s.do(tt.method, tt.path, tt.body)
		if r.status != tt.want || !strings.Contains(string(r.body), "NUL") {
			t.Errorf("%s %s %v = %d %s, want %d naming the NUL byte", tt.method, tt.path, tt.body, r.status, r.body, tt.want)
		}
	}
	if got := s.versions("checkout"); got != before {
		t.Errorf("checkout has %d versions after the refusals, want %d", got, before)
	}
	if got := s.versions("nul"); got != 0 {
		t.Errorf("feature nul has %d versions, want none", got)
	}
}

// TestBucketValueDepth: a bucket value nested deeper than
// feature.MaxValueDepth is refused with a 4xx on create, add and update;
// one at the limit is accepted.
func TestBucketValueDepth(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	nested := func(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	deep, limit := nested(65), nested(64)
	for _, tt := range []struct {
		method, path, body string
	}{
		{"POST", "/api/features", `{"key":"deep","buckets":[{"name":"A","value":` + deep + `}]}`},
		{"POST", "/api/features/checkout/buckets", `{"name":"D","replicas":3,"value":` + deep + `}`},
		{"PUT", "/api/features/checkout/buckets/A", `{"value":` + deep + `}`},
		{"POST", "/api/features", `{"key":"deep","buckets":[{"name":"A","value":{"a":` + strings.Repeat(`{"a":`, 64) + `1` + strings.Repeat("}", 65) + `}]}`},
	} {
		r := s.do(tt.method, tt.path, tt.body)
		if r.status != 422 || !strings.Contains(string(r.body), "nests arrays and objects") {
			t.Errorf("%s %s (value 65 deep) = %d %s, want 422 naming the depth", tt.method, tt.path, r.status, r.body)
		}
	}
	s.must(201, "POST", "/api/features", `{"key":"deep","buckets":[{"name":"A","value":`+limit+`}]}`)
}

// TestRepeatedKeysRefused: a request body whose object repeats a key, or
// (in the request's own fields) names one field twice in different case,
// is refused with 400 on every route that reads a body, nested objects
// included, and changes nothing; keys that are data (overrides' user IDs,
// bucket values) may differ in case.
func TestRepeatedKeysRefused(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	versions := func() map[string]int {
		out := map[string]int{}
		for _, k := range []string{"checkout", "dark-mode", "banner", "g"} {
			out[k] = s.versions(k)
		}
		return out
	}
	before := versions()
	for _, tt := range []struct{ method, path, body string }{
		{"DELETE", "/api/features/checkout", `{"dry_run":true,"Dry_Run":false}`},
		{"DELETE", "/api/features/checkout", `{"dry_run":true,"dry_run":false}`},
		{"PUT", "/api/features/checkout/overrides/vip", `{"bucket":"B","max_churn":0,"max_churn":1}`},
		{"PUT", "/api/features/checkout/overrides/vip", `{"bucket":"B","max_churn":0,"MAX_CHURN":1}`},
		{"PATCH", "/api/features/checkout", `{"enabled":false,"Enabled":true}`},
		{"PATCH", "/api/features/checkout", `{"descr\u0069ption":"a","description":"b"}`},
		{"POST", "/api/features/checkout/buckets", `{"name":"D","replicas":3,"Replicas":300}`},
		{"PUT", "/api/features/checkout/buckets/A", `{"replicas":3,"replicas":300}`},
		{"PUT", "/api/features/checkout/buckets", `{"buckets":[{"name":"A","replicas":3},{"name":"B","replicas":3,"NAME":"C"}]}`},
		{"POST", "/api/features/checkout/reshuffle", `{"dry_run":true,"DRY_RUN":false}`},
		{"POST", "/api/features/checkout/rollback", `{"version":1,"version":1}`},
		{"POST", "/api/features/checkout/preview", `{"buckets":[{"name":"A","name":"B"}]}`},
		{"POST", "/api/features", `{"key":"g","Key":"h","buckets":[{"name":"A"}]}`},
		{"POST", "/api/features", `{"key":"g","buckets":[{"name":"A"}],"overrides":{"u":"A","u":"A"}}`},
		{"POST", "/api/features", `{"key":"g","buckets":[{"name":"A","value":{"a":1,"a":2}}]}`},
		{"POST", "/api/features", `{"key":"g","buckets":[{"name":"A","value":[{"x":{"a":1,"a":2}}]}]}`},
		{"POST", "/api/features/dark-mode/ramps", `{"bucket":"on","steps":[1],"max_churn":0,"max_churn":1}`},
		{"POST", "/api/features/dark-mode/plan", `{"targets":{"on":0.5,"on":0.6}}`},
		{"POST", "/evaluate", `{"user":"u","user":"v"}`},
		{"POST", "/evaluate", `{"user":"u","User":"v"}`},
		{"POST", "/evaluate", `{"features":["checkout"],"user":"u","features":["banner"]}`},
		{"POST", "/ofrep/v1/evaluate/flags/checkout", `{"context":{"targetingKey":"u","targetingKey":"v"}}`},
		{"POST", "/ofrep/v1/evaluate/flags", `{"context":{"targetingKey":"u"},"context":{"targetingKey":"v"}}`},
		{"POST", "/ofrep/v1/evaluate/flags", `{"context":{"targetingKey":"u","plan":{"tier":1,"tier":2}}}`},
	} {
		r := s.do(tt.method, tt.path, tt.body)
		if r.status != 400 || !strings.Contains(string(r.body), "twice") && !strings.Contains(string(r.body), "only in case") {
			t.Errorf("%s %s %s = %d %s, want 400 naming the repeated key", tt.method, tt.path, tt.body, r.status, r.body)
		}
	}
	if got := versions(); !maps.Equal(got, before) {
		t.Errorf("versions after the refusals = %v, want %v", got, before)
	}
	if rs := s.must(200, "GET", "/api/ramps", nil); strings.Contains(string(rs.body), `"id"`) {
		t.Errorf("a refused ramp was stored: %s", rs.body)
	}
	// Data may differ in case: two users, and a value's own keys.
	s.must(201, "POST", "/api/features", `{"key":"g","buckets":[{"name":"A","value":{"a":1,"A":2}}],"overrides":{"Alice":"A","alice":"A"}}`)
	s.must(200, "POST", "/ofrep/v1/evaluate/flags/g", `{"context":{"targetingKey":"u","TargetingKey":"v","plan":{"a":1,"A":2}}}`)
}

// TestMetricsForgetDeletedFeatures: the evaluation series of a deleted
// feature leave the metrics, whether it was deleted through this API or
// elsewhere (here, the service, as another instance's change arrives), and
// a feature made again under the same key counts from zero.
func TestMetricsForgetDeletedFeatures(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	evaluations := func(feature string) (total float64, series int) {
		fam := s.scrape()["rollout_evaluations_total"]
		if fam == nil {
			return 0, 0
		}
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "feature" && l.GetValue() == feature {
					total += m.GetCounter().GetValue()
					series++
				}
			}
		}
		return total, series
	}
	for _, key := range []string{"checkout", "banner", "dark-mode"} {
		for _, u := range []string{"u1", "u2", "vip"} {
			s.must(200, "GET", "/evaluate?feature="+key+"&user="+u, nil)
		}
		if total, _ := evaluations(key); total != 3 {
			t.Fatalf("%s: %v evaluations counted, want 3", key, total)
		}
	}
	s.must(204, "DELETE", "/api/features/checkout", nil)
	if _, err := s.svc.Archive(context.Background(), "banner", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"checkout", "banner"} {
		if total, series := evaluations(key); series != 0 {
			t.Errorf("deleted %s still has %d series (%v evaluations)", key, series, total)
		}
	}
	if total, _ := evaluations("dark-mode"); total != 3 {
		t.Errorf("dark-mode: %v evaluations counted after other features' deletion, want 3", total)
	}
	s.must(204, "DELETE", "/api/features/checkout?purge=true", nil)
	s.must(201, "POST", "/api/features", `{"key":"checkout","buckets":[{"name":"A"}]}`)
	s.must(200, "GET", "/evaluate?feature=checkout&user=u1", nil)
	if total, series := evaluations("checkout"); total != 1 || series != 1 {
		t.Errorf("checkout made again: %v evaluations in %d series, want 1 in 1", total, series)
	}
}
