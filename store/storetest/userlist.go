package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
)

// testUserLists: a user list's users are stored a row each, byte for byte
// (long IDs, case, odd characters); an update adds and removes users with
// the segment's next version and the versions of the features using it,
// all or nothing; adding a listed user is EConflict and changes nothing;
// deleting the list removes its users.
func testUserLists(t *testing.T, o Opened) {
	ctx := context.Background()
	s := o.Store
	var users []string
	for i := range 1200 { // more than one statement's rows
		users = append(users, fmt.Sprintf("user-%04d", i))
	}
	odd := []string{strings.Repeat("é", feature.MaxUserBytes/2), "Ann", "ann", "a'b\"c;--", "日本"}
	users = append(users, odd...)
	beta := feature.Segment{Key: "beta", Description: "testers", Conditions: []feature.Condition{}, List: true, Size: len(users), Version: 1, CreatedAt: t0, UpdatedAt: t0}
	if err := s.CreateUserList(ctx, beta, segmentVersionOf(beta), users, nil); err != nil {
		t.Fatalf("CreateUserList = %v", err)
	}
	want := slices.Clone(users)
	got, err := s.SegmentUsers(ctx, "beta")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("SegmentUsers (-want +got):\n%s", diff)
	}
	if segs, _ := s.Segments(ctx); len(segs) != 1 || !cmp.Equal(segs[0], beta) {
		t.Errorf("Segments() = %+v, want %+v", segs, beta)
	}

	f := newFeature("checkout")
	f.Rules = []feature.Rule{{Name: "beta", Conditions: []feature.Condition{{Op: feature.OpInSegment, Value: json.RawMessage(`"beta"`)}}, Serve: feature.Serve{Bucket: "treatment"}}}
	create(t, s, f)

	beta2 := beta
	beta2.Version, beta2.UpdatedAt, beta2.Size = 2, t0.Add(time.Hour), beta.Size+1-600
	g := f.Clone()
	g.Version, g.UpdatedAt = 2, t0.Add(time.Hour)
	add, remove := []string{"newcomer"}, users[:600]
	if err := s.UpdateUserList(ctx, beta2, segmentVersionOf(beta2), add, remove, []rollout.Version{versionOf(g)}, nil); err != nil {
		t.Fatalf("UpdateUserList = %v", err)
	}
	want = append(slices.Clone(users[600:]), "newcomer")
	slices.Sort(want)
	got, _ = s.SegmentUsers(ctx, "beta")
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SegmentUsers after the update (-want +got):\n%s", diff)
	}
	if stored, _ := s.Feature(ctx, "checkout"); stored.Version != 2 {
		t.Errorf("after the list's change the feature is at version %d, want 2", stored.Version)
	}

	// Adding a listed user: nothing of the change is written.
	beta3 := beta2
	beta3.Version, beta3.Size = 3, beta2.Size+1
	h := g.Clone()
	h.Version = 3
	err = s.UpdateUserList(ctx, beta3, segmentVersionOf(beta3), []string{"fresh", "newcomer"}, nil, []rollout.Version{versionOf(h)}, nil)
	if feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("UpdateUserList adding a listed user = %v, want EConflict", err)
	}
	if after, _ := s.SegmentUsers(ctx, "beta"); slices.Contains(after, "fresh") || len(after) != len(want) {
		t.Errorf("a refused update left %d users (fresh among them: %v), want the %d before it", len(after), slices.Contains(after, "fresh"), len(want))
	}
	if stored, _ := s.Feature(ctx, "checkout"); stored.Version != 2 {
		t.Errorf("a refused update moved the feature to version %d", stored.Version)
	}
	if _, err := s.SegmentUsers(ctx, "nope"); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("SegmentUsers of no segment = %v, want ENotFound", err)
	}

	// Deleted (once no feature uses it), its users go with it; made
	// again, it starts empty.
	if err := s.ArchiveFeature(ctx, "checkout", 2, audit.Event{Actor: "alice", Kind: audit.Archive, Summary: "archived"}, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSegment(ctx, "beta", 2, audit.Event{Actor: "alice", Kind: audit.SegmentDelete, Subject: "beta", Summary: "segment beta deleted"}, nil); err != nil {
		t.Fatalf("DeleteSegment = %v", err)
	}
	empty := beta
	empty.Size = 0
	if err := s.CreateUserList(ctx, empty, segmentVersionOf(empty), nil, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.SegmentUsers(ctx, "beta"); err != nil || len(got) != 0 {
		t.Errorf("SegmentUsers of the list made again = %d users, %v; want none", len(got), err)
	}
}
