package api_test

import (
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
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
// rollout.MaxValueDepth is refused with a 4xx on create, add and update;
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
