package plan_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/rollout/rollout/ring"
	"github.com/rollout/rollout/rollout/plan"
)

// Planning a change of a fine feature (issue #21: under 100 ms each): 2, 4
// and 6 buckets sharing 20,000 points equally, or 300 points (a coarse
// feature's first re-plan), to uneven targets (bucket i gets a share in
// proportion to n-i: the first grows, the others shrink, so that a nested
// plan can make its change on a full feature), nested and exact, at the
// fine tolerance.
//
//	go test -run '^$' -bench PlanFineChange -benchmem ./rollout/plan

func evenBuckets(n, points int) []ring.Bucket {
	out := make([]ring.Bucket, n)
	for i := range out {
		out[i] = ring.Bucket{Name: fmt.Sprintf("v%d", i), Replicas: points / n}
	}
	return out
}

func unevenTargets(n int) map[string]float64 {
	out := make(map[string]float64, n)
	sum := float64(n * (n + 1) / 2)
	for i := range n {
		out[fmt.Sprintf("v%d", i)] = float64(n-i) / sum
	}
	return out
}

func BenchmarkPlanFineChange(b *testing.B) {
	for _, points := range []int{20_000, 300} {
		for _, n := range []int{2, 4, 6} {
			for _, mode := range []string{"nested", "exact"} {
				b.Run(fmt.Sprintf("from=%d/buckets=%d/%s", points, n, mode), func(b *testing.B) {
					current, targets := evenBuckets(n, points), unevenTargets(n)
					opts := plan.Search{Tolerance: plan.FineTolerance, Limits: plan.FineLimits}
					plans := plan.Shares
					if mode == "nested" {
						plans = plan.Nested
					}
					b.ReportAllocs()
					var r plan.Result
					for b.Loop() {
						r = plans(context.Background(), current, targets, opts)
					}
					b.ReportMetric(float64(r.Steps), "steps")
					b.ReportMetric(r.MaxError*100, "max-error-points")
					b.ReportMetric(r.Churn*100, "churn-%")
				})
			}
		}
	}
}

// BenchmarkPlanFineFull: a nested change of a feature at the 20,000-point
// limit that would grow its last bucket (10,000 + 10,000 replicas, 50/50 to
// 33/67): it cannot, so the plan removes replicas of the first instead,
// after trying the last.
//
//	go test -run '^$' -bench PlanFineFull -benchmem ./rollout/plan
func BenchmarkPlanFineFull(b *testing.B) {
	current := evenBuckets(2, 20_000)
	targets := map[string]float64{"v0": 0.33, "v1": 0.67}
	opts := plan.Search{Tolerance: plan.FineTolerance, Limits: plan.FineLimits}
	b.ReportAllocs()
	var r plan.Result
	for b.Loop() {
		r = plan.Nested(context.Background(), current, targets, opts)
	}
	if !r.WithinTolerance || r.Varied[0] != "v0" {
		b.Fatalf("Nested(full 50/50 → 33/67) = %v varied %v, max error %v", r.Buckets, r.Varied, r.MaxError)
	}
	b.ReportMetric(float64(r.Steps), "steps")
	b.ReportMetric(r.MaxError*100, "max-error-points")
	b.ReportMetric(r.Churn*100, "churn-%")
}
