package stats_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/stat/distuv"

	"github.com/rollout/rollout/rollout/stats"
)

// conversions returns a sample of n users of whom k converted.
func conversions(n, k int64) stats.Sample {
	return stats.Sample{N: n, Sum: float64(k), SumSq: float64(k)}
}

// TestSequentialAAPeekedDaily runs 200 A/A experiments (both arms convert
// 10 %), each read every simulated day for 30 days as 1,000 new users a
// day join each arm: an always-valid test declares at most Alpha of them
// significant on any day. A fixed-horizon z-test read daily would declare
// about a quarter.
func TestSequentialAAPeekedDaily(t *testing.T) {
	src := rand.NewPCG(33, 2026)
	daily := distuv.Binomial{N: 1000, P: 0.10, Src: src}
	const experiments, days = 200, 30
	ever, naive := 0, 0
	for range experiments {
		var a, b int64
		declared, naiveDeclared := false, false
		for day := int64(1); day <= days; day++ {
			a += int64(daily.Rand())
			b += int64(daily.Rand())
			n := day * 1000
			lift, ok := stats.Sequential(conversions(n, a), conversions(n, b))
			if ok && lift.Significant {
				declared = true
			}
			if fixedHorizonSignificant(conversions(n, a), conversions(n, b)) {
				naiveDeclared = true
			}
		}
		if declared {
			ever++
		}
		if naiveDeclared {
			naive++
		}
	}
	rate := float64(ever) / experiments
	t.Logf("A/A: %d of %d experiments ever declared significant over %d daily reads (%.1f %%); a fixed-horizon z-test read as often: %d", ever, experiments, days, 100*rate, naive)
	if rate > stats.Alpha {
		t.Errorf("A/A experiments ever significant = %.3f, want at most %g", rate, stats.Alpha)
	}
	// The simulation is able to show the peeking problem at all: the
	// naive test, read as often, errs well above Alpha.
	if naive <= experiments/10 {
		t.Errorf("fixed-horizon test ever significant in %d of %d A/A experiments, want more than %d: the simulation does not peek", naive, experiments, experiments/10)
	}
}

// fixedHorizonSignificant is the z-test of two proportions at 5 %, the
// test that peeking breaks.
func fixedHorizonSignificant(a, b stats.Sample) bool {
	pa, pb := a.Mean(), b.Mean()
	p := (a.Sum + b.Sum) / float64(a.N+b.N)
	se := p * (1 - p) * (1/float64(a.N) + 1/float64(b.N))
	if se <= 0 {
		return false
	}
	z := (pb - pa) / math.Sqrt(se)
	return z > 1.96 || z < -1.96
}

// TestSequentialDetectsLift is the case: 20,000 users per arm,
// control converting 10 %, treatment 12 %: the lift's interval holds +20 %
// and leaves out 0.
func TestSequentialDetectsLift(t *testing.T) {
	control, treatment := conversions(20_000, 2_000), conversions(20_000, 2_400)
	lift, ok := stats.Sequential(control, treatment)
	if !ok {
		t.Fatalf("Sequential(20,000 users each) cannot tell")
	}
	t.Logf("lift %+.3f, interval [%+.3f, %+.3f]", lift.Value, lift.CI.Lo, lift.CI.Hi)
	if !lift.CI.Contains(0.2) || !lift.Significant || lift.Value < 0.19 || lift.Value > 0.21 {
		t.Errorf("Sequential(10 %% vs 12 %%) = %+v, want +20 %% inside its interval and significant", lift)
	}
	// A lower lift is negative and significant the other way.
	down, _ := stats.Sequential(treatment, control)
	if !down.Significant || down.CI.Hi >= 0 {
		t.Errorf("Sequential(12 %% vs 10 %%) = %+v, want an interval below 0", down)
	}
}

func TestSequentialWaitsForUsers(t *testing.T) {
	for _, c := range []struct {
		name               string
		control, treatment stats.Sample
	}{
		{"few users", conversions(99, 10), conversions(1000, 100)},
		{"control never converts", conversions(1000, 0), conversions(1000, 100)},
	} {
		if lift, ok := stats.Sequential(c.control, c.treatment); ok {
			t.Errorf("%s: Sequential = %+v, true; want not yet", c.name, lift)
		}
	}
}

// TestMeanInterval checks the interval of one bucket's mean holds the
// true mean in nearly all of many simulated buckets.
func TestMeanInterval(t *testing.T) {
	src := rand.NewPCG(7, 7)
	draw := distuv.Binomial{N: 5000, P: 0.3, Src: src}
	missed := 0
	for range 500 {
		k := int64(draw.Rand())
		iv, ok := stats.MeanInterval(conversions(5000, k), 0.3)
		if !ok {
			t.Fatal("MeanInterval(5000 users) cannot tell")
		}
		if !iv.Contains(0.3) {
			missed++
		}
	}
	if missed > 25 {
		t.Errorf("MeanInterval missed the true mean in %d of 500 samples, want at most 25", missed)
	}
	if _, ok := stats.MeanInterval(conversions(50, 5), 0.1); ok {
		t.Errorf("MeanInterval(50 users) = ok, want not yet")
	}
}
