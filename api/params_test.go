package api_test

import (
	"encoding/json"
	"net/url"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/feature"
)

// TestEscapedPathParams: a path parameter reaches its handler unescaped
// whatever the client escaped, so a user ID with a slash is the same user
// in an override's path, in the history's path and in an evaluation.
func TestEscapedPathParams(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.create(feature.Feature{Key: "f", Enabled: true, Salt: "f", Buckets: []feature.Bucket{{Name: "A", Replicas: 5}, {Name: "B", Replicas: 5}}})
	const user = "team/alice"
	for _, path := range []string{"/api/features/f/overrides/team%2Falice", "/api/features/f/overrides/team%2falice"} {
		s.must(200, "PUT", path, map[string]any{"bucket": "B"})
	}
	var f feature.Feature
	if err := json.Unmarshal(s.must(200, "GET", "/api/features/f", nil).body, &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Overrides) != 1 || f.Overrides[user] != "B" {
		t.Fatalf("overrides %v, want only %s → B", f.Overrides, user)
	}
	var ev struct{ Bucket, Reason string }
	if err := json.Unmarshal(s.must(200, "GET", "/evaluate?feature=f&user="+url.QueryEscape(user), nil).body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Bucket != "B" || ev.Reason != "override" {
		t.Errorf("evaluation of %s: %+v, want B by override", user, ev)
	}
	var hist struct {
		User string `json:"user"`
	}
	if err := json.Unmarshal(s.must(200, "GET", "/api/features/f/users/team%2Falice", nil).body, &hist); err != nil {
		t.Fatal(err)
	}
	if hist.User != user {
		t.Errorf("history of team%%2Falice is of user %q, want %q", hist.User, user)
	}
	s.must(200, "DELETE", "/api/features/f/overrides/team%2Falice", nil)
	var after feature.Feature
	if err := json.Unmarshal(s.must(200, "GET", "/api/features/f", nil).body, &after); err != nil {
		t.Fatal(err)
	}
	if len(after.Overrides) != 0 {
		t.Errorf("after DELETE …/overrides/team%%2Falice: overrides %v, want none", after.Overrides)
	}
}
