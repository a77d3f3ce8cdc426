package storetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
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
	if err := s.ApplyBatch(ctx, rollout.Batch{Features: []rollout.BatchWrite{{Feature: a2, Version: va2}, {Feature: b, Version: vb, Create: true}}}); err != nil {
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
		{"a feature moved on", feature.EConflict, `"a"`, moved},
		{"a created feature exists", feature.EConflict, `"a"`, exists},
		{"an updated feature does not exist", feature.ENotFound, `"c"`, gone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.ApplyBatch(ctx, rollout.Batch{Features: tc.ws})
			wantCode(t, "ApplyBatch()", err, tc.code)
			if err != nil && !strings.Contains(feature.ErrorMessage(err), tc.key) {
				t.Errorf("ApplyBatch() = %q, want the message to name feature %s", feature.ErrorMessage(err), tc.key)
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

// testBatchSegments: ApplyBatch writes segments (updates and creates) with
// the features of the batch in one transaction, each with its history
// entry, its audit event and its commit; a segment that moved on, or that
// a create finds there, fails the whole batch, naming it, and nothing is
// stored, audited or committed.
func testBatchSegments(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	staff := newSegment("staff")
	if err := s.CreateSegment(ctx, staff, segmentVersionOf(staff), nil); err != nil {
		t.Fatalf("CreateSegment = %v", err)
	}
	a := newFeature("a")
	create(t, s, a)
	rev := mustRevision(t, s)
	nEvents := len(events(t, s, audit.Query{}))
	staff2 := staff
	staff2.Version, staff2.Description = 2, "staff, from the file"
	staff2.Conditions = []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.org"`)}}
	beta := newSegment("beta")
	a2 := next(a)
	segs := []rollout.SegmentWrite{{Segment: staff2, Version: segmentVersionOf(staff2)}, {Segment: beta, Version: segmentVersionOf(beta), Create: true}}
	if err := s.ApplyBatch(ctx, rollout.Batch{Features: []rollout.BatchWrite{{Feature: a2, Version: versionOf(a2)}}, Segments: segs}); err != nil {
		t.Fatalf("ApplyBatch(update staff, create beta, update a) = %v", err)
	}
	wantFeatures(t, s, a2)
	wantRevision(t, s, rev+3)
	got, err := s.Segments(ctx)
	if err != nil {
		t.Fatalf("Segments() = %v", err)
	}
	if diff := cmp.Diff([]feature.Segment{beta, staff2}, got); diff != "" {
		t.Errorf("Segments() after the batch mismatch (-want +got):\n%s", diff)
	}
	hist, err := s.SegmentVersions(ctx, "staff", 0, 0)
	if err != nil || len(hist) != 2 || hist[0].Version != 2 || hist[0].Config.Description != staff2.Description {
		t.Errorf("SegmentVersions(staff) = %+v, %v; want versions 2 (the batch's) and 1", hist, err)
	}
	es := events(t, s, audit.Query{Ascending: true})
	if len(es) != nEvents+3 {
		t.Fatalf("%d audit events after the batch, want %d: %v", len(es), nEvents+3, kinds(es))
	}
	k := kinds(es[nEvents:])
	if diff := cmp.Diff([]string{string(audit.SegmentChange) + " staff", string(audit.SegmentCreate) + " beta"}, k[:2]); diff != "" || !strings.HasSuffix(k[2], " a") {
		t.Errorf("audit events of the batch = %v; want segment_change staff, segment_create beta, then a's version", k)
	}

	// A segment that moved on, one created meanwhile: nothing of the
	// batch is stored.
	rev = mustRevision(t, s)
	a3 := next(a2)
	staffOld := staff2 // expects version 1: staff is at 2
	staffOld.Description = "written from version 1"
	for _, tc := range []struct {
		name string
		seg  rollout.SegmentWrite
		key  string
	}{
		{"a segment moved on", rollout.SegmentWrite{Segment: staffOld, Version: segmentVersionOf(staffOld)}, `"staff"`},
		{"a created segment exists", rollout.SegmentWrite{Segment: beta, Version: segmentVersionOf(beta), Create: true}, `"beta"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := s.ApplyBatch(ctx, rollout.Batch{Features: []rollout.BatchWrite{{Feature: a3, Version: versionOf(a3)}}, Segments: []rollout.SegmentWrite{tc.seg}})
			wantCode(t, "ApplyBatch()", err, feature.EConflict)
			if err != nil && !strings.Contains(feature.ErrorMessage(err), tc.key) {
				t.Errorf("ApplyBatch() = %q, want the message to name segment %s", feature.ErrorMessage(err), tc.key)
			}
			wantFeatures(t, s, a2)
			wantRevision(t, s, rev)
			if n := len(events(t, s, audit.Query{})); n != nEvents+3 {
				t.Errorf("%d audit events after a refused batch, want %d", n, nEvents+3)
			}
			if got, _ := s.Segments(ctx); !cmp.Equal([]feature.Segment{beta, staff2}, got) {
				t.Errorf("Segments() after a refused batch = %+v", got)
			}
		})
	}
}
