package api_test

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// TestChanges writes changes of two features by two actors, some with a
// comment sent in the body, and reads the audit log back through GET
// /api/changes: newest first, filtered by feature and by actor, a page at a
// time by "next", with each version's comment. Bad comments and pages are
// refused.
func TestChanges(t *testing.T) {
	s := newServer(t, "", api.Options{})
	ctx := context.Background()
	two := []feature.Bucket{{Name: "A", Replicas: 5}, {Name: "B", Replicas: 5}}
	s.must(201, "POST", "/api/features", map[string]any{"key": "a", "buckets": two, "comment": "for the spring sale"})
	s.create(feature.Feature{Key: "b", Enabled: true, Salt: "b", Buckets: two})
	s.must(200, "PUT", "/api/features/a/buckets/A", map[string]any{"replicas": 7, "comment": "more A, as agreed"})
	if _, err := s.svc.Change(ctx, "b", change.UpdateBucket("A", ptr(9), nil), rollout.ChangeOptions{Actor: "carol"}); err != nil {
		t.Fatal(err)
	}
	s.must(200, "PATCH", "/api/features/a", map[string]any{"enabled": false, "comment": "incident 42"})

	type entry struct{ Feature, Actor, Comment string }
	read := func(path string) (got []entry, next *string) {
		t.Helper()
		var page struct {
			Changes []struct {
				Feature string `json:"feature"`
				Actor   string `json:"actor"`
				Comment string `json:"comment"`
				Seq     int64  `json:"seq"`
				Config  struct {
					Key string `json:"key"`
				} `json:"config"`
			} `json:"changes"`
			Next *string `json:"next"`
		}
		if err := json.Unmarshal(s.must(200, "GET", path, nil).body, &page); err != nil {
			t.Fatal(err)
		}
		for _, c := range page.Changes {
			if c.Feature != c.Config.Key || c.Seq <= 0 {
				t.Errorf("GET %s: entry of %q with config of %q and seq %d", path, c.Feature, c.Config.Key, c.Seq)
			}
			got = append(got, entry{c.Feature, c.Actor, c.Comment})
		}
		return got, page.Next
	}
	anon := "anonymous"
	all := []entry{{"a", anon, "incident 42"}, {"b", "carol", ""}, {"a", anon, "more A, as agreed"}, {"b", anon, ""}, {"a", anon, "for the spring sale"}}
	for _, tt := range []struct {
		query string
		want  []entry
	}{
		{"", all},
		{"?feature=a", []entry{all[0], all[2], all[4]}},
		{"?actor=carol", []entry{all[1]}},
		{"?feature=b&actor=" + anon, []entry{all[3]}},
		{"?feature=gone", nil},
	} {
		got, next := read("/api/changes" + tt.query)
		if diff := cmp.Diff(tt.want, got); diff != "" || next != nil {
			t.Errorf("GET /api/changes%s: next %v, mismatch (-want +got):\n%s", tt.query, next, diff)
		}
	}

	// Pages of two, filtered, joined up by "next", which keeps the filter.
	var joined []entry
	path := "/api/changes?actor=" + anon + "&limit=2"
	for pages := 0; path != ""; pages++ {
		if pages > 5 {
			t.Fatal("more than 5 pages")
		}
		got, next := read(path)
		joined = append(joined, got...)
		path = ""
		if next != nil {
			path = *next
			if u, _ := url.Parse(path); u.Query().Get("actor") != anon {
				t.Errorf("next = %q: lost the actor filter", path)
			}
		}
	}
	if diff := cmp.Diff([]entry{all[0], all[2], all[3], all[4]}, joined); diff != "" {
		t.Errorf("pages of anonymous's changes mismatch (-want +got):\n%s", diff)
	}

	// The feature's own history carries the comment too.
	var v struct {
		Comment string `json:"comment"`
	}
	json.Unmarshal(s.must(200, "GET", "/api/features/a/versions/2", nil).body, &v)
	if v.Comment != "more A, as agreed" {
		t.Errorf("version 2 of a: comment %q, want %q", v.Comment, "more A, as agreed")
	}

	for _, tt := range []struct {
		body   map[string]any
		status int
	}{
		{map[string]any{"replicas": 8, "comment": strings.Repeat("x", rollout.MaxComment+1)}, 422},
		{map[string]any{"replicas": 8, "comment": "bell\a"}, 422},
		{map[string]any{"replicas": 8, "comment": 3}, 400},
	} {
		if r := s.do("PUT", "/api/features/a/buckets/A", tt.body); r.status != tt.status {
			t.Errorf("PUT with comment %.20v = %d %s, want %d", tt.body["comment"], r.status, r.body, tt.status)
		}
	}
	for _, q := range []string{"?limit=0", "?limit=501", "?before=-1", "?before=x"} {
		if r := s.do("GET", "/api/changes"+q, nil); r.status != 400 {
			t.Errorf("GET /api/changes%s = %d %s, want 400", q, r.status, r.body)
		}
	}
}
