package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
)

// TestHistoryPages walks a long history through both history endpoints by
// following "next" from the first page: each page holds at most the limit,
// the Link header agrees with "next", and the pages join up, newest first,
// with nothing missing or repeated. Limits outside 1 to 500 are a 400.
func TestHistoryPages(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.create(rollout.Feature{Key: "long", Enabled: true, Salt: "long", Buckets: []rollout.Bucket{{Name: "A", Replicas: 5}, {Name: "B", Replicas: 5}}})
	const versions = 120
	for i := 2; i <= versions; i++ {
		if _, err := s.svc.Change(context.Background(), "long", rollout.UpdateBucket("A", ptr(5+i%3), nil), rollout.ChangeOptions{}); err != nil {
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
