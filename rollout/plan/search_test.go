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

// TestLazyUniverse: on fine limits the universe is hashed only as far as
// the search goes, and its figures do not depend on how far that is: after
// random runs of steps, the shares, churn and excess equal those of a
// space set afresh to the same counts and of one whose universe is hashed
// whole.
func TestLazyUniverse(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	names := []string{"A", "B", "C"}
	current := map[string]int{"A": 300, "B": 2000, "C": 50}
	targets := map[string]float64{"A": 0.5, "B": 0.3, "C": 0.2}
	sp := newPlanSpace(names, current, targets, FineTolerance, FineLimits, nil)
	if u := len(sp.pb); u != 2350 {
		t.Fatalf("a fine universe starts with %d points, want the 2,350 of the ring planned from", u)
	}
	sp.setCounts([]int{300, 2000, 50})
	whole := newPlanSpace(names, current, targets, FineTolerance, FineLimits, hashes{})
	whole.hash(whole.limit)
	for round := range 20 {
		b := rng.IntN(len(names))
		for range rng.IntN(3000) {
			if rng.IntN(3) > 0 && sp.canAdd(b) {
				sp.add(b)
			} else if sp.canRemove(b) {
				sp.remove(b)
			}
		}
		fresh := newPlanSpace(names, current, targets, FineTolerance, FineLimits, hashes{})
		fresh.setCounts(sp.n)
		whole.setCounts(sp.n)
		for _, other := range []*planSpace{fresh, whole} {
			if sp.score() != other.score() || !slices.Equal(sp.share, other.share) || !slices.Equal(sp.kept, other.kept) {
				t.Fatalf("round %d at %v (universe %d points): score %+v shares %v kept %v; a universe of %d points: %+v %v %v",
					round, sp.n, len(sp.pb), sp.score(), sp.share, sp.kept, len(other.pb), other.score(), other.share, other.kept)
			}
		}
	}
	if len(sp.pb) <= 2350 || len(sp.pb) >= len(whole.pb) {
		t.Errorf("the universe has %d points after the steps, want more than at the start and fewer than the whole %d", len(sp.pb), len(whole.pb))
	}
}
