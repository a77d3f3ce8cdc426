package rollout_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// unreadableValues are bucket values that are valid JSON to json.Valid but
// that strict clients cannot read: Go's decoder fails on the number, and
// other decoders on the bytes and the lone surrogates.
var unreadableValues = map[string]string{
	"invalid UTF-8 in a string": "\"caf\xe9\"",
	"invalid UTF-8 in a key":    "{\"\xff\":1}",
	"number beyond float64":     `1e999999`,
	"negative beyond float64":   `{"limit":[-1.5e400]}`,
	"lone high surrogate":       `"\ud800"`,
	"lone low surrogate":        `"a\udc00b"`,
	"high surrogate then other": `"\ud800\u0041"`,
}

// readableValues are close to the unreadable ones and must be accepted.
var readableValues = []string{
	`"café"`, `"\u00e9"`, `"😀"`, `"\ud83d\ude00"`, `1e308`, `-1.7976931348623157e308`, `1e-999999`,
	`{"a":[1,2.5,-3e10,"x\\u12"]}`, `"\\ud800"`, `null`, `true`,
}

func TestBucketValueMustBeReadable(t *testing.T) {
	for name, v := range unreadableValues {
		b := feature.Bucket{Name: "A", Replicas: 1, Value: json.RawMessage(v)}
		if err := b.Validate(); feature.ErrorCode(err) != feature.EInvalid {
			t.Errorf("%s: Validate(%q) = %v, want an %s error", name, v, err, feature.EInvalid)
		}
	}
	for _, v := range readableValues {
		b := feature.Bucket{Name: "A", Replicas: 1, Value: json.RawMessage(v)}
		if err := b.Validate(); err != nil {
			t.Errorf("Validate(%q) = %v, want nil", v, err)
		}
		var decoded any
		if err := json.Unmarshal([]byte(v), &decoded); err != nil {
			t.Errorf("the accepted value %q does not decode: %v", v, err)
		}
	}
}

// TestUnreadableValueOnEveryPath refuses unreadable values on every path
// that stores a value, while a database that already holds one (written
// before they were refused) still loads and serves, and a change that
// replaces the value is accepted.
func TestUnreadableValueOnEveryPath(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	bad := json.RawMessage(`1e999999`)
	now := time.Now().UTC()
	old := feature.Feature{ID: "id-old", Key: "old", Enabled: true, Salt: "old", Version: 1, CreatedAt: now, UpdatedAt: now,
		Buckets: []feature.Bucket{{Name: "A", Replicas: 5, Value: bad}}}
	if err := db.CreateFeature(ctx, old, rollout.Version{Version: 1, Actor: "test", Time: now, Summary: "created", Config: old}); err != nil {
		t.Fatal(err)
	}
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatalf("NewService over a stored unreadable value: %v", err)
	}
	if e, err := svc.Evaluate("old", "u"); err != nil || string(e.Value) != string(bad) {
		t.Fatalf(`Evaluate("old") = %s, %v; want the stored value`, e.Value, err)
	}
	mustCreate(t, svc, abc("f"))

	refused := []struct {
		name string
		do   func() error
	}{
		{"create", func() error {
			f := abc("g")
			f.Buckets[0].Value = bad
			_, err := svc.Create(ctx, f, rollout.ChangeOptions{})
			return err
		}},
		{"add bucket", func() error {
			_, err := svc.Change(ctx, "f", change.AddBucket(feature.Bucket{Name: "D", Replicas: 1, Value: bad}), rollout.ChangeOptions{})
			return err
		}},
		{"update bucket", func() error {
			_, err := svc.Change(ctx, "f", change.UpdateBucket("A", nil, bad), rollout.ChangeOptions{})
			return err
		}},
		{"set buckets", func() error {
			_, err := svc.Change(ctx, "f", change.SetBuckets([]feature.Bucket{{Name: "A", Replicas: 1, Value: bad}}), rollout.ChangeOptions{})
			return err
		}},
		{"a change that keeps a stored unreadable value", func() error {
			_, err := svc.Change(ctx, "old", change.Reshuffle("new-salt"), rollout.ChangeOptions{})
			return err
		}},
	}
	for _, tt := range refused {
		if err := tt.do(); feature.ErrorCode(err) != feature.EInvalid {
			t.Errorf("%s: err = %v, want an %s error", tt.name, err, feature.EInvalid)
		}
	}

	mustChange(t, svc, "old", change.UpdateBucket("A", nil, json.RawMessage(`1e308`)))
	if _, err := svc.Rollback(ctx, "old", 1, rollout.ChangeOptions{}); feature.ErrorCode(err) != feature.EInvalid {
		t.Errorf("rollback to the version with the unreadable value: err = %v, want an %s error", err, feature.EInvalid)
	}
	if f, _ := svc.Snapshot().Feature("old"); f.Version != 2 {
		t.Errorf("feature old is at version %d after the refusals, want 2", f.Version)
	}
	if _, ok := svc.Snapshot().Feature("g"); ok {
		t.Error("feature g was created with an unreadable value")
	}
	if f, _ := svc.Snapshot().Feature("f"); f.Version != 1 {
		t.Errorf("feature f is at version %d after the refusals, want 1", f.Version)
	}
}
