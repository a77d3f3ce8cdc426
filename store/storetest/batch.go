package storetest

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
)

// testBatch: ApplyBatch writes updates and creates of several features in
// one transaction, each with its history entry and commit.
func testBatch(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	a := newFeature("a")
	create(t, s, a)
	rev := mustRevision(t, s)
	a2, b := next(a), newFeature("b")
	va2, vb := versionOf(a2), versionOf(b)
	vb.Comment, va2.Comment = "from the file", "from the file"
	if err := s.ApplyBatch(ctx, []rollout.BatchWrite{{Feature: a2, Version: va2}, {Feature: b, Version: vb, Create: true}}); err != nil {
		t.Fatalf("ApplyBatch(update a, create b) = %v", err)
	}
	wantFeatures(t, s, a2, b)
	wantRevision(t, s, rev+2)
	for key, want := range map[string]rollout.Version{"a": va2, "b": vb} {
		got, err := s.Version(ctx, key, want.Version)
		if err != nil {
			t.Fatalf("Version(%s, %d) = %v", key, want.Version, err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Version(%s, %d) mismatch (-want +got):\n%s", key, want.Version, diff)
		}
	}
	commits, err := s.Commits(ctx, rev, 0)
	if err != nil {
		t.Fatalf("Commits() = %v", err)
	}
	if len(commits) != 2 || commits[0].Key != "a" || commits[1].Key != "b" {
		t.Errorf("Commits(since %d) = %+v, want a then b", rev, commits)
	}
}

// testBatchAllOrNothing: one write of a batch that does not match the store
// (a feature moved on, created meanwhile, or gone) stores nothing of the
// batch, and the error names that feature.
func testBatchAllOrNothing(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	_, a := history(t, s, newFeature("a"), 2) // at version 2
	b := newFeature("b")
	create(t, s, b)
	rev := mustRevision(t, s)
	stale := next(b) // fine: b is at 1
	fromOld := a.Clone()
	fromOld.Description = "written from version 1" // still version 2: expects 1
	moved := []rollout.BatchWrite{
		{Feature: stale, Version: versionOf(stale)},
		{Feature: fromOld, Version: versionOf(fromOld)},
	}
	exists := []rollout.BatchWrite{
		{Feature: stale, Version: versionOf(stale)},
		{Feature: newFeature("a"), Version: versionOf(newFeature("a")), Create: true},
	}
	c := newFeature("c")
	c.Version = 2
	gone := []rollout.BatchWrite{
		{Feature: newFeature("d"), Version: versionOf(newFeature("d")), Create: true},
		{Feature: c, Version: versionOf(c)},
	}
	for _, tc := range []struct {
		name, code, key string
		ws              []rollout.BatchWrite
	}{
		{"a feature moved on", rollout.EConflict, `"a"`, moved},
		{"a created feature exists", rollout.EConflict, `"a"`, exists},
		{"an updated feature does not exist", rollout.ENotFound, `"c"`, gone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.ApplyBatch(ctx, tc.ws)
			wantCode(t, "ApplyBatch()", err, tc.code)
			if err != nil && !strings.Contains(rollout.ErrorMessage(err), tc.key) {
				t.Errorf("ApplyBatch() = %q, want the message to name feature %s", rollout.ErrorMessage(err), tc.key)
			}
			wantFeatures(t, s, a, b)
			wantRevision(t, s, rev)
		})
	}
}

func mustRevision(t *testing.T, s Store) int64 {
	t.Helper()
	rev, err := s.Revision(context.Background())
	if err != nil {
		t.Fatalf("Revision() = %v", err)
	}
	return rev
}
