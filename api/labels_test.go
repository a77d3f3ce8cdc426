package api_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/feature"
)

// TestTagsAndOwner: creation and PATCH set a feature's tags and owner,
// alone or with the other fields of a PATCH, and bad ones are refused with
// a 422 that changes nothing.
func TestTagsAndOwner(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.must(201, "POST", "/api/features", map[string]any{"key": "f", "buckets": []any{map[string]any{"name": "A"}},
		"tags": []string{"web", "checkout"}, "owner": "alice@example.com"})
	read := func() feature.Feature {
		var f feature.Feature
		if err := json.Unmarshal([]byte(s.must(200, "GET", "/api/features/f", nil).body), &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	if f := read(); !slices.Equal(f.Tags, []string{"checkout", "web"}) || f.Owner != "alice@example.com" {
		t.Fatalf("created with tags %q, owner %q; want [checkout web], alice@example.com", f.Tags, f.Owner)
	}

	s.must(200, "PATCH", "/api/features/f", map[string]any{"tags": []string{"q4"}})
	if f := read(); !slices.Equal(f.Tags, []string{"q4"}) || f.Owner != "alice@example.com" || f.Version != 2 {
		t.Fatalf("after PATCH tags: tags %q, owner %q, version %d; want [q4], alice@example.com, 2", f.Tags, f.Owner, f.Version)
	}
	s.must(200, "PATCH", "/api/features/f", map[string]any{"owner": "team-growth", "description": "d"})
	if f := read(); f.Owner != "team-growth" || f.Description != "d" || !slices.Equal(f.Tags, []string{"q4"}) {
		t.Fatalf("after PATCH owner and description: %+v", f)
	}
	vs, err := s.svc.Versions(t.Context(), "f", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got := vs[0].Summary; !strings.Contains(got, "description changed") || !strings.Contains(got, "owner set to team-growth") {
		t.Errorf("summary of the PATCH = %q, want the description and the owner", got)
	}
	s.must(200, "PATCH", "/api/features/f", map[string]any{"tags": []string{}, "owner": ""})
	if f := read(); len(f.Tags) != 0 || f.Owner != "" {
		t.Fatalf("after clearing: tags %q, owner %q", f.Tags, f.Owner)
	}

	many := make([]string, feature.MaxTags+1)
	for i := range many {
		many[i] = "t" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	bad := []map[string]any{
		{"tags": many},
		{"tags": []string{"Upper"}},
		{"tags": []string{"a b"}},
		{"tags": []string{strings.Repeat("a", feature.MaxTagBytes+1)}},
		{"tags": []string{"dup", "dup"}},
		{"tags": []string{""}},
		{"owner": strings.Repeat("o", feature.MaxOwnerBytes+1)},
		{"owner": "line\nbreak"},
		{"owner": " padded"},
	}
	before := read()
	for _, body := range bad {
		s.must(422, "PATCH", "/api/features/f", body)
		s.must(422, "POST", "/api/features", map[string]any{"key": "g", "buckets": []any{map[string]any{"name": "A"}}, "tags": body["tags"], "owner": body["owner"]})
	}
	if f := read(); f.Version != before.Version {
		t.Errorf("refused PATCHes made version %d, want %d", f.Version, before.Version)
	}
}
