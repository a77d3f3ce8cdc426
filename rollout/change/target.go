package change

import (
	"strings"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/request"
)

// SetRules replaces the feature's rules with rules, as one version (an
// empty list removes them all).
func SetRules(rules []feature.Rule) Change {
	rules = feature.CloneRules(rules)
	spec := request.Spec{Kind: request.SpecSetRules, Rules: feature.CloneRules(rules)}
	if spec.Rules == nil {
		spec.Rules = []feature.Rule{}
	}
	var summary string
	if len(rules) == 0 {
		summary = "removed the rules"
	} else {
		parts := make([]string, len(rules))
		for i, r := range rules {
			parts[i] = feature.DescribeRule(r)
		}
		summary = AbbreviateSummary("set rules: " + strings.Join(parts, "; "))
	}
	return Change{
		spec:    spec,
		summary: summary,
		apply: func(f *feature.Feature) error {
			f.Rules = feature.CloneRules(rules)
			if len(f.Rules) == 0 {
				f.Rules = nil
			}
			return nil
		},
	}
}

// SetBucketBy makes the feature's ring hash the context attribute attr
// instead of the user ID ("": the user ID again). Every user is placed
// anew, as by a reshuffle.
func SetBucketBy(attr string) Change {
	summary := "bucket by " + attr
	if attr == "" {
		summary = "bucket by the user ID"
	}
	return Change{
		spec:    request.Spec{Kind: request.SpecPatch, BucketBy: &attr},
		summary: summary,
		apply: func(f *feature.Feature) error {
			if attr == f.BucketBy {
				return feature.Errorf(feature.EInvalid, "the feature already buckets by %q", attr)
			}
			f.BucketBy = attr
			return nil
		},
	}
}

// PatchBucketBy is Patch and SetBucketBy as one version (see Patch for
// the fields left nil); a change request can store it.
func PatchBucketBy(description *string, enabled *bool, fallback *string, bucketBy string) Change {
	by := SetBucketBy(bucketBy)
	if description == nil && enabled == nil && fallback == nil {
		return by
	}
	ch := Combine(Patch(description, enabled, fallback), by)
	ch.spec = request.Spec{Kind: request.SpecPatch, Description: description, Enabled: enabled, Fallback: fallback, BucketBy: &bucketBy}
	return ch
}

// maxSummary bounds a summary (AbbreviateSummary), in bytes.
const maxSummary = 1000

// AbbreviateSummary bounds a version's summary made of what a user gave
// (rules, prerequisites, a segment's conditions) to 1,000 bytes and "…".
func AbbreviateSummary(s string) string {
	if len(s) <= maxSummary {
		return s
	}
	return strings.ToValidUTF8(s[:maxSummary], "") + "…"
}

// Combine makes one change of several, applied in order, as one version.
func Combine(changes ...Change) Change {
	parts := make([]string, 0, len(changes))
	for _, ch := range changes {
		if ch.summary != "" {
			parts = append(parts, ch.summary)
		}
	}
	return Change{
		summary: strings.Join(parts, ", "),
		apply: func(f *feature.Feature) error {
			for _, ch := range changes {
				if err := ch.apply(f); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// SetPrerequisites replaces the feature's prerequisites, as one version
// (an empty list removes them).
func SetPrerequisites(ps []feature.Prerequisite) Change {
	ps = feature.ClonePrerequisites(ps)
	spec := request.Spec{Kind: request.SpecSetPrerequisites, Prerequisites: feature.ClonePrerequisites(ps)}
	if spec.Prerequisites == nil {
		spec.Prerequisites = []feature.Prerequisite{}
	}
	summary := "removed the prerequisites"
	if len(ps) > 0 {
		summary = AbbreviateSummary("set prerequisites: " + feature.DescribePrerequisites(ps))
	}
	return Change{
		spec:    spec,
		summary: summary,
		apply: func(f *feature.Feature) error {
			f.Prerequisites = feature.ClonePrerequisites(ps)
			return nil
		},
	}
}
