package rollout_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
	"github.com/rollout/rollout/rollout/ramp"
)

// TestPlanToleranceRange: a tolerance finer than one user in a million, of
// 1 or more, or not a number is refused, and changes nothing; the finest
// allowed and the future default plan.
func TestPlanToleranceRange(t *testing.T) {
	current := []feature.Bucket{{Name: "on", Replicas: 100}, {Name: "off", Replicas: 100}}
	targets := map[string]float64{"on": 0.1, "off": 0.9}
	for _, tol := range []float64{-0.1, 9e-7, 1e-9, 1, 1.5, math.NaN(), math.Inf(1), math.Inf(-1), -math.SmallestNonzeroFloat64} {
		_, err := plan.For(current, targets, plan.Options{Tolerance: tol})
		if feature.ErrorCode(err) != feature.EInvalid || !strings.Contains(err.Error(), fmt.Sprintf("tolerance %v is out of range", tol)) {
			t.Errorf("plan.For with tolerance %v = %v, want EInvalid", tol, err)
		}
		if _, err := plan.New(targets, plan.Options{Tolerance: tol}); feature.ErrorCode(err) != feature.EInvalid {
			t.Errorf("plan.New with tolerance %v = %v, want EInvalid", tol, err)
		}
		if plan.ValidTolerance(tol) {
			t.Errorf("ValidTolerance(%v) = true", tol)
		}
	}
	for _, tol := range []float64{plan.MinTolerance, 1e-5, 0.0005, 0.5, math.Nextafter(1, 0)} {
		p, err := plan.For(current, targets, plan.Options{Tolerance: tol})
		if err != nil || p.Tolerance != tol {
			t.Errorf("plan.For with tolerance %v = %v, %v", tol, p, err)
		}
	}
}

// TestToleranceOneRule: plans and ramps accept the same tolerances, those
// CheckTolerance accepts, and refuse the others with its message; 0, in Go
// options, is the default.
func TestToleranceOneRule(t *testing.T) {
	clock := newTestClock()
	svc := openServices(t, 1, clock.clock())[0]
	current := []feature.Bucket{{Name: "on", Replicas: 2}, {Name: "off", Replicas: 100}}
	targets := map[string]float64{"on": 0.1, "off": 0.9}
	ramp := func(i int, tol float64) (ramp.Ramp, error) {
		key := fmt.Sprintf("f%d", i)
		mustCreate(t, svc, onOff(key, 2, 100))
		return svc.CreateRamp(context.Background(), key, ramp.Spec{Bucket: "on", Shares: []float64{0.5}, Tolerance: tol}, "")
	}
	i := 0
	for _, tol := range []float64{-0.1, 9e-7, 1e-9, 1, 1.5, math.NaN(), math.Inf(1)} {
		want := fmt.Sprintf("tolerance %v is out of range", tol)
		err := plan.CheckTolerance(tol)
		if feature.ErrorCode(err) != feature.EInvalid || !strings.Contains(feature.ErrorMessage(err), want) {
			t.Errorf("CheckTolerance(%v) = %v, want EInvalid with %q", tol, err, want)
		}
		if _, err := plan.For(current, targets, plan.Options{Tolerance: tol}); feature.ErrorMessage(err) != feature.ErrorMessage(plan.CheckTolerance(tol)) {
			t.Errorf("plan.For with tolerance %v = %v, want CheckTolerance's error", tol, err)
		}
		i++
		if _, err := ramp(i, tol); feature.ErrorCode(err) != feature.EInvalid || feature.ErrorMessage(err) != feature.ErrorMessage(plan.CheckTolerance(tol)) {
			t.Errorf("CreateRamp with tolerance %v = %v, want CheckTolerance's error", tol, err)
		}
	}
	for _, tol := range []float64{0, plan.MinTolerance, 0.005, 0.5, 0.7, math.Nextafter(1, 0)} {
		if err := plan.CheckTolerance(tol); (err == nil) != (tol != 0) {
			t.Errorf("CheckTolerance(%v) = %v", tol, err)
		}
		want := tol
		if tol == 0 {
			want = plan.DefaultTolerance
		}
		if p, err := plan.For(current, targets, plan.Options{Tolerance: tol}); err != nil || p.Tolerance != want {
			t.Errorf("plan.For with tolerance %v: tolerance %v, %v; want %v", tol, p.Tolerance, err, want)
		}
		i++
		if r, err := ramp(i, tol); err != nil || r.Tolerance != want {
			t.Errorf("CreateRamp with tolerance %v: tolerance %v, %v; want %v", tol, r.Tolerance, err, want)
		}
	}
}
