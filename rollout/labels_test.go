package rollout_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// TestLabelsValidate: tags and owner are bounded in count, length and
// characters; a feature with bad ones is refused as invalid.
func TestLabelsValidate(t *testing.T) {
	tags := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = "t" + strings.Repeat("x", i)
		}
		return out
	}
	tests := []struct {
		name  string
		tags  []string
		owner string
		ok    bool
	}{
		{"none", nil, "", true},
		{"usual", []string{"checkout", "q4", "team:growth", "v1.2", "a_b-c"}, "Alice Martin <alice@example.com>", true},
		{"most tags", tags(feature.MaxTags), "", true},
		{"too many tags", tags(feature.MaxTags + 1), "", false},
		{"longest tag", []string{strings.Repeat("a", feature.MaxTagBytes)}, "", true},
		{"long tag", []string{strings.Repeat("a", feature.MaxTagBytes+1)}, "", false},
		{"upper case", []string{"Checkout"}, "", false},
		{"space", []string{"a b"}, "", false},
		{"leading dash", []string{"-a"}, "", false},
		{"empty tag", []string{""}, "", false},
		{"twice", []string{"a", "a"}, "", false},
		{"longest owner", nil, strings.Repeat("o", feature.MaxOwnerBytes), true},
		{"long owner", nil, strings.Repeat("o", feature.MaxOwnerBytes+1), false},
		{"owner with a new line", nil, "a\nb", false},
		{"owner with NUL", nil, "a\x00b", false},
		{"owner not UTF-8", nil, "a\xffb", false},
		{"owner padded", nil, "alice ", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := onOff("f", 1, 1)
			f.Tags, f.Owner = tt.tags, tt.owner
			err := f.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate(tags %q, owner %q) = %v, want ok %v", tt.tags, tt.owner, err, tt.ok)
			}
			if err != nil && feature.ErrorCode(err) != feature.EInvalid {
				t.Errorf("Validate = %v, want an %s error", err, feature.EInvalid)
			}
		})
	}
}

// TestSetLabels: SetLabels keeps tags sorted, clears them with an empty
// list, leaves what it is not given, and joins another change with And.
func TestSetLabels(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{}
	clock.Add(time.Duration(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()))
	svc := openServices(t, 1, clock.clock())[0]
	if _, err := svc.Create(ctx, onOff("f", 1, 1), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	tags, owner, none := []string{"web", "checkout"}, "alice", ""
	res, err := svc.Change(ctx, "f", change.SetLabels(&tags, &owner), rollout.ChangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f := res.Feature; !slices.Equal(f.Tags, []string{"checkout", "web"}) || f.Owner != "alice" || res.Report.Churn != 0 {
		t.Errorf("after SetLabels: tags %q, owner %q, churn %v; want [checkout web], alice, 0", f.Tags, f.Owner, res.Report.Churn)
	}
	if !slices.Equal(tags, []string{"web", "checkout"}) {
		t.Errorf("SetLabels sorted its caller's slice: %q", tags)
	}
	desc := "d"
	res, err = svc.Change(ctx, "f", change.Combine(change.Patch(&desc, nil, nil), change.SetLabels(nil, &none)), rollout.ChangeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f := res.Feature; f.Description != "d" || f.Owner != "" || !slices.Equal(f.Tags, []string{"checkout", "web"}) {
		t.Errorf("after Combine(Patch, SetLabels(nil, \"\")): %+v", f)
	}
	vs, err := svc.Versions(ctx, "f", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := vs[0].Summary, "description changed, cleared the owner"; got != want {
		t.Errorf("summary = %q, want %q", got, want)
	}
	if _, err := svc.Change(ctx, "f", change.SetLabels(nil, nil), rollout.ChangeOptions{}); feature.ErrorCode(err) != feature.EInvalid {
		t.Errorf("SetLabels(nil, nil) = %v, want invalid", err)
	}
	bad := []string{"Bad"}
	if _, err := svc.Change(ctx, "f", change.SetLabels(&bad, nil), rollout.ChangeOptions{}); feature.ErrorCode(err) != feature.EInvalid {
		t.Errorf("SetLabels(Bad) = %v, want invalid", err)
	}
}

// TestLastEvaluated: the hour of a feature's last stored evaluation, now
// while counts wait in memory, zero before any.
func TestLastEvaluated(t *testing.T) {
	ctx := context.Background()
	clock := &testClock{}
	start := time.Date(2026, 1, 1, 9, 30, 0, 0, time.UTC)
	clock.Add(time.Duration(start.UnixNano()))
	svc := openServices(t, 1, clock.clock())[0]
	if _, err := svc.Create(ctx, onOff("f", 1, 1), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := svc.LastEvaluated(ctx, "f"); err != nil || !got.IsZero() {
		t.Errorf("LastEvaluated before any = %v, %v; want zero", got, err)
	}
	if _, err := svc.Evaluate("f", "u"); err != nil {
		t.Fatal(err)
	}
	if got, err := svc.LastEvaluated(ctx, "f"); err != nil || !got.Equal(start) {
		t.Errorf("LastEvaluated with counts in memory = %v, %v; want now, %v", got, err, start)
	}
	if err := svc.FlushExposures(ctx); err != nil {
		t.Fatal(err)
	}
	clock.Add(50 * time.Hour)
	if got, err := svc.LastEvaluated(ctx, "f"); err != nil || !got.Equal(start.Truncate(time.Hour)) {
		t.Errorf("LastEvaluated after the flush = %v, %v; want %v", got, err, start.Truncate(time.Hour))
	}
	if _, err := svc.LastEvaluated(ctx, "nope"); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("LastEvaluated of no feature = %v, want not found", err)
	}
}
