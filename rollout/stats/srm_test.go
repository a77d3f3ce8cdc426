package stats_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/rollout/rollout/rollout/stats"
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
			got, want := stats.ChiSquareSF(x, df), f(x)
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
		if got := stats.ChiSquareSF(tc.x, tc.df); math.Abs(got-tc.want) > 1e-9*max(tc.want, 1e-3) {
			t.Errorf("ChiSquareSF(%v, %d) = %v, want %v", tc.x, tc.df, got, tc.want)
		}
	}
	if !math.IsNaN(stats.ChiSquareSF(1, 0)) {
		t.Errorf("ChiSquareSF(1, 0) is a number, want NaN")
	}
}

// TestCheckSRM: the 49.57/50.43 split of a million users against
// 50/50 is a mismatch (χ² ≈ 74); counts drawn from the exact shares are
// not, in every one of 200 seeded draws; counts of a bucket with no share
// are left out and reported.
func TestCheckSRM(t *testing.T) {
	half := map[string]float64{"off": 0.5, "on": 0.5}
	r, ok := stats.CheckSRM(3, map[string]int64{"off": 504_300, "on": 495_700}, half)
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
		if r, ok := stats.CheckSRM(1, counts, shares); !ok || r.Mismatch || r.Total != 20_000 || r.DF != 3 {
			t.Fatalf("draw %d of the exact shares: %+v, %v; want no mismatch", i, r, ok)
		}
	}
	r, ok = stats.CheckSRM(1, map[string]int64{"A": 10, "B": 10, "gone": 5}, map[string]float64{"A": 0.5, "B": 0.5, "gone": 0})
	if !ok || r.Unexpected != 5 || r.Total != 20 || r.ChiSquare != 0 || r.PValue != 1 {
		t.Errorf("CheckSRM with a bucket of no share = %+v, %v", r, ok)
	}
	if _, ok := stats.CheckSRM(1, map[string]int64{"A": 10}, map[string]float64{"A": 1}); ok {
		t.Errorf("CheckSRM of one bucket tested something")
	}
}
