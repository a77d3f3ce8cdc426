package rollout

import (
	"context"

	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// Plan returns the plan that brings the feature key's buckets to the target
// shares (see plan.For), with the churn report of applying it by
// SetBuckets. Nothing is stored. It returns ENotFound for no such feature,
// EInvalid for bad targets, and the error the change would meet when the
// planned buckets cannot replace the current ones (removing the fallback or
// a bucket that overrides name). Its work is bounded as plan.For's.
func (s *Service) Plan(key string, targets map[string]float64, opts plan.Options) (plan.Plan, feature.Report, error) {
	return s.PlanContext(context.Background(), key, targets, opts)
}

// PlanContext is Plan, stopping when ctx is done as well (see
// plan.ForContext).
func (s *Service) PlanContext(ctx context.Context, key string, targets map[string]float64, opts plan.Options) (plan.Plan, feature.Report, error) {
	cur := s.Snapshot().Compiled(key)
	if cur == nil {
		return plan.Plan{}, feature.Report{}, feature.NotFound(key)
	}
	p, err := plan.ForContext(ctx, cur.Feature().Buckets, targets, opts)
	if err != nil {
		return plan.Plan{}, feature.Report{}, err
	}
	next := cur.Feature().Clone()
	if err := change.SetBuckets(p.Buckets).Apply(&next); err != nil {
		return plan.Plan{}, feature.Report{}, err
	}
	if err := next.Validate(); err != nil {
		return plan.Plan{}, feature.Report{}, err
	}
	next.Version++
	return p, feature.Compile(next, nil).ReportFrom(cur), nil
}
