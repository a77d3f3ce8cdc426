package rollout_test

import (
	"context"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// TestChiSquareSF checks the χ² survival function against closed forms
// (df 1: erfc(√(x/2)); df 2: e^(−x/2); df 3; df 4) and tabled critical
// values.
func TestChiSquareSF(t *testing.T) {
	closed := map[int]func(x float64) float64{
		1: func(x float64) float64 { return math.Erfc(math.Sqrt(x / 2)) },
		2: func(x float64) float64 { return math.Exp(-x / 2) },
		3: func(x float64) float64 {
			return math.Erfc(math.Sqrt(x/2)) + math.Sqrt(2*x/math.Pi)*math.Exp(-x/2)
		},
		4: func(x float64) float64 { return math.Exp(-x/2) * (1 + x/2) },
	}
	for df, f := range closed {
		for _, x := range []float64{1e-6, 0.01, 0.5, 1, 2.5, 3, 4, 7.5, 10, 20, 50, 74, 150} {
			got, want := rollout.ChiSquareSF(x, df), f(x)
			if math.Abs(got-want) > 1e-12*max(want, 1e-300) && math.Abs(got-want) > 1e-15 {
				t.Errorf("ChiSquareSF(%v, %d) = %v, want %v", x, df, got, want)
			}
		}
	}
	for _, tc := range []struct {
		x    float64
		df   int
		want float64
	}{
		{3.841458820694124, 1, 0.05},
		{10.827566170662733, 1, 0.001},
		{11.070497693516351, 5, 0.05},
		{23.209251158954356, 10, 0.01},
		{0, 3, 1},
		{math.Inf(1), 3, 0},
	} {
		if got := rollout.ChiSquareSF(tc.x, tc.df); math.Abs(got-tc.want) > 1e-9*max(tc.want, 1e-3) {
			t.Errorf("ChiSquareSF(%v, %d) = %v, want %v", tc.x, tc.df, got, tc.want)
		}
	}
	if !math.IsNaN(rollout.ChiSquareSF(1, 0)) {
		t.Errorf("ChiSquareSF(1, 0) is a number, want NaN")
	}
}

// TestCheckSRM: the 49.57/50.43 split of a million users against
// 50/50 is a mismatch (χ² ≈ 74); counts drawn from the exact shares are
// not, in every one of 200 seeded draws; counts of a bucket with no share
// are left out and reported.
func TestCheckSRM(t *testing.T) {
	half := map[string]float64{"off": 0.5, "on": 0.5}
	r, ok := rollout.CheckSRM(3, map[string]int64{"off": 504_300, "on": 495_700}, half)
	if !ok || math.Abs(r.ChiSquare-73.96) > 0.01 || r.DF != 1 || !r.Mismatch || r.PValue > 1e-15 || r.Warning == "" {
		t.Errorf("CheckSRM(49.57/50.43) = %+v, %v; want χ² ≈ 74, a mismatch", r, ok)
	}
	rng := rand.New(rand.NewPCG(21, 5))
	shares := map[string]float64{"A": 0.2, "B": 0.3, "C": 0.4999, "D": 0.0001}
	for i := range 200 {
		counts := map[string]int64{}
		for range 20_000 {
			u, at := rng.Float64(), 0.0
			for _, name := range []string{"A", "B", "C", "D"} {
				if at += shares[name]; u < at || name == "D" {
					counts[name]++
					break
				}
			}
		}
		if r, ok := rollout.CheckSRM(1, counts, shares); !ok || r.Mismatch || r.Total != 20_000 || r.DF != 3 {
			t.Fatalf("draw %d of the exact shares: %+v, %v; want no mismatch", i, r, ok)
		}
	}
	r, ok = rollout.CheckSRM(1, map[string]int64{"A": 10, "B": 10, "gone": 5}, map[string]float64{"A": 0.5, "B": 0.5, "gone": 0})
	if !ok || r.Unexpected != 5 || r.Total != 20 || r.ChiSquare != 0 || r.PValue != 1 {
		t.Errorf("CheckSRM with a bucket of no share = %+v, %v", r, ok)
	}
	if _, ok := rollout.CheckSRM(1, map[string]int64{"A": 10}, map[string]float64{"A": 1}); ok {
		t.Errorf("CheckSRM of one bucket tested something")
	}
}

// TestExposuresSRM: the exposure report checks the current version's
// counts and every version's against the shares each served.
func TestExposuresSRM(t *testing.T) {
	ctx := context.Background()
	svc, _ := newService(t)
	mustCreate(t, svc, feature.Feature{Key: "f", Enabled: true, Salt: "f", Buckets: []feature.Bucket{{Name: "off", Replicas: 2000}, {Name: "on", Replicas: 1980}}})
	evaluate := func(from, to int) {
		snap := svc.Snapshot()
		for u := from; u < to; u++ {
			if _, err := snap.Evaluate("f", "user-"+strconv.Itoa(u)); err != nil {
				t.Fatal(err)
			}
		}
	}
	evaluate(0, 20_000)
	if err := svc.FlushExposures(ctx); err != nil {
		t.Fatal(err)
	}
	mustChange(t, svc, "f", rollout.UpdateBucket("on", ptr(200), nil))
	evaluate(20_000, 30_000)
	rep, err := svc.Exposures(ctx, "f")
	if err != nil {
		t.Fatal(err)
	}
	if rep.SRM == nil || rep.SRM.Version != 2 || rep.SRM.Total != 10_000 || rep.SRM.Mismatch {
		t.Fatalf("current version's check %+v, want version 2, 10,000 counts, no mismatch", rep.SRM)
	}
	if len(rep.VersionSRM) != 2 || rep.VersionSRM[1].Version != 1 || rep.VersionSRM[1].Total != 20_000 || rep.VersionSRM[1].Mismatch {
		t.Errorf("versions' checks %+v, want versions 2 and 1, no mismatch", rep.VersionSRM)
	}
	// Counts of version 1 read against version 2's shares would mismatch.
	v1 := map[string]int64{}
	for _, e := range rep.Versions {
		if e.Version == 1 {
			v1[e.Bucket] = e.Count
		}
	}
	cur, _ := svc.Snapshot().Feature("f")
	if r, _ := rollout.CheckSRM(1, v1, cur.Ring().Shares()); !r.Mismatch {
		t.Errorf("version 1's counts against version 2's shares: %+v, want a mismatch", r)
	}
}
