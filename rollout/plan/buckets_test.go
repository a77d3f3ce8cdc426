package plan_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/rollout/rollout/ring"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// The search's own tests are in plan_test.go and nested_test.go; these
// are of what For and New add: checking the request, and the answer in
// the feature's types.

func TestPlanRefuses(t *testing.T) {
	current := []feature.Bucket{{Name: "on", Replicas: 100}, {Name: "off", Replicas: 100}}
	for _, tc := range []struct {
		name    string
		targets map[string]float64
		tol     float64
		want    string
	}{
		{"empty", nil, 0, "give the target share"},
		{"sum below 1", map[string]float64{"on": 0.1, "off": 0.8}, 0, "sum to 0.9"},
		{"sum above 1", map[string]float64{"on": 0.5, "off": 0.6}, 0, "sum to 1.1"},
		{"negative", map[string]float64{"on": -0.1, "off": 1.1}, 0, `target of bucket "off" is 1.1`},
		{"NaN", map[string]float64{"on": math.NaN(), "off": 1}, 0, `target of bucket "on" is NaN`},
		{"bad name", map[string]float64{"on": 0.5, "off": 0.25, "a b": 0.25}, 0, `bucket name "a b" is invalid`},
		{"missing bucket", map[string]float64{"on": 1}, 0, `do not name bucket "off"`},
		{"negative tolerance", map[string]float64{"on": 0.5, "off": 0.5}, -0.1, "tolerance -0.1 is out of range"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := plan.For(current, tc.targets, plan.Options{Tolerance: tc.tol})
			if feature.ErrorCode(err) != feature.EInvalid || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("plan.For(%v) = %v, want EInvalid with %q", tc.targets, err, tc.want)
			}
		})
	}
	if _, err := plan.New(map[string]float64{"on": 0, "off": 1}, plan.Options{}); feature.ErrorCode(err) != feature.EInvalid {
		t.Errorf("plan.New with a 0 target = %v, want EInvalid", err)
	}
}

// TestPlanSharesIsThePlanners: plan.For and plan.New answer the plan
// package's result for the feature limits, in rollout's types, the targets
// and the tolerance used included.
func TestPlanSharesIsThePlanners(t *testing.T) {
	current := []feature.Bucket{{Name: "A", Replicas: 80}, {Name: "B", Replicas: 120}, {Name: "C", Replicas: 60}}
	ringCurrent := []ring.Bucket{{Name: "A", Replicas: 80}, {Name: "B", Replicas: 120}, {Name: "C", Replicas: 60}}
	targets := map[string]float64{"A": 0.2, "B": 0, "C": 0.55, "D": 0.25}
	limits := plan.CoarseLimits
	for _, budget := range []int64{0, 500} {
		got, err := plan.For(current, targets, plan.Options{Budget: budget})
		if err != nil {
			t.Fatal(err)
		}
		want := plan.Shares(context.Background(), ringCurrent, targets, plan.Search{Tolerance: plan.DefaultTolerance, Budget: budget, Limits: limits})
		checkWraps(t, fmt.Sprintf("plan.For, budget %d", budget), got, want, targets)

		got, err = plan.New(map[string]float64{"on": 0.1, "off": 0.9}, plan.Options{Budget: budget})
		if err != nil {
			t.Fatal(err)
		}
		want = plan.Initial(context.Background(), map[string]float64{"on": 0.1, "off": 0.9}, feature.DefaultReplicas, plan.Search{Budget: budget, Limits: limits})
		checkWraps(t, fmt.Sprintf("plan.New, budget %d", budget), got, want, map[string]float64{"on": 0.1, "off": 0.9})
	}
}

func checkWraps(t *testing.T, name string, got plan.Plan, want plan.Result, targets map[string]float64) {
	t.Helper()
	var buckets []ring.Bucket
	for _, b := range got.Buckets {
		buckets = append(buckets, ring.Bucket{Name: b.Name, Replicas: b.Replicas})
	}
	if fmt.Sprint(buckets) != fmt.Sprint(want.Buckets) || fmt.Sprint(got.SharesAfter) != fmt.Sprint(want.SharesAfter) ||
		got.Tolerance != want.Tolerance || got.MaxError != want.MaxError || got.WithinTolerance != want.WithinTolerance ||
		got.Churn != want.Churn || got.LowerBound != want.LowerBound || got.CutShort != want.CutShort ||
		got.CutReason != want.CutReason || got.Steps != want.Steps || fmt.Sprint(got.Targets) != fmt.Sprint(targets) {
		t.Errorf("%s = %+v, want the planner's %+v for targets %v", name, got, want, targets)
	}
}
