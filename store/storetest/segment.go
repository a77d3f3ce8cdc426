package storetest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
)

func newSegment(key string) rollout.Segment {
	return rollout.Segment{
		Key: key, Description: "staff <all> & more", Version: 1, CreatedAt: t0, UpdatedAt: t0,
		Conditions: []rollout.Condition{{Attribute: "email", Op: rollout.OpEndsWith, Value: json.RawMessage(`"@example.com"`)}},
	}
}

func segmentVersionOf(s rollout.Segment) rollout.SegmentVersion {
	return rollout.SegmentVersion{Version: s.Version, Actor: "ops@example.com", Time: s.UpdatedAt.Truncate(time.Microsecond), Summary: "change", Comment: "why", Config: s}
}

// testSegments: segments are stored with their history; a change of one
// writes the versions of the features given with it in the same
// transaction; one in use cannot be deleted; each change is a commit of
// kind segment.
func testSegments(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	staff := newSegment("staff")
	if err := s.CreateSegment(ctx, staff, segmentVersionOf(staff)); err != nil {
		t.Fatalf("CreateSegment = %v", err)
	}
	if err := s.CreateSegment(ctx, staff, segmentVersionOf(staff)); rollout.ErrorCode(err) != rollout.EConflict {
		t.Errorf("CreateSegment again = %v, want EConflict", err)
	}
	beta := newSegment("beta")
	beta.Conditions = []rollout.Condition{{Attribute: "user", Op: rollout.OpIn, Value: json.RawMessage(`["a","b"]`)}}
	if err := s.CreateSegment(ctx, beta, segmentVersionOf(beta)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Segments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]rollout.Segment{beta, staff}, got); diff != "" {
		t.Errorf("Segments() (-want +got):\n%s", diff)
	}

	// A feature whose rules use staff, with bucket_by: stored as given.
	f := newFeature("checkout")
	f.BucketBy = "org"
	f.Rules = []rollout.Rule{{Name: "staff", Conditions: []rollout.Condition{{Op: rollout.OpInSegment, Value: json.RawMessage(`"staff"`)}}, Serve: rollout.Serve{Bucket: "treatment"}}}
	create(t, s, f)
	if stored, err := s.Feature(ctx, "checkout"); err != nil || !cmp.Equal(stored.Rules, f.Rules) || stored.BucketBy != "org" {
		t.Fatalf("Feature() = %v rules %v by %q, want %v by org", err, stored.Rules, stored.BucketBy, f.Rules)
	}
	rev, _ := s.Revision(ctx)

	staff2 := staff
	staff2.Version, staff2.UpdatedAt = 2, t0.Add(time.Hour)
	staff2.Conditions = append(staff2.Conditions, rollout.Condition{Attribute: "plan", Op: rollout.OpNeq, Value: json.RawMessage(`"free"`)})
	g := f.Clone()
	g.Version, g.UpdatedAt = 2, t0.Add(time.Hour)
	gv := versionOf(g)
	gv.Summary = "segment staff changed"
	if err := s.UpdateSegment(ctx, staff2, segmentVersionOf(staff2), []rollout.Version{gv}); err != nil {
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
	if err := s.UpdateSegment(ctx, staff2, segmentVersionOf(staff2), nil); rollout.ErrorCode(err) != rollout.EConflict {
		t.Errorf("UpdateSegment at a stale version = %v, want EConflict", err)
	}
	staff3 := staff2
	staff3.Version = 3
	if err := s.UpdateSegment(ctx, staff3, segmentVersionOf(staff3), []rollout.Version{gv}); rollout.ErrorCode(err) != rollout.EConflict {
		t.Errorf("UpdateSegment with a feature that moved on = %v, want EConflict", err)
	}
	if got, _ := s.Segments(ctx); len(got) != 2 || got[1].Version != 2 {
		t.Errorf("after refused changes: %v", got)
	}
	missing := newSegment("missing")
	missing.Version = 2
	if err := s.UpdateSegment(ctx, missing, segmentVersionOf(missing), nil); rollout.ErrorCode(err) != rollout.ENotFound {
		t.Errorf("UpdateSegment of no segment = %v, want ENotFound", err)
	}

	vs, err := s.SegmentVersions(ctx, "staff", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]rollout.SegmentVersion{segmentVersionOf(staff2), segmentVersionOf(staff)}, vs); diff != "" {
		t.Errorf("SegmentVersions (-want +got):\n%s", diff)
	}
	if vs, _ := s.SegmentVersions(ctx, "staff", 2, 1); len(vs) != 1 || vs[0].Version != 1 {
		t.Errorf("SegmentVersions below 2 = %v", vs)
	}
	if _, err := s.SegmentVersions(ctx, "nope", 0, 0); rollout.ErrorCode(err) != rollout.ENotFound {
		t.Errorf("SegmentVersions of no segment = %v, want ENotFound", err)
	}

	// In use: not deleted.
	err = s.DeleteSegment(ctx, "staff", 2, rollout.AuditEvent{Actor: "alice", Kind: rollout.AuditSegmentDelete, Subject: "staff", Summary: "segment staff deleted"})
	if rollout.ErrorCode(err) != rollout.EConflict || !strings.Contains(err.Error(), "checkout") {
		t.Errorf("DeleteSegment in use = %v, want EConflict naming checkout", err)
	}
	if err := s.DeleteSegment(ctx, "beta", 7, rollout.AuditEvent{Actor: "alice", Kind: rollout.AuditSegmentDelete, Subject: "beta", Summary: "segment beta deleted"}); rollout.ErrorCode(err) != rollout.EConflict {
		t.Errorf("DeleteSegment at another version = %v, want EConflict", err)
	}
	if err := s.DeleteSegment(ctx, "beta", 1, rollout.AuditEvent{Actor: "alice", Kind: rollout.AuditSegmentDelete, Subject: "beta", Summary: "segment beta deleted"}); err != nil {
		t.Errorf("DeleteSegment = %v", err)
	}
	if err := s.DeleteSegment(ctx, "beta", 1, rollout.AuditEvent{Actor: "alice", Kind: rollout.AuditSegmentDelete, Subject: "beta", Summary: "segment beta deleted"}); rollout.ErrorCode(err) != rollout.ENotFound {
		t.Errorf("DeleteSegment again = %v, want ENotFound", err)
	}
	if got, _ := s.Segments(ctx); len(got) != 1 || got[0].Key != "staff" {
		t.Errorf("after deleting beta: %v", got)
	}
	// Each change of a segment is in the audit trail, with the versions
	// of the features it changed; refused ones are not.
	wantKinds(t, s, rollout.AuditQuery{Ascending: true},
		"segment_create staff", "segment_create beta", "create checkout", "segment_change staff", "change checkout", "segment_delete beta")
	// Made again, it starts a new history.
	if err := s.CreateSegment(ctx, beta, segmentVersionOf(beta)); err != nil {
		t.Fatal(err)
	}
	if vs, _ := s.SegmentVersions(ctx, "beta", 0, 0); len(vs) != 1 {
		t.Errorf("history of beta made again: %v", vs)
	}
}
