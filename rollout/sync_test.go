package rollout_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/rollout"
)

// TestNewSnapshotFromDocument: a snapshot rebuilt from the service's sync
// document serves every user what the service serves, and a feature that
// does not validate, or repeats a key, is left out and named while the
// others are served.
func TestNewSnapshotFromDocument(t *testing.T) {
	svc, _ := newService(t)
	mustCreate(t, svc, abc("a"))
	b := abc("b")
	b.Salt, b.Overrides = "", map[string]string{"u7": "C"}
	mustCreate(t, svc, b)
	c := abc("c")
	c.Enabled, c.Fallback = false, "B"
	mustCreate(t, svc, c)

	doc := svc.Snapshot().Document()
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var back rollout.SyncDocument
	if err := json.Unmarshal(data, &back); err != nil {
		t.Fatal(err)
	}
	snap, err := rollout.NewSnapshot(back.Features, back.Revision)
	if err != nil {
		t.Fatalf("NewSnapshot() = %v", err)
	}
	if snap.Revision() != doc.Revision {
		t.Errorf("Revision() = %d, want %d", snap.Revision(), doc.Revision)
	}
	for _, key := range []string{"a", "b", "c"} {
		for i := range 500 {
			user := fmt.Sprintf("u%d", i)
			want, _ := svc.Snapshot().Peek(key, user)
			got, err := snap.Peek(key, user)
			if err != nil || !cmp.Equal(want, got) {
				t.Fatalf("Peek(%q, %q) = %+v, %v; want %+v", key, user, got, err, want)
			}
		}
	}

	bad := back.Features[0].Clone()
	bad.Buckets[0].Replicas = 0
	dup := back.Features[2].Clone()
	snap, err = rollout.NewSnapshot(append([]rollout.Feature{bad}, append(back.Features[1:], dup)...), 9)
	if err == nil || !strings.Contains(err.Error(), `feature "a" left out`) || !strings.Contains(err.Error(), `feature "c" left out: the key appears twice`) {
		t.Errorf("NewSnapshot(bad a, duplicate c) error = %v, want a and c named", err)
	}
	if diff := cmp.Diff([]string{"b", "c"}, snap.Keys()); diff != "" {
		t.Errorf("Keys() mismatch (-want +got):\n%s", diff)
	}
}

func TestSnapshotChanged(t *testing.T) {
	a, b, c := abc("a"), abc("b"), abc("c")
	for i, f := range []*rollout.Feature{&a, &b, &c} {
		f.ID, f.Version = fmt.Sprintf("id%d", i), 1
	}
	before, _ := rollout.NewSnapshot([]rollout.Feature{a, b, c}, 1)
	b2 := b.Clone()
	b2.Version = 2
	c2 := c.Clone()
	c2.ID = "other"
	d := abc("d")
	d.ID, d.Version = "id3", 1
	after, _ := rollout.NewSnapshot([]rollout.Feature{b2, c2, d}, 2)
	if diff := cmp.Diff([]string{"a", "b", "c", "d"}, before.Changed(after)); diff != "" {
		t.Errorf("Changed() mismatch (-want +got):\n%s", diff)
	}
	same, _ := rollout.NewSnapshot([]rollout.Feature{a, b, c}, 3)
	if got := before.Changed(same); len(got) != 0 {
		t.Errorf("Changed(same features) = %q, want none", got)
	}
}

func TestSnapshotTakeExposures(t *testing.T) {
	a := abc("a")
	a.ID, a.Version, a.Enabled = "id-a", 4, false
	b := abc("b")
	b.ID, b.Version = "id-b", 2
	b.Overrides = map[string]string{"u": "C"}
	snap, _ := rollout.NewSnapshot([]rollout.Feature{a, b}, 1)
	for range 3 {
		snap.Evaluate("a", "u")
		snap.Evaluate("b", "u")
	}
	snap.Peek("b", "u") // not counted
	want := []rollout.Exposure{
		{Feature: "a", FeatureID: "id-a", Version: 4, Bucket: "", Count: 3},
		{Feature: "b", FeatureID: "id-b", Version: 2, Bucket: "C", Count: 3},
	}
	if diff := cmp.Diff(want, snap.TakeExposures(nil)); diff != "" {
		t.Errorf("TakeExposures() mismatch (-want +got):\n%s", diff)
	}
	if got := snap.TakeExposures(nil); len(got) != 0 {
		t.Errorf("TakeExposures() again = %+v, want none", got)
	}
}

func TestValidateExposureBatch(t *testing.T) {
	ok := rollout.Exposure{FeatureID: "id", Version: 1, Bucket: "A", Count: 1}
	for _, tt := range []struct {
		name   string
		batch  string
		counts []rollout.Exposure
		want   string // in the message; "" for valid
	}{
		{"valid", "0123456789abcdef", []rollout.Exposure{ok, {FeatureID: "id", Version: 1, Count: 2}}, ""},
		{"short id", "abc", nil, "batch ID"},
		{"bad id", "abc/defgh", nil, "batch ID"},
		{"no feature id", "batch-01", []rollout.Exposure{{Version: 1, Bucket: "A", Count: 1}}, "feature_id"},
		{"version 0", "batch-01", []rollout.Exposure{{FeatureID: "id", Bucket: "A", Count: 1}}, "version"},
		{"bad bucket", "batch-01", []rollout.Exposure{{FeatureID: "id", Version: 1, Bucket: "a b", Count: 1}}, "bucket"},
		{"zero count", "batch-01", []rollout.Exposure{{FeatureID: "id", Version: 1, Bucket: "A"}}, "count must be from 1"},
		{"too many", "batch-01", make([]rollout.Exposure, rollout.MaxExposureBatch+1), "at most"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := rollout.ValidateExposureBatch(tt.batch, tt.counts)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("ValidateExposureBatch() = %v, want nil", err)
			case tt.want != "" && (rollout.ErrorCode(err) != rollout.EInvalid || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("ValidateExposureBatch() = %v, want an invalid error about %q", err, tt.want)
			}
		})
	}
}
