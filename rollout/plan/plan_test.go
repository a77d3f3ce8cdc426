package plan_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/rollout/rollout/ring"
	"github.com/rollout/rollout/rollout/plan"
)

func mustRing(t testing.TB, bs ...ring.Bucket) *ring.Ring {
	t.Helper()
	r, err := ring.New(bs...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// perBucket is where a new ring's plan starts: feature.DefaultReplicas
// per bucket.
const perBucket = 100

// shares plans current to targets within a feature's limits.
func shares(current []ring.Bucket, targets map[string]float64, opts plan.Search) plan.Result {
	opts.Limits = plan.FeatureLimits
	return plan.Shares(context.Background(), current, targets, opts)
}

// initial plans a new ring with targets within a feature's limits.
func initial(targets map[string]float64, opts plan.Search) plan.Result {
	opts.Limits = plan.FeatureLimits
	return plan.Initial(context.Background(), targets, perBucket, opts)
}

// checkPlan checks what every plan promises: its figures are those of the
// exact ring arithmetic, and its buckets keep the limits.
func checkPlan(t *testing.T, current []ring.Bucket, targets map[string]float64, p plan.Result) {
	t.Helper()
	before, after := mustRing(t, current...), mustRing(t, p.Buckets...)
	if got, want := p.Churn, ring.ChurnBetween(before, after).Total; got != want {
		t.Errorf("Churn = %v, want the ring's exact %v", got, want)
	}
	shares := after.Shares()
	var bound, maxErr float64
	points := 0
	for name, target := range targets {
		bound += math.Abs(before.Shares()[name] - target)
		maxErr = max(maxErr, math.Abs(shares[name]-target))
		if p.SharesAfter[name] != shares[name] {
			t.Errorf("SharesAfter[%s] = %v, want %v", name, p.SharesAfter[name], shares[name])
		}
	}
	if len(current) == 0 {
		bound++ // every user moves from no bucket
	}
	if math.Abs(p.LowerBound-bound/2) > 1e-15 {
		t.Errorf("LowerBound = %v, want %v", p.LowerBound, bound/2)
	}
	if p.MaxError != maxErr {
		t.Errorf("MaxError = %v, want %v", p.MaxError, maxErr)
	}
	if p.WithinTolerance != (maxErr <= p.Tolerance+1e-12) {
		t.Errorf("WithinTolerance = %v with max error %v, tolerance %v", p.WithinTolerance, maxErr, p.Tolerance)
	}
	lim := plan.FeatureLimits
	if p.Tolerance == plan.FineTolerance {
		lim = plan.FineLimits
	}
	for _, b := range p.Buckets {
		points += b.Replicas
		if b.Replicas < 1 && targets[b.Name] > 0 || b.Replicas < 0 || b.Replicas > lim.MaxReplicas {
			t.Errorf("bucket %s has %d replicas", b.Name, b.Replicas)
		}
		if targets[b.Name] == 0 && (b.Replicas > 0 || p.Varied == nil && p.Tolerance != plan.FineTolerance) {
			t.Errorf("bucket %s with target 0 is kept with %d replicas", b.Name, b.Replicas)
		}
	}
	if points > lim.MaxPoints {
		t.Errorf("plan has %d points", points)
	}
}

// TestReplicaStepFacts pins what the planner builds on: adding a bucket's
// next replica moves users only into it, removing its highest replica moves
// users only out of it, and changing one bucket only moves exactly the
// lower bound.
func TestReplicaStepFacts(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for c := range 200 {
		var bs []ring.Bucket
		for i := range 2 + rng.IntN(5) {
			bs = append(bs, ring.Bucket{Name: fmt.Sprintf("b%d", i), Replicas: 1 + rng.IntN(60)})
		}
		before := mustRing(t, bs...)
		j := rng.IntN(len(bs))
		grown, shrunk := slices.Clone(bs), slices.Clone(bs)
		grown[j].Replicas++
		shrunk[j].Replicas--
		name := bs[j].Name
		for _, m := range ring.ChurnBetween(before, mustRing(t, grown...)).Moves {
			if m.To != name {
				t.Fatalf("case %d: adding %s#%d moves %v", c, name, bs[j].Replicas, m)
			}
		}
		for _, m := range ring.ChurnBetween(before, mustRing(t, shrunk...)).Moves {
			if m.From != name {
				t.Fatalf("case %d: removing %s#%d moves %v", c, name, bs[j].Replicas-1, m)
			}
		}
		changed := slices.Clone(bs)
		changed[j].Replicas = 1 + rng.IntN(120)
		after := mustRing(t, changed...)
		var bound float64
		for n, s := range before.Shares() {
			bound += math.Abs(s - after.Shares()[n])
		}
		if got := ring.ChurnBetween(before, after).Total; math.Abs(got-bound/2) > 1e-15 {
			t.Fatalf("case %d: %s from %d to %d replicas moves %v, lower bound %v", c, name, bs[j].Replicas, changed[j].Replicas, got, bound/2)
		}
	}
}

// TestLumpyFirstReplicas is the example: from A, B, C × 3, D's first
// replicas give D 11.5 %, 20.4 %, 22.3 %, then 50.7 %.
func TestLumpyFirstReplicas(t *testing.T) {
	for n, want := range []float64{0.115, 0.204, 0.223, 0.507} {
		r := mustRing(t, ring.Bucket{Name: "A", Replicas: 3}, ring.Bucket{Name: "B", Replicas: 3}, ring.Bucket{Name: "C", Replicas: 3}, ring.Bucket{Name: "D", Replicas: n + 1})
		if got := r.Shares()["D"]; math.Abs(got-want) > 0.0005 {
			t.Errorf("D×%d share = %.4f, want %.3f", n+1, got, want)
		}
	}
}

// TestPlanOnOff is the example: on/off at 100/100 replicas split
// 45.03 % / 54.97 %; 10 % / 90 % within half a point moves no more than the
// 34.6 % the careful plan moves, for a bound of 35.0 %.
func TestPlanOnOff(t *testing.T) {
	current := []ring.Bucket{{Name: "on", Replicas: 100}, {Name: "off", Replicas: 100}}
	targets := map[string]float64{"on": 0.1, "off": 0.9}
	p := shares(current, targets, plan.Search{})
	checkPlan(t, current, targets, p)
	if !p.WithinTolerance || p.Tolerance != plan.DefaultTolerance {
		t.Errorf("plan %v: within tolerance %v (%v), max error %v", p.Buckets, p.WithinTolerance, p.Tolerance, p.MaxError)
	}
	if math.Abs(p.LowerBound-0.3503) > 0.0001 {
		t.Errorf("LowerBound = %v, want 0.3503", p.LowerBound)
	}
	if p.Churn > 0.346 {
		t.Errorf("plan %v moves %v, more than the issue's 0.346", p.Buckets, p.Churn)
	}
	t.Logf("plan %v: shares %v, churn %.4f, bound %.4f", p.Buckets, p.SharesAfter, p.Churn, p.LowerBound)
}

// TestPlanOneBucketReachesBound: when the targets are what changing one
// bucket gives, the plan moves no more than the lower bound.
func TestPlanOneBucketReachesBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for c := range 20 {
		var current []ring.Bucket
		for i := range 2 + rng.IntN(4) {
			current = append(current, ring.Bucket{Name: fmt.Sprintf("b%d", i), Replicas: 50 + rng.IntN(150)})
		}
		changed := slices.Clone(current)
		j := rng.IntN(len(changed))
		changed[j].Replicas = max(1, changed[j].Replicas+rng.IntN(201)-100)
		targets := mustRing(t, changed...).Shares()
		p := shares(current, targets, plan.Search{})
		checkPlan(t, current, targets, p)
		if !p.WithinTolerance || p.Churn > p.LowerBound+1e-12 {
			t.Errorf("case %d: %v → targets of %v: plan %v within %v, churn %v > bound %v", c, current, changed, p.Buckets, p.WithinTolerance, p.Churn, p.LowerBound)
		}
	}
}

type bruteResult struct {
	churn  float64
	counts []int
	found  bool
}

// bruteForce tries every count from 1 to maxReplicas of each bucket of
// names with a positive target, and returns the least churn within tol.
func bruteForce(t *testing.T, current []ring.Bucket, names []string, targets map[string]float64, tol float64, maxReplicas int) bruteResult {
	before := mustRing(t, current...)
	best := bruteResult{churn: math.Inf(1)}
	counts := make([]int, len(names))
	var walk func(i int)
	walk = func(i int) {
		if i == len(names) {
			var bs []ring.Bucket
			for b, n := range counts {
				if n > 0 {
					bs = append(bs, ring.Bucket{Name: names[b], Replicas: n})
				}
			}
			after := mustRing(t, bs...)
			shares := after.Shares()
			for _, name := range names {
				if math.Abs(shares[name]-targets[name]) > tol {
					return
				}
			}
			if c := ring.ChurnBetween(before, after).Total; c < best.churn {
				best = bruteResult{churn: c, counts: slices.Clone(counts), found: true}
			}
			return
		}
		if targets[names[i]] == 0 {
			counts[i] = 0
			walk(i + 1)
			return
		}
		for n := 1; n <= maxReplicas; n++ {
			counts[i] = n
			walk(i + 1)
		}
	}
	walk(0)
	return best
}

// TestPlanAgainstBruteForce: on small rings, wherever some counts of at
// most 8 replicas per bucket are within tolerance, the planner finds a plan
// within tolerance moving no more users than the best of them.
func TestPlanAgainstBruteForce(t *testing.T) {
	const maxReplicas = 8
	rng := rand.New(rand.NewPCG(5, 6))
	cases, agreed, better, feasible := 0, 0, 0, 0
	n := 150
	if raceEnabled || testing.Short() {
		n = 15
	}
	for c := range n {
		nb := 2 + rng.IntN(3)
		var current []ring.Bucket
		var names []string
		for i := range nb {
			name := fmt.Sprintf("b%d", i)
			names = append(names, name)
			current = append(current, ring.Bucket{Name: name, Replicas: 1 + rng.IntN(maxReplicas)})
		}
		targets := map[string]float64{}
		// Targets near a reachable split, sometimes with a new bucket or
		// without an old one.
		reach := slices.Clone(current)
		if rng.IntN(3) == 0 {
			reach = append(reach, ring.Bucket{Name: "new", Replicas: 1 + rng.IntN(maxReplicas)})
			names = append(names, "new")
			targets["new"] = 0
		}
		if rng.IntN(4) == 0 {
			reach = reach[1:]
			targets[current[0].Name] = 0
		}
		for i := range reach {
			reach[i].Replicas = 1 + rng.IntN(maxReplicas)
		}
		var sum float64
		for n, s := range mustRing(t, reach...).Shares() {
			targets[n] = max(0.001, s+(rng.Float64()-0.5)*0.02)
			sum += targets[n]
		}
		for n := range targets {
			targets[n] /= sum
		}
		tol := []float64{0.005, 0.01, 0.02}[rng.IntN(3)]
		p := shares(current, targets, plan.Search{Tolerance: tol})
		checkPlan(t, current, targets, p)
		bf := bruteForce(t, current, names, targets, tol, maxReplicas)
		cases++
		if !bf.found {
			continue
		}
		feasible++
		switch {
		case !p.WithinTolerance || p.Churn > bf.churn+1e-12:
			t.Errorf("case %d: %v → %v (tolerance %v): plan %v moves %v within %v; brute force %v moves %v",
				c, current, targets, tol, p.Buckets, p.Churn, p.WithinTolerance, bf.counts, bf.churn)
		case p.Churn < bf.churn-1e-12:
			better++ // found beyond 8 replicas
		default:
			agreed++
		}
	}
	t.Logf("%d cases, %d with a brute-force plan within tolerance: planner equal in %d, better (more replicas) in %d", cases, feasible, agreed, better)
}

// TestPlanRatios measures churn against the lower bound on random cases of
// 3 to 5 buckets with 50 to 200 replicas and random targets.
func TestPlanRatios(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var ratios []float64
	n := 50
	if raceEnabled {
		n = 8
	}
	for c := range n {
		var current []ring.Bucket
		targets := map[string]float64{}
		var sum float64
		for i := range 3 + rng.IntN(3) {
			name := fmt.Sprintf("b%d", i)
			current = append(current, ring.Bucket{Name: name, Replicas: 50 + rng.IntN(151)})
			targets[name] = 0.05 + rng.Float64()
			sum += targets[name]
		}
		for n := range targets {
			targets[n] /= sum
		}
		p := shares(current, targets, plan.Search{})
		checkPlan(t, current, targets, p)
		if !p.WithinTolerance {
			t.Errorf("case %d: %v → %v: plan %v not within tolerance (max error %v)", c, current, targets, p.Buckets, p.MaxError)
		}
		if p.Churn/p.LowerBound > 1.45 {
			t.Logf("case %d: %v → %v: plan %v churn %.4f bound %.4f", c, current, targets, p.Buckets, p.Churn, p.LowerBound)
		}
		ratios = append(ratios, p.Churn/p.LowerBound)
	}
	sort.Float64s(ratios)
	q := func(f float64) float64 { return ratios[int(f*float64(len(ratios)-1))] }
	t.Logf("churn / lower bound over %d cases: min %.3f, p25 %.3f, median %.3f, p75 %.3f, p90 %.3f, max %.3f",
		len(ratios), ratios[0], q(0.25), q(0.5), q(0.75), q(0.9), ratios[len(ratios)-1])
	// The plain local search moved 1.0 to 1.6 times the bound on
	// such cases; this one measured 0.99 to 1.614, median 1.30.
	if worst, median := ratios[len(ratios)-1], q(0.5); worst > 1.62 || median > 1.35 && !raceEnabled {
		t.Errorf("churn / lower bound: worst %.3f, median %.3f; measured 1.614 and 1.295", worst, median)
	}
}

func TestPlanDeterministic(t *testing.T) {
	current := []ring.Bucket{{Name: "A", Replicas: 80}, {Name: "B", Replicas: 120}, {Name: "C", Replicas: 60}}
	targets := map[string]float64{"A": 0.2, "B": 0.3, "C": 0.25, "D": 0.25}
	first := shares(current, targets, plan.Search{})
	for range 5 {
		again := shares(current, maps(targets), plan.Search{})
		if fmt.Sprint(again) != fmt.Sprint(first) {
			t.Fatalf("Shares = %v, then %v", first, again)
		}
	}
	var names []string
	for _, b := range first.Buckets {
		names = append(names, b.Name)
	}
	if got := strings.Join(names, ","); got != "A,B,C,D" {
		t.Errorf("plan buckets %s, want A,B,C,D", got)
	}
}

func maps(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func TestPlanRemovesAndAdds(t *testing.T) {
	current := []ring.Bucket{{Name: "A", Replicas: 100}, {Name: "B", Replicas: 100}, {Name: "C", Replicas: 100}}
	targets := map[string]float64{"A": 0.5, "B": 0, "C": 0.25, "D": 0.25}
	p := shares(current, targets, plan.Search{})
	checkPlan(t, current, targets, p)
	if len(p.Buckets) != 3 || p.Buckets[0].Name != "A" || p.Buckets[1].Name != "C" || p.Buckets[2].Name != "D" || !p.WithinTolerance {
		t.Errorf("plan %v within %v, want A, C, D within tolerance", p.Buckets, p.WithinTolerance)
	}
	t.Logf("plan %v churn %.4f bound %.4f", p.Buckets, p.Churn, p.LowerBound)
}

func TestPlanNew(t *testing.T) {
	for _, targets := range []map[string]float64{
		{"on": 0.1, "off": 0.9},
		{"A": 0.25, "B": 0.25, "C": 0.25, "D": 0.25},
		{"on": 0.01, "off": 0.99},
		{"x": 1},
	} {
		p := initial(targets, plan.Search{})
		checkPlan(t, nil, targets, p)
		if !p.WithinTolerance || p.Churn != 1 || p.LowerBound != 1 {
			t.Errorf("Initial(%v) = %v: within %v (max error %v), churn %v, bound %v", targets, p.Buckets, p.WithinTolerance, p.MaxError, p.Churn, p.LowerBound)
		}
	}
}

// BenchmarkPlan plans 10 buckets × 1,000 replicas (a full feature) to
// uneven targets; BenchmarkPlanBaseline is the cost of building and
// measuring the two rings alone, in the same run.
func BenchmarkPlan(b *testing.B) {
	current, targets := bigCase()
	b.ReportAllocs()
	for b.Loop() {
		shares(current, targets, plan.Search{})
	}
}

func BenchmarkPlanBaseline(b *testing.B) {
	current, _ := bigCase()
	b.ReportAllocs()
	for b.Loop() {
		r := mustRing(b, current...)
		_ = ring.ChurnBetween(r, r)
		_ = r.Shares()
	}
}

func bigCase() ([]ring.Bucket, map[string]float64) {
	var current []ring.Bucket
	targets := map[string]float64{}
	for i := range 10 {
		name := fmt.Sprintf("b%d", i)
		current = append(current, ring.Bucket{Name: name, Replicas: 1000})
		targets[name] = float64(i+1) / 55
	}
	return current, targets
}
