package storetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
)

func newSegment(key string) feature.Segment {
	return feature.Segment{
		Key: key, Description: "staff <all> & more", Version: 1, CreatedAt: t0, UpdatedAt: t0,
		Conditions: []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.com"`)}},
	}
}

func segmentVersionOf(s feature.Segment) feature.SegmentVersion {
	return feature.SegmentVersion{Version: s.Version, Actor: "ops@example.com", Time: s.UpdatedAt.Truncate(time.Microsecond), Summary: "change", Comment: "why", Config: s}
}

// testSegments: segments are stored with their history; a change of one
// writes the versions of the features given with it in the same
// transaction; one in use cannot be deleted; each change is a commit of
// kind segment.
func testSegments(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	staff := newSegment("staff")
	if err := s.CreateSegment(ctx, staff, segmentVersionOf(staff), nil); err != nil {
		t.Fatalf("CreateSegment = %v", err)
	}
	if err := s.CreateSegment(ctx, staff, segmentVersionOf(staff), nil); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("CreateSegment again = %v, want EConflict", err)
	}
	beta := newSegment("beta")
	beta.Conditions = []feature.Condition{{Attribute: "user", Op: feature.OpIn, Value: json.RawMessage(`["a","b"]`)}}
	if err := s.CreateSegment(ctx, beta, segmentVersionOf(beta), nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.Segments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]feature.Segment{beta, staff}, got); diff != "" {
		t.Errorf("Segments() (-want +got):\n%s", diff)
	}

	// A feature whose rules use staff, with bucket_by: stored as given.
	f := newFeature("checkout")
	f.BucketBy = "org"
	f.Rules = []feature.Rule{{Name: "staff", Conditions: []feature.Condition{{Op: feature.OpInSegment, Value: json.RawMessage(`"staff"`)}}, Serve: feature.Serve{Bucket: "treatment"}}}
	create(t, s, f)
	if stored, err := s.Feature(ctx, "checkout"); err != nil || !cmp.Equal(stored.Rules, f.Rules) || stored.BucketBy != "org" {
		t.Fatalf("Feature() = %v rules %v by %q, want %v by org", err, stored.Rules, stored.BucketBy, f.Rules)
	}
	rev, _ := s.Revision(ctx)

	staff2 := staff
	staff2.Version, staff2.UpdatedAt = 2, t0.Add(time.Hour)
	staff2.Conditions = append(staff2.Conditions, feature.Condition{Attribute: "plan", Op: feature.OpNeq, Value: json.RawMessage(`"free"`)})
	g := f.Clone()
	g.Version, g.UpdatedAt = 2, t0.Add(time.Hour)
	gv := versionOf(g)
	gv.Summary = "segment staff changed"
	if err := s.UpdateSegment(ctx, staff2, segmentVersionOf(staff2), []rollout.Version{gv}, nil); err != nil {
		t.Fatalf("UpdateSegment = %v", err)
	}
	if stored, _ := s.Feature(ctx, "checkout"); stored.Version != 2 {
		t.Errorf("after the segment's change the feature is at version %d, want 2", stored.Version)
	}
	commits, err := s.Commits(ctx, rev, 0)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []string{}
	for _, c := range commits {
		kinds = append(kinds, string(c.Kind)+" "+c.Key)
	}
	if strings.Join(kinds, ", ") != "feature checkout, segment staff" {
		t.Errorf("commits of the segment's change: %v, want the feature's then the segment's", kinds)
	}
	// A stale version, or a feature that moved on, writes nothing.
	if err := s.UpdateSegment(ctx, staff2, segmentVersionOf(staff2), nil, nil); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("UpdateSegment at a stale version = %v, want EConflict", err)
	}
	staff3 := staff2
	staff3.Version = 3
	if err := s.UpdateSegment(ctx, staff3, segmentVersionOf(staff3), []rollout.Version{gv}, nil); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("UpdateSegment with a feature that moved on = %v, want EConflict", err)
	}
	if got, _ := s.Segments(ctx); len(got) != 2 || got[1].Version != 2 {
		t.Errorf("after refused changes: %v", got)
	}
	missing := newSegment("missing")
	missing.Version = 2
	if err := s.UpdateSegment(ctx, missing, segmentVersionOf(missing), nil, nil); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("UpdateSegment of no segment = %v, want ENotFound", err)
	}

	vs, err := s.SegmentVersions(ctx, "staff", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]feature.SegmentVersion{segmentVersionOf(staff2), segmentVersionOf(staff)}, vs); diff != "" {
		t.Errorf("SegmentVersions (-want +got):\n%s", diff)
	}
	if vs, _ := s.SegmentVersions(ctx, "staff", 2, 1); len(vs) != 1 || vs[0].Version != 1 {
		t.Errorf("SegmentVersions below 2 = %v", vs)
	}
	if _, err := s.SegmentVersions(ctx, "nope", 0, 0); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("SegmentVersions of no segment = %v, want ENotFound", err)
	}

	// In use: not deleted.
	err = s.DeleteSegment(ctx, "staff", 2, audit.Event{Actor: "alice", Kind: audit.SegmentDelete, Subject: "staff", Summary: "segment staff deleted"}, nil)
	if feature.ErrorCode(err) != feature.EConflict || !strings.Contains(err.Error(), "checkout") {
		t.Errorf("DeleteSegment in use = %v, want EConflict naming checkout", err)
	}
	if err := s.DeleteSegment(ctx, "beta", 7, audit.Event{Actor: "alice", Kind: audit.SegmentDelete, Subject: "beta", Summary: "segment beta deleted"}, nil); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("DeleteSegment at another version = %v, want EConflict", err)
	}
	if err := s.DeleteSegment(ctx, "beta", 1, audit.Event{Actor: "alice", Kind: audit.SegmentDelete, Subject: "beta", Summary: "segment beta deleted"}, nil); err != nil {
		t.Errorf("DeleteSegment = %v", err)
	}
	if err := s.DeleteSegment(ctx, "beta", 1, audit.Event{Actor: "alice", Kind: audit.SegmentDelete, Subject: "beta", Summary: "segment beta deleted"}, nil); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("DeleteSegment again = %v, want ENotFound", err)
	}
	if got, _ := s.Segments(ctx); len(got) != 1 || got[0].Key != "staff" {
		t.Errorf("after deleting beta: %v", got)
	}
	// Each change of a segment is in the audit trail, with the versions
	// of the features it changed; refused ones are not.
	wantKinds(t, s, audit.Query{Ascending: true},
		"segment_create staff", "segment_create beta", "create checkout", "segment_change staff", "change checkout", "segment_delete beta")
	// Made again, it starts a new history.
	if err := s.CreateSegment(ctx, beta, segmentVersionOf(beta), nil); err != nil {
		t.Fatal(err)
	}
	if vs, _ := s.SegmentVersions(ctx, "beta", 0, 0); len(vs) != 1 {
		t.Errorf("history of beta made again: %v", vs)
	}
}
