package storetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// write stores f as a new feature (version 1) or its next version, and
// returns its history entry.
func write(t *testing.T, s Store, f feature.Feature) rollout.Version {
	t.Helper()
	v := versionOf(f)
	var err error
	if f.Version == 1 {
		err = s.CreateFeature(context.Background(), f, v)
	} else {
		err = s.UpdateFeature(context.Background(), f, v)
	}
	if err != nil {
		t.Fatalf("write %q version %d = %v", f.Key, f.Version, err)
	}
	return v
}

// wantHistory checks that every way of reading the history of key gives
// back exactly the versions written (oldest first): one at a time, all at
// once, in pages, and as summaries.
func wantHistory(t *testing.T, s Store, key string, written []rollout.Version) {
	t.Helper()
	ctx := context.Background()
	newest := slices.Clone(written)
	slices.Reverse(newest)
	for _, want := range written {
		got, err := s.Version(ctx, key, want.Version)
		if err != nil {
			t.Fatalf("Version(%q, %d) = %v", key, want.Version, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Version(%q, %d) mismatch (-want +got):\n%s", key, want.Version, diff)
		}
	}
	n := len(written)
	for _, page := range []struct{ before, limit int }{{0, 0}, {0, 1}, {n, 3}, {n - 1, 0}, {3, 2}, {2, 5}, {1, 0}} {
		want := []rollout.Version{}
		for _, v := range newest {
			if (page.before <= 0 || v.Version < page.before) && (page.limit <= 0 || len(want) < page.limit) {
				want = append(want, v)
			}
		}
		got, err := s.Versions(ctx, key, page.before, page.limit)
		if err != nil {
			t.Fatalf("Versions(%q, %d, %d) = %v", key, page.before, page.limit, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Versions(%q, %d, %d) mismatch (-want +got):\n%s", key, page.before, page.limit, diff)
		}
		sums, err := s.VersionSummaries(ctx, key, page.before, page.limit)
		if err != nil {
			t.Fatalf("VersionSummaries(%q, %d, %d) = %v", key, page.before, page.limit, err)
		}
		wantSums := []rollout.Version{}
		for _, v := range want {
			wantSums = append(wantSums, summary(v))
		}
		if diff := cmp.Diff(wantSums, sums); diff != "" {
			t.Errorf("VersionSummaries(%q, %d, %d) mismatch (-want +got):\n%s", key, page.before, page.limit, diff)
		}
		users := map[string]bool{"stranger": true}
		for _, v := range written {
			for u := range v.Config.Overrides {
				users[u] = true
			}
		}
		for user := range users {
			wantUser := []rollout.Version{}
			for _, v := range want {
				w := summary(v)
				if b, ok := v.Config.Overrides[user]; ok {
					w.Config.Overrides = map[string]string{user: b}
				}
				wantUser = append(wantUser, w)
			}
			got, err := s.UserVersions(ctx, key, user, page.before, page.limit)
			if err != nil {
				t.Fatalf("UserVersions(%q, %q, %d, %d) = %v", key, user, page.before, page.limit, err)
			}
			if diff := cmp.Diff(wantUser, got); diff != "" {
				t.Errorf("UserVersions(%q, %q, %d, %d) mismatch (-want +got):\n%s", key, user, page.before, page.limit, diff)
			}
		}
	}
}

// testOverrideHistory: overrides added, moved to another bucket, removed,
// all removed (an empty map and nil), added again and left alone, in two
// features written in turns: every version reads back as written, and a
// feature deleted and created again under the same ID starts afresh.
func testOverrideHistory(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	odd := "ü\u2028 \"<&>\\ \x7f/é"
	steps := []map[string]string{
		{"alice": "treatment", "bob@example.com": "control"},
		{"alice": "treatment", "bob@example.com": "control", "carol": "off"},
		{"alice": "control", "bob@example.com": "control", "carol": "off"},
		{"alice": "control", "carol": "off"},
		{},
		nil,
		{"alice": "treatment", "bob@example.com": "control", odd: "off"},
		{"alice": "treatment", "bob@example.com": "control", odd: "off"},
		{"alice": "treatment", "bob@example.com": "treatment", odd: "off"},
	}
	f, g := newFeature("f"), newFeature("g")
	g.Overrides = map[string]string{"alice": "off", "dave": "control"}
	var fs, gs []rollout.Version
	for i, overrides := range steps {
		if i > 0 {
			f, g = next(f), next(g)
		}
		f.Overrides = maps.Clone(overrides)
		fs = append(fs, write(t, s, f))
		if i%3 == 1 {
			g.Overrides["user"+fmt.Sprint(i)] = "treatment"
		}
		gs = append(gs, write(t, s, g))
	}
	wantFeature(t, s, f)
	wantHistory(t, s, "f", fs)
	wantHistory(t, s, "g", gs)
	wantHistory(t, o.Open(t), "f", fs)

	// Deleted and created again with the same ID: none of the old history
	// shows through.
	if err := deleteFeature(ctx, s, "f", f.Version); err != nil {
		t.Fatalf("deleteFeature(f) = %v", err)
	}
	again := newFeature("f")
	again.Overrides = map[string]string{"erin": "off"}
	first := write(t, s, again)
	again = next(again)
	again.Overrides = map[string]string{"alice": "treatment", "erin": "off"}
	wantHistory(t, s, "f", []rollout.Version{first, write(t, s, again)})
	wantHistory(t, s, "g", gs)
}

// Figures of testHistoryGrowth: the case of the issue that found every
// version storing every override.
const (
	growthOverrides = 3600
	growthEdits     = 220
	// growthBound is how many bytes 220 edits may add to the history: about
	// 4.5 KB per edit. Storing every override in every version took more
	// than 30 MB (SQLite) here, 270 MB with longer user IDs.
	growthBound = 1 << 20
)

// testHistoryGrowth: 220 edits of a feature with 3,600 overrides, mostly of
// its description and a few of its overrides, grow the database by what
// they changed, not by the overrides each time; every version reads back as
// written, and a rollback to the first version restores its overrides.
func testHistoryGrowth(t *testing.T, o Opened) {
	if o.HistoryBytes == nil {
		t.Skip("the store does not say how many bytes its history takes")
	}
	ctx := context.Background()
	s := o.Store
	f := newFeature("big")
	f.Overrides = make(map[string]string, growthOverrides)
	buckets := []string{"control", "treatment", "off"}
	for i := range growthOverrides {
		f.Overrides[fmt.Sprintf("customer-%05d@example.com", i)] = buckets[i%3]
	}
	written := []rollout.Version{write(t, s, f)}
	before := o.HistoryBytes(t)
	for i := 1; i <= growthEdits; i++ {
		g := f
		g.Version++
		g.UpdatedAt = f.UpdatedAt.Add(time.Minute)
		g.Description = fmt.Sprintf("edit %d of the description", i)
		if i%20 == 0 { // now and then, an override added, one moved, one removed
			g.Overrides = maps.Clone(f.Overrides)
			g.Overrides[fmt.Sprintf("new-%d@example.com", i)] = "off"
			g.Overrides[fmt.Sprintf("customer-%05d@example.com", i)] = "off"
			delete(g.Overrides, fmt.Sprintf("customer-%05d@example.com", i+1))
		}
		written = append(written, write(t, s, g))
		f = g
	}
	grown := o.HistoryBytes(t) - before
	t.Logf("%d edits of a feature with %d overrides grew the history by %d bytes", growthEdits, growthOverrides, grown)
	if grown > growthBound {
		t.Errorf("%d edits of a feature with %d overrides grew the history by %d bytes, want at most %d",
			growthEdits, growthOverrides, grown, growthBound)
	}
	wantFeature(t, s, f)
	// Every version as written, a page at a time.
	for hi := len(written); hi > 0; hi -= 25 {
		lo := max(0, hi-25)
		want := slices.Clone(written[lo:hi])
		slices.Reverse(want)
		got, err := s.Versions(ctx, "big", hi+1, 25)
		if err != nil {
			t.Fatalf("Versions(big, %d, 25) = %v", hi+1, err)
		}
		if diff := diffVersions(want, got); diff != "" {
			t.Fatalf("Versions(big, %d, 25) mismatch (-want +got):\n%s", hi+1, diff)
		}
	}
	v, err := s.Version(ctx, "big", 100)
	if err != nil {
		t.Fatalf("Version(big, 100) = %v", err)
	}
	if diff := diffVersions(written[99:100], []rollout.Version{v}); diff != "" {
		t.Errorf("Version(big, 100) mismatch (-want +got):\n%s", diff)
	}

	svc, err := rollout.NewService(ctx, s, nil)
	if err != nil {
		t.Fatalf("NewService() = %v", err)
	}
	res, err := svc.Rollback(ctx, "big", 1, rollout.ChangeOptions{Actor: "ops"})
	if err != nil {
		t.Fatalf("Rollback(big, 1) = %v", err)
	}
	want := written[0].Config.Overrides
	if !maps.Equal(want, res.Feature.Overrides) {
		t.Errorf("Rollback(big, 1) overrides: %d, want the %d of version 1", len(res.Feature.Overrides), len(want))
	}
	for name, read := range map[string]func() (map[string]string, error){
		"Feature(big)": func() (map[string]string, error) { f, err := s.Feature(ctx, "big"); return f.Overrides, err },
		"Version(big, newest)": func() (map[string]string, error) {
			v, err := s.Version(ctx, "big", growthEdits+2)
			return v.Config.Overrides, err
		},
	} {
		got, err := read()
		if err != nil {
			t.Fatalf("%s = %v", name, err)
		}
		if !maps.Equal(want, got) {
			t.Errorf("%s after the rollback to version 1: %d overrides, want the %d of version 1", name, len(got), len(want))
		}
	}
}

// diffVersions is cmp.Diff(want, got) for versions with many overrides,
// which it compares apart (cmp sorts the keys of every map it compares).
func diffVersions(want, got []rollout.Version) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d versions, want %d", len(got), len(want))
	}
	for i := range want {
		if !maps.Equal(want[i].Config.Overrides, got[i].Config.Overrides) || (want[i].Config.Overrides == nil) != (got[i].Config.Overrides == nil) {
			return fmt.Sprintf("version %d: overrides differ (%d, want %d)", want[i].Version, len(got[i].Config.Overrides), len(want[i].Config.Overrides))
		}
		w, g := want[i], got[i]
		w.Config.Overrides, g.Config.Overrides = nil, nil
		if diff := cmp.Diff(w, g); diff != "" {
			return diff
		}
	}
	return ""
}
