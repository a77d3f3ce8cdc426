package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/document"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

func sharePtr(f float64) *float64 { return &f }

// TestDocumentExportPlansNoChange: the export of features of every kind
// (disabled with a fallback, a salt not their key, values, overrides,
// tags, a bucket of 0 replicas) plans to no change, and so does a document
// whose values are the same JSON written otherwise.
func TestDocumentExportPlansNoChange(t *testing.T) {
	ctx := context.Background()
	svc := openServices(t, 1, nil)[0]
	for _, f := range []feature.Feature{
		{Key: "a", Enabled: true, Salt: "a", Buckets: []feature.Bucket{{Name: "x", Replicas: 7, Value: json.RawMessage(`{"n":1,"m":[1,2]}`)}, {Name: "y", Replicas: 13}}},
		{Key: "b", Enabled: false, Fallback: "off", Salt: "other", Description: "dark", Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 0}},
			Overrides: map[string]string{"vip": "on"}, Tags: []string{"t1", "t2"}, Owner: "me"},
	} {
		if _, err := svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d := document.Export(svc.Snapshot())
	p, err := svc.PlanDocument(ctx, d, plan.Options{})
	if err != nil {
		t.Fatalf("PlanDocument(export) = %v", err)
	}
	if p.Changed != 0 || len(p.Changes) != 2 {
		t.Errorf("PlanDocument(export) changed %d of %d, want 0 of 2: %+v", p.Changed, len(p.Changes), p.Changes)
	}
	d.Features[0].Buckets[0].Value = json.RawMessage(`{"m":[1,2.0],"n":1e0}`)
	if p, err := svc.PlanDocument(ctx, d, plan.Options{}); err != nil || p.Changed != 0 {
		t.Errorf("PlanDocument(the same value written otherwise) = changed %d, %v; want no change", p.Changed, err)
	}
	d.Features[0].Buckets[0].Value = json.RawMessage(`{"m":[1,2.5],"n":1}`)
	if p, err := svc.PlanDocument(ctx, d, plan.Options{}); err != nil || p.Changed != 1 || strings.Join(p.Changes[0].Fields, ",") != "values" || p.Changes[0].Churn != 0 {
		t.Errorf("PlanDocument(another value) = %+v, %v; want a change of values moving no one", p.Changes, err)
	}
}

