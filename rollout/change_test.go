package rollout_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// TestChangeRefusals: every change constructor refuses what makes no sense,
// with the error code the API maps to its status, and stores nothing.
func TestChangeRefusals(t *testing.T) {
	svc, _ := newService(t)
	f := abc("f")
	f.Fallback = "C"
	f.Overrides = map[string]string{"vip": "B"}
	mustCreate(t, svc, f)
	salt := func() string { cur, _ := svc.Snapshot().Feature("f"); return cur.Salt }()

	tests := []struct {
		name   string
		change change.Change
		code   string
	}{
		{"add an existing bucket", change.AddBucket(feature.Bucket{Name: "A", Replicas: 3}), feature.EConflict},
		{"add a bucket with -1 replicas", change.AddBucket(feature.Bucket{Name: "D", Replicas: -1}), feature.EInvalid},
		{"add a bucket with # in its name", change.AddBucket(feature.Bucket{Name: "D#1", Replicas: 3}), feature.EInvalid},
		{"add a bucket with too many replicas", change.AddBucket(feature.Bucket{Name: "D", Replicas: feature.MaxReplicas + 1}), feature.EInvalid},
		{"update a missing bucket", change.UpdateBucket("Z", ptr(3), nil), feature.ENotFound},
		{"update nothing", change.UpdateBucket("A", nil, nil), feature.EInvalid},
		{"update to -1 replicas", change.UpdateBucket("A", ptr(-1), nil), feature.EInvalid},
		{"set every bucket to 0 replicas", change.SetBuckets([]feature.Bucket{{Name: "A"}, {Name: "B"}, {Name: "C"}}), feature.EInvalid},
		{"remove a missing bucket", change.RemoveBucket("Z"), feature.ENotFound},
		{"remove the fallback", change.RemoveBucket("C"), feature.EConflict},
		{"remove an overridden bucket", change.RemoveBucket("B"), feature.EConflict},
		{"set no buckets", change.SetBuckets(nil), feature.EInvalid},
		{"set duplicate buckets", change.SetBuckets([]feature.Bucket{{Name: "A", Replicas: 1}, {Name: "A", Replicas: 2}}), feature.EInvalid},
		{"patch nothing", change.Patch(nil, nil, nil), feature.EInvalid},
		{"fallback to a missing bucket", change.Patch(nil, nil, ptr("Z")), feature.EInvalid},
		{"override to a missing bucket", change.SetOverride("u", "Z"), feature.EInvalid},
		{"override an empty user", change.SetOverride("", "A"), feature.EInvalid},
		{"clear a missing override", change.ClearOverride("nobody"), feature.ENotFound},
		{"reshuffle to the same salt", change.Reshuffle(salt), feature.EInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.Change(context.Background(), "f", tt.change, rollout.ChangeOptions{})
			if got := feature.ErrorCode(err); got != tt.code {
				t.Errorf("Change(%s) error = %v (code %q), want code %q", tt.change.Summary(), err, got, tt.code)
			}
			if cur, _ := svc.Snapshot().Feature("f"); cur.Version != 1 {
				t.Fatalf("a refused change made version %d", cur.Version)
			}
		})
	}

	// The last bucket cannot go: the feature must be deleted instead.
	mustCreate(t, svc, feature.Feature{Key: "one", Enabled: true, Buckets: []feature.Bucket{{Name: "A", Replicas: 3}}})
	if _, err := svc.Change(context.Background(), "one", change.RemoveBucket("A"), rollout.ChangeOptions{}); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("removing the last bucket: err = %v, want %s", err, feature.EConflict)
	}
}

// TestReshuffleReportIsExpected: a new salt re-hashes everyone
// independently of where they were, so the report gives the expected churn:
// the chance a user lands in another bucket, Σ share_before(b) ·
// (1 − share_after(b)), with a move from every bucket to every other.
func TestReshuffleReportIsExpected(t *testing.T) {
	svc, _ := newService(t)
	mustCreate(t, svc, abc("f"))
	res, err := svc.Change(context.Background(), "f", change.Reshuffle("new-salt"), rollout.ChangeOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	rep := res.Report
	if rep.Method != feature.MethodExpected {
		t.Fatalf("method = %q, want %q", rep.Method, feature.MethodExpected)
	}
	want := 0.0
	for b, before := range rep.SharesBefore {
		want += before * (1 - rep.SharesAfter[b])
	}
	if math.Abs(rep.Churn-want) > 1e-12 {
		t.Errorf("churn = %v, want %v", rep.Churn, want)
	}
	if len(rep.Moves) != 6 { // 3 buckets, each to the 2 others
		data, _ := json.Marshal(rep.Moves)
		t.Errorf("moves = %s, want the 6 pairs of different buckets", data)
	}
	sum := 0.0
	for _, m := range rep.Moves {
		if m.From == m.To {
			t.Errorf("move %v stays in its bucket", m)
		}
		sum += m.Share
	}
	if math.Abs(sum-rep.Churn) > 1e-12 {
		t.Errorf("moves add up to %v, churn is %v", sum, rep.Churn)
	}
	// Naive mod N would also re-hash everyone: (N−1)/N of them move.
	if math.Abs(rep.ModuloChurn-2.0/3) > 1e-12 {
		t.Errorf("modulo churn = %v, want 2/3", rep.ModuloChurn)
	}
}
