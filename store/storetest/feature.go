package storetest

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

func testFeaturesSortedAndEmpty(t *testing.T, o Opened) {
	s := o.Store
	got, err := s.Features(context.Background())
	if err != nil {
		t.Fatalf("Features() = %v", err)
	}
	if got == nil || len(got) != 0 {
		t.Fatalf("Features() of an empty database = %#v, want empty non-nil", got)
	}
	for _, k := range []string{"zeta", "alpha", "mid"} {
		create(t, s, newFeature(k))
	}
	fs, err := s.Features(context.Background())
	if err != nil {
		t.Fatalf("Features() = %v", err)
	}
	var keys []string
	for _, f := range fs {
		keys = append(keys, f.Key)
	}
	if diff := cmp.Diff([]string{"alpha", "mid", "zeta"}, keys); diff != "" {
		t.Errorf("Features() keys mismatch (-want +got):\n%s", diff)
	}
}

func testCreateAssignsID(t *testing.T, o Opened) {
	s := o.Store
	f := newFeature("noid")
	f.ID = ""
	create(t, s, f)
	got := mustFeature(t, s, "noid")
	if len(got.ID) != 36 {
		t.Errorf("Feature(noid).ID = %q, want a UUID", got.ID)
	}
	v, err := s.Version(context.Background(), "noid", 1)
	if err != nil {
		t.Fatalf("Version(noid, 1) = %v", err)
	}
	if v.Config.ID != got.ID {
		t.Errorf("Version(noid, 1).Config.ID = %q, want %q", v.Config.ID, got.ID)
	}
}

func testDeleteAndCreateAgain(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	old := newFeature("again")
	create(t, s, old)
	if err := deleteFeature(ctx, s, "again", 1); err != nil {
		t.Fatalf("deleteFeature() = %v", err)
	}
	fresh := newFeature("again")
	fresh.ID = "fresh-id"
	create(t, s, fresh)
	// A change made to the deleted feature at version 1 must not land on the
	// new one, also at version 1.
	g := next(old)
	err := s.UpdateFeature(ctx, g, versionOf(g))
	wantCode(t, "UpdateFeature(deleted incarnation)", err, feature.EConflict)
}

func testVersionsPaged(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	all, _ := history(t, s, newFeature("hist"), 7)
	newest := func(nums ...int) []rollout.Version {
		out := []rollout.Version{}
		for _, n := range nums {
			out = append(out, all[n-1])
		}
		return out
	}
	tests := []struct {
		before, limit int
		want          []rollout.Version
	}{
		{0, 0, newest(7, 6, 5, 4, 3, 2, 1)},
		{0, 3, newest(7, 6, 5)},
		{5, 3, newest(4, 3, 2)},
		{2, 3, newest(1)},
		{1, 3, newest()},
		{100, 2, newest(7, 6)},
		{-1, -1, newest(7, 6, 5, 4, 3, 2, 1)},
		{4, 0, newest(3, 2, 1)},
	}
	for _, tt := range tests {
		got, err := s.Versions(ctx, "hist", tt.before, tt.limit)
		if err != nil {
			t.Fatalf("Versions(hist, %d, %d) = %v", tt.before, tt.limit, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Versions(hist, %d, %d) mismatch (-want +got):\n%s", tt.before, tt.limit, diff)
		}
	}

	// Paging through with before = last version seen gives every entry once.
	var paged []rollout.Version
	for before := 0; ; {
		page, err := s.Versions(ctx, "hist", before, 2)
		if err != nil {
			t.Fatalf("Versions(hist, %d, 2) = %v", before, err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		before = page[len(page)-1].Version
	}
	if diff := cmp.Diff(newest(7, 6, 5, 4, 3, 2, 1), paged); diff != "" {
		t.Errorf("paged Versions mismatch (-want +got):\n%s", diff)
	}

	_, err := s.Versions(ctx, "nope", 0, 0)
	wantCode(t, "Versions(nope)", err, feature.ENotFound)
}
