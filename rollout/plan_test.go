package rollout_test

import (
	"context"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// TestPlanContextDeadline: a plan of no feature is not found, whatever its
// context; plan.ForContext past its deadline answers at once, cut short
// by its deadline.
func TestPlanContextDeadline(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	opts := plan.Options{Tolerance: plan.MinTolerance}
	svc, _ := newService(t)
	p, _, err := svc.PlanContext(ctx, "none", map[string]float64{"on": 1}, opts)
	if feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("PlanContext of no feature = %v, %v; want not found", p, err)
	}
	current := []feature.Bucket{{Name: "on", Replicas: 100}, {Name: "off", Replicas: 100}}
	p, err = plan.ForContext(ctx, current, map[string]float64{"on": 0.1, "off": 0.9}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !p.CutShort || p.CutReason != plan.CutDeadline || p.Steps > 4*feature.MaxReplicas {
		t.Errorf("past its deadline: cut short %v (%q) after %d steps, want cut by its deadline at once", p.CutShort, p.CutReason, p.Steps)
	}
}
