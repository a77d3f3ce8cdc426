package feature_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/rollout/rollout/rollout/feature"
)

// validFeature is a feature that Validate accepts, with a rule of two
// conditions, to spoil one field at a time.
func validFeature() feature.Feature {
	return feature.Feature{
		Key: "checkout", Enabled: true, Salt: "checkout",
		Buckets:   []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}},
		Overrides: map[string]string{"u1": "on", "u2": "off"},
		Rules: []feature.Rule{{Name: "staff", Serve: feature.Serve{Bucket: "on"}, Conditions: []feature.Condition{
			{Attribute: "plan", Op: feature.OpEq, Value: json.RawMessage(`"pro"`)},
			{Attribute: "email", Op: feature.OpEndsWith, Value: json.RawMessage(`"@example.com"`)},
		}}},
		Tags: []string{"checkout", "team.pay"},
	}
}

// TestValidateFieldPaths: what Validate refuses is an EInvalid *Error
// whose Field is the place of the mistake, at any depth, and whose
// message starts with it.
func TestValidateFieldPaths(t *testing.T) {
	if err := validFeature().Validate(); err != nil {
		t.Fatalf("the valid feature: %v", err)
	}
	tests := []struct {
		name   string
		spoil  func(f *feature.Feature)
		field  string
		detail string
	}{
		{"key", func(f *feature.Feature) { f.Key = "Bad Key" }, "key", `feature key "Bad Key" is invalid`},
		{"description", func(f *feature.Feature) { f.Description = strings.Repeat("d", feature.MaxDescription+1) }, "description", "description must be valid UTF-8"},
		{"a tag", func(f *feature.Feature) { f.Tags[1] = "Team" }, "tags[1]", `tag "Team" is invalid`},
		{"a tag twice", func(f *feature.Feature) { f.Tags = append(f.Tags, "checkout") }, "tags[2]", `tag "checkout" appears twice`},
		{"owner", func(f *feature.Feature) { f.Owner = " ann" }, "owner", "owner must not start or end with a space"},
		{"no buckets", func(f *feature.Feature) { f.Buckets = nil }, "buckets", "a feature needs at least one bucket"},
		{"a bucket's name", func(f *feature.Feature) { f.Buckets[1].Name = "o n" }, "buckets[1].name", `bucket name "o n" is invalid`},
		{"a bucket twice", func(f *feature.Feature) { f.Buckets[1].Name = "off" }, "buckets[1].name", `bucket "off" appears twice`},
		{"a bucket's replicas", func(f *feature.Feature) { f.Buckets[0].Replicas = -1 }, "buckets[0].replicas", `bucket "off" has -1 replicas`},
		{"a bucket's value", func(f *feature.Feature) { f.Buckets[1].Value = json.RawMessage(`{"a":`) }, "buckets[1].value", `the value of bucket "on" is not valid JSON`},
		{"no replicas", func(f *feature.Feature) { f.Buckets[0].Replicas, f.Buckets[1].Replicas = 0, 0 }, "buckets", "every bucket has 0 replicas"},
		{"fallback", func(f *feature.Feature) { f.Fallback = "maybe" }, "fallback", `fallback "maybe" is not a bucket of the feature`},
		{"bucket_by", func(f *feature.Feature) { f.BucketBy = "not valid!" }, "bucket_by", `bucket_by "not valid!" is not a valid attribute name`},
		{"a rule's name", func(f *feature.Feature) { f.Rules[0].Name = "a rule" }, "rules[0].name", `rule name "a rule" is invalid`},
		{"a condition's op", func(f *feature.Feature) { f.Rules[0].Conditions[1].Op = "like" }, "rules[0].conditions[1].op", `rule "staff": unknown operator "like"`},
		{"a condition's attribute", func(f *feature.Feature) { f.Rules[0].Conditions[0].Attribute = "a b" }, "rules[0].conditions[0].attribute", `rule "staff": condition attribute "a b" is invalid`},
		{"a condition's value", func(f *feature.Feature) { f.Rules[0].Conditions[1].Value = json.RawMessage(`3`) }, "rules[0].conditions[1].value", `rule "staff": operator ends_with on attribute "email" takes a string value`},
		{"a pattern", func(f *feature.Feature) {
			f.Rules[0].Conditions[1] = feature.Condition{Attribute: "email", Op: feature.OpMatches, Value: json.RawMessage(`"(a"`)}
		}, "rules[0].conditions[1].value", `rule "staff": the pattern of a matches condition on attribute "email" is not a valid RE2 regular expression`},
		{"what a rule serves", func(f *feature.Feature) { f.Rules[0].Serve = feature.Serve{} }, "rules[0].serve", `rule "staff" serves nothing`},
		{"the bucket a rule serves", func(f *feature.Feature) { f.Rules[0].Serve.Bucket = "maybe" }, "rules[0].serve.bucket", `rule "staff" serves bucket "maybe", which the feature does not have`},
		{"a rule twice", func(f *feature.Feature) { f.Rules = append(f.Rules, f.Rules[0]) }, "rules[1].name", `rule name "staff" appears twice (rules[0] too)`},
		{"an override's user", func(f *feature.Feature) { f.Overrides["u\x00"] = "on" }, `overrides["u\x00"]`, "user ID must not hold a NUL byte"},
		{"an override's bucket", func(f *feature.Feature) { f.Overrides["u3"] = "maybe" }, `overrides["u3"]`, `override for user "u3" names bucket "maybe"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := validFeature().Clone()
			tt.spoil(&f)
			err := f.Validate()
			var e *feature.Error
			if !errors.As(err, &e) || e.Code != feature.EInvalid {
				t.Fatalf("Validate() = %v, want an EInvalid *Error", err)
			}
			if e.Field != tt.field {
				t.Errorf("Validate().Field = %q, want %q (%v)", e.Field, tt.field, err)
			}
			if want := tt.field + ": " + tt.detail; !strings.HasPrefix(e.Message, want) {
				t.Errorf("Validate().Message = %q, want %q…", e.Message, want)
			}
		})
	}
}

// TestValidateOverridesInOrder: of several bad overrides, Validate always
// names the first by user ID, whatever the order of the map.
func TestValidateOverridesInOrder(t *testing.T) {
	f := validFeature()
	for i := range 50 {
		f.Overrides[fmt.Sprintf("u%02d", 50-i)] = "maybe"
	}
	for range 20 {
		if e, ok := errors.AsType[*feature.Error](f.Validate()); !ok || e.Field != `overrides["u01"]` {
			t.Fatalf("Validate() = %v, want the error of overrides[\"u01\"]", e)
		}
	}
}

// TestSegmentFieldPaths: a segment's errors name their place as a
// feature's do, its key in the message where a rule's name stands.
func TestSegmentFieldPaths(t *testing.T) {
	seg := feature.Segment{Key: "staff", Conditions: []feature.Condition{
		{Attribute: "plan", Op: feature.OpEq, Value: json.RawMessage(`"pro"`)},
		{Attribute: "email", Op: feature.OpInSegment, Value: json.RawMessage(`"beta"`)},
	}}
	tests := []struct {
		name          string
		seg           feature.Segment
		field, detail string
	}{
		{"key", feature.Segment{Key: "Staff"}, "key", `segment key "Staff" is invalid`},
		{"in_segment", seg, "conditions[1].op", `segment "staff": a segment cannot use in_segment`},
		{"value", feature.Segment{Key: "staff", Conditions: []feature.Condition{{Attribute: "v", Op: feature.OpSemverGt, Value: json.RawMessage(`"four"`)}}}, "conditions[0].value", `segment "staff": "four" is not a semantic version`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := errors.AsType[*feature.Error](tt.seg.Validate())
			if !ok || e.Code != feature.EInvalid || e.Field != tt.field || !strings.HasPrefix(e.Message, tt.field+": "+tt.detail) {
				t.Errorf("Validate() = %v (field %q), want field %q and %q…", e, e.Field, tt.field, tt.field+": "+tt.detail)
			}
		})
	}
}

// TestErrorWithin: an error placed within a field keeps its code and its
// detail, its path and message prefixed; one without a field gets the
// parent's; wrapping does not hide it.
func TestErrorWithin(t *testing.T) {
	err := validFeatureWith(func(f *feature.Feature) { f.Rules[0].Conditions[1].Value = json.RawMessage(`3`) })
	e, ok := errors.AsType[*feature.Error](fmt.Errorf("create: %w", err))
	if !ok {
		t.Fatalf("errors.AsType(%v) found no *Error", err)
	}
	in := e.Within("features[2]")
	if want := "features[2].rules[0].conditions[1].value"; in.Field != want {
		t.Errorf("Within().Field = %q, want %q", in.Field, want)
	}
	if want := "features[2]." + e.Message; in.Message != want {
		t.Errorf("Within().Message = %q, want %q", in.Message, want)
	}
	if in.Code != feature.EInvalid || e.Field != "rules[0].conditions[1].value" {
		t.Errorf("Within changed the code (%q) or the error it was called on (field %q)", in.Code, e.Field)
	}
	bare := feature.Errorf(feature.EInvalid, "the document lists no features").Within("features")
	if bare.Field != "features" || bare.Message != "features: the document lists no features" {
		t.Errorf("Within of an error without a field = %q, %q", bare.Field, bare.Message)
	}
	if got := e.Within(""); got != e {
		t.Errorf("Within(\"\") = %v, want the error itself", got)
	}
}

func validFeatureWith(spoil func(f *feature.Feature)) error {
	f := validFeature().Clone()
	spoil(&f)
	return f.Validate()
}
