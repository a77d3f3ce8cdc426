package change_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/request"
)

func ptr[T any](v T) *T { return &v }

func abc() feature.Feature {
	return feature.Feature{Key: "f", Enabled: true, Salt: "s", Version: 3,
		Buckets: []feature.Bucket{
			{Name: "A", Replicas: 1, Value: json.RawMessage(`"a"`)},
			{Name: "B", Replicas: 1, Value: json.RawMessage(`"b"`)},
			{Name: "C", Replicas: 1, Value: json.RawMessage(`"c"`)},
		}}
}

// TestFromSpec: the change a request's spec describes is the change that
// made the spec: same spec, summary and kind, and the same edit.
func TestFromSpec(t *testing.T) {
	source := abc()
	source.Enabled = false
	promotion, err := change.Promotion("staging", source, []string{"enabled"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		ch   change.Change
	}{
		{"add_bucket", change.AddBucket(feature.Bucket{Name: "D", Replicas: 2, Value: json.RawMessage(`{ "x": 1 }`)})},
		{"update_bucket", change.UpdateBucket("A", ptr(5), json.RawMessage(`"new"`))},
		{"remove_bucket", change.RemoveBucket("C")},
		{"set_buckets", change.SetBuckets([]feature.Bucket{{Name: "A", Replicas: 2}, {Name: "B", Replicas: 1}})},
		{"patch", change.Patch(ptr("d"), ptr(false), ptr("B"))},
		{"patch and bucket_by", change.PatchBucketBy(nil, ptr(false), nil, "account")},
		{"bucket_by", change.SetBucketBy("account")},
		{"set_override", change.SetOverride("ann", "B")},
		{"clear_override", change.ClearOverride("ann")},
		{"reshuffle", change.Reshuffle("new salt")},
		{"set_rules", change.SetRules([]feature.Rule{{Name: "staff", Conditions: []feature.Condition{{Attribute: "email", Op: "ends_with", Value: json.RawMessage(`"@example.com"`)}}, Serve: feature.Serve{Bucket: "B"}}})},
		{"no rules", change.SetRules(nil)},
		{"no prerequisites", change.SetPrerequisites(nil)},
		{"promote", promotion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := change.FromSpec(tt.ch.Spec())
			if err != nil {
				t.Fatalf("FromSpec(%+v) error = %v", tt.ch.Spec(), err)
			}
			if diff := cmp.Diff(tt.ch.Spec(), got.Spec()); diff != "" {
				t.Errorf("FromSpec(…).Spec() differs (-want +got):\n%s", diff)
			}
			if got.Summary() != tt.ch.Summary() || got.Kind() != tt.ch.Kind() {
				t.Errorf("FromSpec(…) = %q (kind %q), want %q (kind %q)", got.Summary(), got.Kind(), tt.ch.Summary(), tt.ch.Kind())
			}
			want, next := abc(), abc()
			wantErr, gotErr := tt.ch.Apply(&want), got.Apply(&next)
			if feature.ErrorCode(gotErr) != feature.ErrorCode(wantErr) {
				t.Errorf("Apply error = %v, want %v", gotErr, wantErr)
			}
			if diff := cmp.Diff(want, next); diff != "" {
				t.Errorf("Apply differs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFromSpecRefusals: the kinds that are no Change are refused, with the
// code that says whose mistake it is.
func TestFromSpecRefusals(t *testing.T) {
	tests := []struct {
		sp   request.Spec
		code string
	}{
		{request.Spec{Kind: request.SpecRollback, Version: 2}, feature.EInvalid},
		{request.Spec{Kind: request.SpecArchive}, feature.EInternal},
		{request.Spec{Kind: request.SpecRamp}, feature.EInternal},
		{request.Spec{Kind: request.SpecAddBucket}, feature.EInvalid},
		{request.Spec{Kind: request.SpecPromote}, feature.EInvalid},
		{request.Spec{}, feature.EInvalid},
	}
	for _, tt := range tests {
		_, err := change.FromSpec(tt.sp)
		if got := feature.ErrorCode(err); got != tt.code {
			t.Errorf("FromSpec(%+v) error = %v (code %q), want code %q", tt.sp, err, got, tt.code)
		}
	}
}

// TestAsWithSpec: As and WithSpec return changed copies of the same edit
// and leave the change they copy as it was.
func TestAsWithSpec(t *testing.T) {
	orig := change.Reshuffle("new")
	as := orig.As("scheduled by ann: reshuffled", audit.ScheduleApply)
	spec := request.Spec{Kind: request.SpecRollback, Version: 2}
	with := orig.WithSpec(spec)
	if orig.Summary() != "reshuffled users (new salt)" || orig.Kind() != "" || orig.Spec().Kind != request.SpecReshuffle {
		t.Errorf("the original became %q (kind %q, spec %q)", orig.Summary(), orig.Kind(), orig.Spec().Kind)
	}
	if as.Summary() != "scheduled by ann: reshuffled" || as.Kind() != audit.ScheduleApply || as.Spec().Kind != request.SpecReshuffle {
		t.Errorf("As = %q (kind %q, spec %q), want the new summary and kind and the same spec", as.Summary(), as.Kind(), as.Spec().Kind)
	}
	if diff := cmp.Diff(spec, with.Spec()); diff != "" || with.Summary() != orig.Summary() {
		t.Errorf("WithSpec = %q, spec differs (-want +got):\n%s", with.Summary(), diff)
	}
	for _, ch := range []change.Change{as, with} {
		f := abc()
		if err := ch.Apply(&f); err != nil || f.Salt != "new" {
			t.Errorf("Apply = %v, salt %q, want the reshuffle to %q", err, f.Salt, "new")
		}
	}
}
