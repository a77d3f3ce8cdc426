package plan

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/rollout/rollout/ring"
	"github.com/rollout/rollout/rollout/feature"
)

// splitBudget bounds the search steps of one split's plan: a split of 2
// buckets takes a few thousand, of 10 well under this.
const splitBudget = 4_000_000

// Splits plans the ring of every split of next's rules (see
// feature.SplitRing) from the rules of before, the feature's
// configuration the change starts from, so that:
//   - a split whose ring the rules carry (as GET gave it), within
//     feature.SplitTolerance of its shares, keeps it;
//   - a split whose shares change is planned from its ring before (the
//     ring the rules carry, else that of the rule of the same name, else
//     that of a rule of before with the same shares: renamed) by
//     Nested, which moves users only into or out of the buckets
//     that change, and, changed back, returns the same ring;
//   - a new split gets a fine ring (Fine), its buckets in name
//     order, as does one whose ring before no nested plan brings within
//     tolerance.
//
// A split that no plan brings within tolerance is refused (EInvalid at
// its rule's serve.split).
func Splits(before feature.Feature, next *feature.Feature) error {
	if !slices.ContainsFunc(next.Rules, func(r feature.Rule) bool { return r.Serve.Split != nil }) {
		return nil
	}
	if err := next.ValidateSplits(); err != nil {
		return err
	}
	for i := range next.Rules {
		s := &next.Rules[i].Serve
		if s.Split == nil {
			continue
		}
		prior := s.SplitRing
		if prior == nil {
			prior = priorSplit(before.Rules, next.Rules[i])
		}
		if prior != nil && feature.SplitRingFits(prior, s.Split) {
			s.SplitRing = slices.Clone(prior)
			continue
		}
		targets := maps.Clone(s.Split)
		opts := Search{Tolerance: feature.SplitTolerance, Budget: splitBudget, Limits: Limits{MaxReplicas: feature.MaxReplicas, MaxPoints: feature.MaxPoints}}
		var res Result
		if prior != nil {
			current := make([]ring.Bucket, 0, len(prior))
			for _, b := range prior {
				if _, ok := targets[b.Name]; !ok {
					targets[b.Name] = 0
				}
				current = append(current, ring.Bucket{Name: b.Name, Replicas: b.Replicas})
			}
			res = Nested(context.Background(), current, targets, opts)
		}
		if !res.WithinTolerance {
			// New, or a ring before that no nested change brings there
			// (one given that is far too coarse): a fine ring of its own.
			res = Fine(context.Background(), slices.Sorted(maps.Keys(s.Split)), s.Split, opts)
		}
		if !res.WithinTolerance {
			at := fmt.Sprintf("rules[%d].serve.split", i)
			return &feature.Error{Code: feature.EInvalid, Field: at, Message: fmt.Sprintf(
				"%s: rule %q: no ring within the limits brings the split within %v points of its shares: use fewer buckets or rounder shares", at, next.Rules[i].Name, feature.SplitTolerance*100)}
		}
		s.SplitRing = s.SplitRing[:0:0]
		for _, b := range res.Buckets {
			if _, ok := s.Split[b.Name]; ok {
				s.SplitRing = append(s.SplitRing, feature.SplitBucket{Name: b.Name, Replicas: b.Replicas})
			}
		}
	}
	return nil
}

// priorSplit is the split ring a rule r of a change starts from: that of
// the rule of before of the same name that served a split, else that of
// the first rule of before whose split has the same shares (r renamed),
// else nil.
func priorSplit(before []feature.Rule, r feature.Rule) []feature.SplitBucket {
	for _, b := range before {
		if b.Name == r.Name && b.Serve.Split != nil {
			return b.Serve.SplitRing
		}
	}
	for _, b := range before {
		if b.Serve.Split != nil && maps.Equal(b.Serve.Split, r.Serve.Split) {
			return b.Serve.SplitRing
		}
	}
	return nil
}
