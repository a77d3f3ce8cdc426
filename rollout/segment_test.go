package rollout_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// TestSegmentChangeCatchesUp: an instance whose snapshot lags behind a
// change of a feature that uses a segment still changes the segment: the
// store refuses the stale feature version, the instance catches up with
// the feed and writes the segment's change on the feature as it is now.
func TestSegmentChangeCatchesUp(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rollout.db")
	open := func() *rollout.Service {
		db, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		svc, err := rollout.NewService(ctx, db, nil)
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	a := open()
	staff := feature.Segment{Key: "staff", Conditions: []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.com"`)}}}
	if _, err := a.CreateSegment(ctx, staff, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	f := feature.Feature{Key: "checkout", Enabled: true, Salt: "s", Buckets: []feature.Bucket{{Name: "off", Replicas: 10}, {Name: "on", Replicas: 10}},
		Rules: []feature.Rule{{Name: "staff", Conditions: []feature.Condition{{Op: feature.OpInSegment, Value: json.RawMessage(`"staff"`)}}, Serve: feature.Serve{Bucket: "on"}}}}
	if _, err := a.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	b := open() // at version 1 of checkout
	desc := "moved on"
	if _, err := a.Change(ctx, "checkout", change.Patch(&desc, nil, nil), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := b.UpdateSegment(ctx, "staff", "", []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.org"`)}}, rollout.ChangeOptions{})
	if err != nil {
		t.Fatalf("UpdateSegment on a lagging instance = %v", err)
	}
	if len(res.Features) != 1 || res.Features[0] != "checkout" {
		t.Errorf("features changed: %v", res.Features)
	}
	got, _ := b.Snapshot().Feature("checkout")
	if got.Version != 3 || got.Description != "moved on" {
		t.Errorf("after the segment's change: version %d, description %q; want 3, the other instance's change kept", got.Version, got.Description)
	}
	if e, _ := b.Snapshot().PeekContext("checkout", "u", feature.Context{"email": "a@example.org"}); e.Rule != "staff" {
		t.Errorf("the new segment does not serve: %+v", e)
	}
	// A rule may not use a segment no instance made; a segment made by
	// another instance is found.
	if _, err := a.CreateSegment(ctx, feature.Segment{Key: "beta", Conditions: []feature.Condition{}}, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	rules := []feature.Rule{{Name: "beta", Conditions: []feature.Condition{{Op: feature.OpInSegment, Value: json.RawMessage(`"beta"`)}}, Serve: feature.Serve{Bucket: "off"}}}
	if _, err := b.Change(ctx, "checkout", change.SetRules(rules), rollout.ChangeOptions{}); err != nil {
		t.Errorf("a rule using a segment made by another instance = %v", err)
	}
	rules[0].Conditions[0].Value = json.RawMessage(`"gamma"`)
	if _, err := b.Change(ctx, "checkout", change.SetRules(rules), rollout.ChangeOptions{}); feature.ErrorCode(err) != feature.EInvalid {
		t.Errorf("a rule using no segment = %v, want EInvalid", err)
	}
	// In use: not deleted, by either instance.
	if _, err := a.DeleteSegment(ctx, "beta", rollout.ChangeOptions{}); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("deleting a segment in use = %v, want EConflict", err)
	}
}

// TestRestoreWithSegments: a restored feature's rules use the segments as
// they are now; while one of its segments is gone, it is not restored.
func TestRestoreWithSegments(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	staff := feature.Segment{Key: "staff", Conditions: []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.com"`)}}}
	if _, err := svc.CreateSegment(ctx, staff, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	f := feature.Feature{Key: "checkout", Enabled: true, Salt: "s", Buckets: []feature.Bucket{{Name: "off", Replicas: 10}, {Name: "on", Replicas: 10}},
		Rules: []feature.Rule{{Name: "staff", Conditions: []feature.Condition{{Op: feature.OpInSegment, Value: json.RawMessage(`"staff"`)}}, Serve: feature.Serve{Bucket: "on"}}}}
	if _, err := svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Archive(ctx, "checkout", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.DeleteSegment(ctx, "staff", rollout.ChangeOptions{}); err != nil {
		t.Fatalf("deleting a segment only an archived feature uses = %v", err)
	}
	if _, err := svc.Restore(ctx, "checkout", rollout.ChangeOptions{}); feature.ErrorCode(err) != feature.EInvalid {
		t.Errorf("restoring a feature whose segment is gone = %v, want EInvalid", err)
	}
	if _, err := svc.CreateSegment(ctx, staff, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Restore(ctx, "checkout", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if e, _ := svc.Snapshot().PeekContext("checkout", "u", feature.Context{"email": "a@example.com"}); e.Rule != "staff" {
		t.Errorf("the restored feature serves %+v, want rule staff", e)
	}
}
