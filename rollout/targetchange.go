package rollout

import (
	"context"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/exposure"
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
		summary = abbreviateSummary("set rules: " + strings.Join(parts, "; "))
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

// maxSummary bounds the summary of a rules change.
const maxSummary = 1000

func abbreviateSummary(s string) string {
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

// estimateRules sets the Estimate of each population of rep.Rules, from the
// evaluations of feature key in the last 24 hours per rule: those stored
// for the hours that began in them (of every version) and those still in
// memory (exposure.EstimateRules).
func (s *Service) estimateRules(ctx context.Context, key string, rep *feature.Report) error {
	if len(rep.Rules) == 0 {
		return nil
	}
	cur, err := s.known(ctx, key)
	if err != nil {
		return err
	}
	stored, err := s.store.RuleExposures(ctx, cur.Feature().Key, s.now().UTC().Add(-24*time.Hour).Truncate(time.Hour).Add(time.Hour))
	if err != nil {
		return err
	}
	exposure.EstimateRules(rep, cur.Feature().ID, stored, s.inMemory(cur))
	return nil
}