// TestDocumentPlanStopsWhenCanceled: a plan whose client left stops
// between features, even when none of them needs a search.
func TestDocumentPlanStopsWhenCanceled(t *testing.T) {
	svc := openServices(t, 1, nil)[0]
	d := document.Document{}
	for i := range 100 {
		hundred := 100
		d.Features = append(d.Features, document.Feature{Key: fmt.Sprintf("f%d", i), Buckets: []document.Bucket{{Name: "on", Replicas: &hundred}}})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if p, err := svc.PlanDocument(ctx, d, plan.Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("PlanDocument(canceled) = %d changes, %v; want context.Canceled", len(p.Changes), err)
	}
	if _, err := svc.PlanDocument(context.Background(), d, plan.Options{}); err != nil {
		t.Errorf("PlanDocument() = %v", err)
	}
}

// TestDocumentBuckets: a bucket left out of the document is removed; one
// given share 0 stays with 0 replicas, and the document then plans to no
// change.
func TestDocumentBuckets(t *testing.T) {
	ctx := context.Background()
	svc := openServices(t, 1, nil)[0]
	if _, err := svc.Create(ctx, feature.Feature{Key: "f", Enabled: true, Salt: "f", Buckets: []feature.Bucket{
		{Name: "A", Replicas: 100}, {Name: "B", Replicas: 100}, {Name: "C", Replicas: 100}}}, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	d := document.Document{Features: []document.Feature{{Key: "f", Tolerance: 0.005, Buckets: []document.Bucket{
		{Name: "A", Share: sharePtr(0.5)}, {Name: "B", Share: sharePtr(0.5)}, {Name: "D", Share: sharePtr(0)}}}}}
	p, err := svc.ApplyDocument(ctx, d, rollout.ApplyOptions{Actor: "ci", Comment: "drop C"})
	if err != nil {
		t.Fatalf("ApplyDocument() = %v", err)
	}
	f, _ := svc.Snapshot().Feature("f")
	var names []string
	for _, b := range f.Buckets {
		names = append(names, b.Name)
		if b.Name == "D" && b.Replicas != 0 {
			t.Errorf("bucket D has %d replicas, want 0", b.Replicas)
		}
	}
	if slices.Contains(names, "C") || !slices.Contains(names, "D") || !p.Applied {
		t.Errorf("buckets after the apply: %v (applied %v), want C removed and D kept", names, p.Applied)
	}
	if again, err := svc.PlanDocument(ctx, d, plan.Options{}); err != nil || again.Changed != 0 {
		t.Errorf("PlanDocument(after its apply) = changed %d, %v; want no change", again.Changed, err)
	}
}

// TestDocumentInstances: instances sharing a database. An instance whose
// snapshot lags applies a plan another made, reading the store; a plan
// applied where the store has moved on past it is refused with
// EPrecondition, naming the feature, and stores nothing; without the
// plan's versions the document applies to what is there now.
func TestDocumentInstances(t *testing.T) {
	ctx := context.Background()
	svcs := openServices(t, 2, nil)
	a, b := svcs[0], svcs[1]
	if _, err := a.Create(ctx, onOff("f", 100, 100), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	doc := func(desc string) document.Document {
		return document.Document{Features: []document.Feature{{Key: "f", Salt: "salt-f", Description: desc, Buckets: []document.Bucket{
			{Name: "on", Replicas: new(100)}, {Name: "off", Replicas: new(100)}}}}}
	}
	p, err := a.PlanDocument(ctx, doc("one"), plan.Options{})
	if err != nil || p.Versions["f"] != 1 {
		t.Fatalf("PlanDocument() = versions %v, %v; want f at 1", p.Versions, err)
	}
	if _, ok := b.Snapshot().Feature("f"); ok {
		t.Fatal("b's snapshot has f already: the test needs it to lag")
	}
	if _, err := b.ApplyDocument(ctx, doc("one"), rollout.ApplyOptions{Versions: p.Versions}); err != nil {
		t.Fatalf("ApplyDocument(on the lagging instance) = %v", err)
	}
	// a still serves version 1; its plan of version 1 is stale.
	stale, err := a.PlanDocument(ctx, doc("two"), plan.Options{})
	if err != nil || stale.Versions["f"] != 1 {
		t.Fatalf("PlanDocument(on a) = versions %v, %v; want f at 1, a's snapshot lagging", stale.Versions, err)
	}
	_, err = a.ApplyDocument(ctx, doc("two"), rollout.ApplyOptions{Versions: stale.Versions})
	if feature.ErrorCode(err) != feature.EPrecondition || !strings.Contains(feature.ErrorMessage(err), `"f"`) {
		t.Errorf("ApplyDocument(a stale plan) = %v, want %s naming f", err, feature.EPrecondition)
	}
	vs, err := a.Versions(ctx, "f", 0, 0)
	if err != nil || len(vs) != 2 {
		t.Fatalf("Versions(f) = %d, %v; want 2: the stale apply stored nothing", len(vs), err)
	}
	if _, err := a.ApplyDocument(ctx, doc("three"), rollout.ApplyOptions{}); err != nil {
		t.Fatalf("ApplyDocument(no versions) = %v, want it applied to what is there", err)
	}
	if f, _ := a.Snapshot().Feature("f"); f.Version != 3 || f.Description != "three" {
		t.Errorf("f is at version %d (%q), want 3 (three)", f.Version, f.Description)
	}
}

// TestDocumentSegments: a document's change of a segment makes a new
// version of every feature that uses it, listed in the document or not,
// checked against the versions the plan read; after the apply the
// features evaluate with the new conditions, and the document plans to no
// change.
func TestDocumentSegments(t *testing.T) {
	ctx := context.Background()
	svc := openServices(t, 1, nil)[0]
	staff := feature.Segment{Key: "staff", Conditions: []feature.Condition{{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.com"`)}}}
	if _, err := svc.CreateSegment(ctx, staff, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	rules := []feature.Rule{{Name: "staff", Conditions: []feature.Condition{{Op: feature.OpInSegment, Value: json.RawMessage(`"staff"`)}}, Serve: feature.Serve{Bucket: "on"}}}
	for _, key := range []string{"listed", "unlisted", "other"} {
		f := feature.Feature{Key: key, Enabled: true, Salt: key, Buckets: []feature.Bucket{{Name: "off", Replicas: 10}, {Name: "on", Replicas: 0}}}
		if key != "other" {
			f.Rules = rules
		}
		if _, err := svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	d := document.Export(svc.Snapshot())
	d.Features = slices.DeleteFunc(d.Features, func(f document.Feature) bool { return f.Key == "unlisted" })
	d.Segments[0].Conditions[0].Value = json.RawMessage(`"@example.org"`)
	p, err := svc.PlanDocument(ctx, d, plan.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, ch := range p.Changes {
		got[ch.Feature] = ch.Action + " " + strings.Join(ch.Fields, ",")
	}
	want := map[string]string{"listed": "update segments", "unlisted": "update segments", "other": "none "}
	if !maps.Equal(got, want) || p.Changed != 3 || p.Versions["unlisted"] != 1 || p.SegmentVersions["staff"] != 1 {
		t.Errorf("plan: %v, changed %d, versions %v %v; want %v, 3 changes, unlisted and staff from 1", got, p.Changed, p.Versions, p.SegmentVersions, want)
	}
	if sc := p.Segments[0]; sc.Action != document.ActionUpdate || strings.Join(sc.Features, ",") != "listed,unlisted" {
		t.Errorf("plan of staff: %+v, want an update making versions of listed and unlisted", sc)
	}
	applied, err := svc.ApplyDocument(ctx, p.Document, rollout.ApplyOptions{Versions: p.Versions, SegmentVersions: p.SegmentVersions})
	if err != nil || !applied.Applied {
		t.Fatalf("ApplyDocument = %v, %v", applied.Applied, err)
	}
	for _, key := range []string{"listed", "unlisted"} {
		for email, bucket := range map[string]string{"a@example.org": "on", "a@example.com": "off"} {
			e, err := svc.Snapshot().EvaluateContext(key, "u1", feature.Context{"email": email})
			if err != nil || e.Bucket != bucket || e.Version != 2 {
				t.Errorf("%s for %s after the apply = %s at version %d, %v; want %s at version 2", key, email, e.Bucket, e.Version, err, bucket)
			}
		}
	}
	if seg, _ := svc.Snapshot().Segment("staff"); seg.Version != 2 {
		t.Errorf("staff is at version %d after the apply, want 2", seg.Version)
	}
	if p, err := svc.PlanDocument(ctx, d, plan.Options{}); err != nil || p.Changed != 0 {
		t.Errorf("plan after the apply: changed %d, %v; want none", p.Changed, err)
	}
	// The plan's segment versions are checked: staff moved on.
	d.Segments[0].Description = "moved"
	p, _ = svc.PlanDocument(ctx, d, plan.Options{})
	if _, err := svc.UpdateSegment(ctx, "staff", "by hand", d.Segments[0].Conditions, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ApplyDocument(ctx, p.Document, rollout.ApplyOptions{Versions: p.Versions, SegmentVersions: p.SegmentVersions}); feature.ErrorCode(err) != feature.EPrecondition || !strings.Contains(err.Error(), `segment "staff" is at version 3, not 2`) {
		t.Errorf("ApplyDocument after staff moved on = %v, want %s naming staff", err, feature.EPrecondition)
	}
}

// TestDocumentErrorPaths: a document's mistake is named by its place in
// the document, as a YAML path for the command line and as the field the
// API names, and says what feature's validation says of the same mistake
// made through the API (Service.Create), prefixed by the feature's or
// segment's place.
func TestDocumentErrorPaths(t *testing.T) {
	ctx := context.Background()
	svc := openServices(t, 1, nil)[0]
	cond := func(attr, op, value string) feature.Condition {
		return feature.Condition{Attribute: attr, Op: op, Value: json.RawMessage(value)}
	}
	good := func(key string) document.Feature {
		return document.Feature{Key: key, Buckets: []document.Bucket{{Name: "off", Share: sharePtr(0.5)}, {Name: "on", Share: sharePtr(0.5)}},
			Rules: []feature.Rule{{Name: "staff", Serve: feature.Serve{Bucket: "on"}, Conditions: []feature.Condition{
				cond("plan", feature.OpEq, `"pro"`), cond("seats", feature.OpGt, `10`)}}}}
	}
	tests := []struct {
		name  string
		spoil func(f *document.Feature)
		field string // within the feature
		path  string // the YAML path within the feature
	}{
		{"a condition's value", func(f *document.Feature) { f.Rules[0].Conditions[1].Value = json.RawMessage(`"ten"`) }, "rules[0].conditions[1].value", "rules[0].conditions[1].value"},
		{"a condition's op", func(f *document.Feature) { f.Rules[0].Conditions[0].Op = "like" }, "rules[0].conditions[0].op", "rules[0].conditions[0].op"},
		{"a rule's bucket", func(f *document.Feature) { f.Rules[0].Serve.Bucket = "maybe" }, "rules[0].serve.bucket", "rules[0].serve.bucket"},
		{"a bucket's name", func(f *document.Feature) { f.Buckets[1].Name = "o n" }, "buckets[1].name", "buckets[1].name"},
		{"a bucket's value", func(f *document.Feature) { f.Buckets[0].Value = json.RawMessage(`1e999`) }, "buckets[0].value", "buckets[0].value"},
		{"a tag", func(f *document.Feature) { f.Tags = []string{"ok", "Not OK"} }, "tags[1]", "tags[1]"},
		{"an override", func(f *document.Feature) { f.Overrides = map[string]string{"ann.o'neil": "maybe"} }, `overrides["ann.o'neil"]`, `overrides.'ann.o\'neil'`},
		{"the fallback", func(f *document.Feature) { f.Fallback = "maybe" }, "fallback", "fallback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := document.Document{Features: []document.Feature{good("a"), good("b"), good("c")}}
			tt.spoil(&d.Features[2])
			err := d.Validate()
			de, ok := errors.AsType[*document.Error](err)
			if !ok {
				t.Fatalf("Validate() = %v, want a *document.Error", err)
			}
			if want := "features[2]." + tt.field; de.Err.Field != want || feature.ErrorCode(err) != feature.EInvalid {
				t.Errorf("Validate() at %q (%s), want EInvalid at %q", de.Err.Field, feature.ErrorCode(err), want)
			}
			if want := "$.features[2]." + tt.path; de.Path != want {
				t.Errorf("Validate().Path = %q, want %q", de.Path, want)
			}
			if _, err := svc.PlanDocument(ctx, d, plan.Options{}); feature.ErrorMessage(err) != de.Err.Message {
				t.Errorf("PlanDocument() = %v, want Validate's %q", err, de.Err.Message)
			}

			// The same mistake, through the API's way in.
			f := feature.Feature{Key: "c", Enabled: true, Salt: "c", Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}}
			df := good("c")
			tt.spoil(&df)
			for i, b := range df.Buckets {
				f.Buckets[i].Name, f.Buckets[i].Value = b.Name, b.Value
			}
			f.Rules, f.Tags, f.Overrides, f.Fallback = df.Rules, df.Tags, df.Overrides, df.Fallback
			_, cerr := svc.Create(ctx, f, rollout.ChangeOptions{})
			if want := "features[2]." + feature.ErrorMessage(cerr); de.Err.Message != want {
				t.Errorf("the document says %q, Create %q: want the same but for the place", de.Err.Message, feature.ErrorMessage(cerr))
			}
		})
	}

	// A segment's mistake, likewise.
	d := document.Document{Features: []document.Feature{}, Segments: []document.Segment{
		{Key: "staff", Conditions: []feature.Condition{cond("plan", feature.OpEq, `"pro"`)}},
		{Key: "beta", Conditions: []feature.Condition{cond("plan", feature.OpEq, `"pro"`), cond("v", feature.OpSemverGt, `"four"`)}}}}
	de, ok := errors.AsType[*document.Error](d.Validate())
	_, serr := svc.CreateSegment(ctx, feature.Segment{Key: "beta", Conditions: d.Segments[1].Conditions}, rollout.ChangeOptions{})
	if !ok || de.Err.Field != "segments[1].conditions[1].value" || de.Err.Message != "segments[1]."+feature.ErrorMessage(serr) {
		t.Errorf("Validate() of a bad segment = %v; CreateSegment = %v: want the same message at segments[1].conditions[1].value", de, serr)
	}
}
