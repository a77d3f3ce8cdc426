package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// TestHistoryPages walks a long history through both history endpoints by
// following "next" from the first page: each page holds at most the limit,
// the Link header agrees with "next", and the pages join up, newest first,
// with nothing missing or repeated. Limits outside 1 to 500 are a 400.
func TestHistoryPages(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.create(feature.Feature{Key: "long", Enabled: true, Salt: "long", Buckets: []feature.Bucket{{Name: "A", Replicas: 5}, {Name: "B", Replicas: 5}}})
	const versions = 120
	for i := 2; i <= versions; i++ {
		if _, err := s.svc.Change(context.Background(), "long", change.UpdateBucket("A", ptr(5+i%3), nil), rollout.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, base := range []string{"/api/features/long/versions", "/api/features/long/users/user%2F1"} {
		for _, tt := range []struct {
			query string
			pages []int // versions per page
		}{
			{"", []int{50, 50, 20}},
			{"?limit=7&before=20", []int{7, 7, 5}},
			{"?limit=500", []int{120}},
			{"?limit=120", []int{120}},
			{"?limit=119", []int{119, 1}},
		} {
			var sizes []int
			want := versions
			if strings.Contains(tt.query, "before=20") {
				want = 19
			}
			for path := base + tt.query; ; {
				r := s.must(200, "GET", path, nil)
				var page struct {
					Versions []struct {
						Version int `json:"version"`
					} `json:"versions"`
					Next *string `json:"next"`
				}
				if err := json.Unmarshal(r.body, &page); err != nil {
					t.Fatal(err)
				}
				sizes = append(sizes, len(page.Versions))
				for _, v := range page.Versions {
					if v.Version != want {
						t.Fatalf("GET %s: version %d, want %d", path, v.Version, want)
					}
					want--
				}
				link := r.header.Get("Link")
				if page.Next == nil {
					if link != "" {
						t.Errorf("GET %s: Link %q on the last page", path, link)
					}
					break
				}
				if wantLink := "<" + *page.Next + `>; rel="next"`; link != wantLink {
					t.Errorf("GET %s: Link = %q, want %q", path, link, wantLink)
				}
				if len(sizes) > 30 {
					t.Fatalf("GET %s%s: more than 30 pages", base, tt.query)
				}
				path = *page.Next
			}
			if want != 0 || fmt.Sprint(sizes) != fmt.Sprint(tt.pages) {
				t.Errorf("GET %s%s: pages of %v down to version %d, want %v down to 0", base, tt.query, sizes, want+1, tt.pages)
			}
		}
		for _, q := range []string{"?limit=501", "?limit=0", "?limit=-1", "?limit=x", "?limit=1e3", "?before=-1"} {
			r := s.do("GET", base+q, nil)
			if msg, _ := r.json(t)["error"].(map[string]any)["message"].(string); r.status != 400 || msg == "" {
				t.Errorf("GET %s%s = %d %s, want 400 with a message", base, q, r.status, r.body)
			}
		}
	}
	if msg := s.do("GET", "/api/features/long/versions?limit=501", nil).json(t)["error"].(map[string]any)["message"]; !strings.Contains(msg.(string), "from 1 to 500") {
		t.Errorf("limit=501 error = %q, want it to give the range", msg)
	}
}

func ptr[T any](v T) *T { return &v }

// bigFeature creates key with n overrides and edits its description edits
// times, as the issue did (3,600 overrides, 220 edits).
func bigFeature(t *testing.T, svc *rollout.Service, key string, n, edits int) {
	t.Helper()
	ctx := context.Background()
	f := feature.Feature{Key: key, Enabled: true, Salt: key, Buckets: []feature.Bucket{{Name: "A", Replicas: 50}, {Name: "B", Replicas: 50}}, Overrides: map[string]string{}}
	for i := range n {
		f.Overrides[fmt.Sprintf("customer-%05d@example.com", i)] = []string{"A", "B"}[i%2]
	}
	if _, err := svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range edits {
		d := fmt.Sprintf("edit %d", i+1)
		if _, err := svc.Change(ctx, key, change.Patch(&d, nil, nil), rollout.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHistoryListsSummaries: the history of a feature with 3,600 overrides
// edited 120 times lists in one page of ?limit=500 as summaries, far below
// the byte bound (it was 121 copies of the overrides, 14 MB), in the
// versions list and in the audit log; one version still has them all.
func TestHistoryListsSummaries(t *testing.T) {
	s := newServer(t, "", api.Options{})
	const overrides, edits = 3600, 120
	bigFeature(t, s.svc, "big", overrides, edits)
	for _, tt := range []struct{ path, list string }{
		{"/api/features/big/versions?limit=500", "versions"},
		{"/api/changes?limit=500", "changes"},
		{"/api/changes?feature=big&limit=500", "changes"},
	} {
		r := s.must(200, "GET", tt.path, nil)
		t.Logf("GET %s: %d bytes", tt.path, len(r.body))
		if len(r.body) > api.MaxHistoryBytes {
			t.Errorf("GET %s: %d bytes, want at most %d", tt.path, len(r.body), api.MaxHistoryBytes)
		}
		var page map[string]any
		if err := json.Unmarshal(r.body, &page); err != nil {
			t.Fatal(err)
		}
		entries := page[tt.list].([]any)
		if len(entries) != edits+1 || page["next"] != nil {
			t.Fatalf("GET %s: %d entries, next %v; want %d, no next", tt.path, len(entries), page["next"], edits+1)
		}
		for i, e := range entries {
			e := e.(map[string]any)
			config := e["config"].(map[string]any)
			if _, ok := config["overrides"]; ok || e["override_count"] != float64(overrides) || e["version"] != float64(edits+1-i) || config["buckets"] == nil {
				t.Fatalf("GET %s: entry %d = version %v, override_count %v, config keys %v; want version %d, %d overrides counted, not listed",
					tt.path, i, e["version"], e["override_count"], keys(config), edits+1-i, overrides)
			}
		}
	}
	v := s.must(200, "GET", "/api/features/big/versions/1", nil).json(t)
	if got := len(v["config"].(map[string]any)["overrides"].(map[string]any)); got != overrides || v["override_count"] != float64(overrides) {
		t.Errorf("GET …/versions/1: %d overrides (override_count %v), want %d", got, v["override_count"], overrides)
	}
	if n := len(v["report"].(map[string]any)["override_changes"].([]any)); n != overrides {
		t.Errorf("GET …/versions/1: %d override changes in the report, want %d", n, overrides)
	}
	// The list counts the report's override changes instead.
	r := s.must(200, "GET", "/api/features/big/versions?before=2", nil).json(t)
	first := r["versions"].([]any)[0].(map[string]any)["report"].(map[string]any)
	if _, ok := first["override_changes"]; ok || first["override_change_count"] != float64(overrides) {
		t.Errorf("GET …/versions?before=2: report %v, want override_change_count %d and no list", keys(first), overrides)
	}
}

// TestHistoryPagesByBytes: versions too large for one answer (20 buckets of
// 8 KB values each) end a page early, with "next", though the limit would
// take them all; following "next" lists each version once, newest first.
func TestHistoryPagesByBytes(t *testing.T) {
	s := newServer(t, "", api.Options{})
	ctx := context.Background()
	value := json.RawMessage(`"` + strings.Repeat("v", feature.MaxValueBytes-2) + `"`)
	f := feature.Feature{Key: "wide", Enabled: true}
	for i := range 20 {
		f.Buckets = append(f.Buckets, feature.Bucket{Name: fmt.Sprintf("b%d", i), Replicas: 1, Value: value})
	}
	s.create(f)
	const versions = 12
	for i := 2; i <= versions; i++ {
		d := fmt.Sprintf("edit %d", i)
		if _, err := s.svc.Change(ctx, "wide", change.Patch(&d, nil, nil), rollout.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct{ first, list string }{
		{"/api/features/wide/versions?limit=500", "versions"},
		{"/api/changes?limit=500", "changes"},
	} {
		want, pages := versions, 0
		for path := tt.first; path != ""; pages++ {
			r := s.must(200, "GET", path, nil)
			var page map[string]any
			if err := json.Unmarshal(r.body, &page); err != nil {
				t.Fatal(err)
			}
			entries := page[tt.list].([]any)
			if len(r.body) > api.MaxHistoryBytes+4<<10 || len(entries) == 0 {
				t.Fatalf("GET %s: %d bytes, %d entries; want at most %d bytes, at least one entry", path, len(r.body), len(entries), api.MaxHistoryBytes+4<<10)
			}
			for _, e := range entries {
				if got := e.(map[string]any)["version"]; got != float64(want) {
					t.Fatalf("GET %s: version %v, want %d", path, got, want)
				}
				want--
			}
			next, _ := page["next"].(string)
			if link := r.header.Get("Link"); next != "" && link != "<"+next+`>; rel="next"` {
				t.Errorf("GET %s: Link %q, next %q", path, link, next)
			}
			path = next
		}
		if want != 0 || pages < 2 {
			t.Errorf("GET %s and its next pages: %d pages down to version %d, want more than one page down to version 1", tt.first, pages, want+1)
		}
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
