package plan

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPlanSpaceSteps: after any sequence of single replica steps, the
// incrementally kept shares, churn and excess equal those computed afresh
// from the counts, and undoing the steps restores them exactly.
func TestPlanSpaceSteps(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	names := []string{"A", "B", "C", "D"}
	targets := map[string]float64{"A": 0.4, "B": 0.3, "C": 0, "D": 0.3}
	sp := newPlanSpace(names, map[string]int{"A": 5, "B": 40, "C": 7}, targets, 0.005, FeatureLimits, nil)
	fresh := newPlanSpace(names, map[string]int{"A": 5, "B": 40, "C": 7}, targets, 0.005, FeatureLimits, hashes{})
	sp.setCounts([]int{5, 40, 0, 1})
	start := sp.score()
	var steps []int
	for i := range 3000 {
		b := rng.IntN(len(names))
		switch {
		case rng.IntN(2) == 0 && sp.canAdd(b):
			sp.add(b)
			steps = append(steps, -(b + 1))
		case sp.canRemove(b):
			sp.remove(b)
			steps = append(steps, b+1)
		}
		if i%100 == 0 {
			fresh.setCounts(sp.n)
			if sp.score() != fresh.score() || !slices.Equal(sp.share, fresh.share) || !slices.Equal(sp.owner, fresh.owner) {
				t.Fatalf("after %d steps at %v: score %+v shares %v, afresh %+v %v", i, sp.n, sp.score(), sp.share, fresh.score(), fresh.share)
			}
		}
	}
	for _, s := range slices.Backward(steps) {
		if s < 0 {
			sp.remove(-s - 1)
		} else {
			sp.add(s - 1)
		}
	}
	if sp.score() != start || !slices.Equal(sp.n, []int{5, 40, 0, 1}) {
		t.Errorf("undone: counts %v score %+v, want [5 40 0 1] %+v", sp.n, sp.score(), start)
	}
	var sum int64
	for _, s := range sp.share {
		sum += s
	}
	if sum != unitWhole {
		t.Errorf("shares sum to %d units, want %d", sum, unitWhole)
	}
}
