package plan_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/rollout/rollout/ring"
	"github.com/rollout/rollout/rollout/plan"
)

var fine = plan.Search{Tolerance: plan.FineTolerance, Limits: plan.FineLimits}

// randomTargets returns n targets of at least 0.1 % each, summing to 1.
func randomTargets(rng *rand.Rand, n int) ([]string, map[string]float64) {
	names := make([]string, n)
	raw := make([]float64, n)
	var sum float64
	for i := range n {
		names[i] = fmt.Sprintf("v%d", i)
		raw[i] = rng.Float64()
		sum += raw[i]
	}
	targets := map[string]float64{}
	rest := 1 - 0.001*float64(n)
	for i, name := range names {
		targets[name] = 0.001 + rest*raw[i]/sum
	}
	return names, targets
}

// TestFineRandomTargets: new rings planned by Fine for random targets of 2
// to 6 buckets, each at least 0.1 %, come within 0.05 points of every
// target; so does the exact plan (Shares on fine limits) of a change to
// other random targets.
func TestFineRandomTargets(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	cases, exact := 12, 3 // exact plans of fine rings take a second each
	if testing.Short() || raceEnabled {
		cases, exact = 5, 1
	}
	for i := range cases {
		order, targets := randomTargets(rng, 2+i%5)
		p := plan.Fine(context.Background(), order, targets, fine)
		checkPlan(t, nil, targets, p)
		if !p.WithinTolerance || p.MaxError > plan.FineTolerance {
			t.Errorf("Fine(%v) = %v: max error %v, want within %v", targets, p.Buckets, p.MaxError, plan.FineTolerance)
		}
		_, next := randomTargets(rng, len(order))
		if i >= exact {
			continue
		}
		e := plan.Shares(context.Background(), p.Buckets, next, fine)
		checkPlan(t, p.Buckets, next, e)
		if !e.WithinTolerance {
			t.Errorf("Shares(%v → %v) = %v: max error %v, want within %v", p.Buckets, next, e.Buckets, e.MaxError, plan.FineTolerance)
		}
	}
}

// servedBy returns the users of 0 … n-1 that r serves with bucket.
func servedBy(r *ring.Ring, bucket string, n int) []bool {
	out := make([]bool, n)
	for u := range n {
		b, _ := r.Lookup("user-" + strconv.Itoa(u))
		out[u] = b == bucket
	}
	return out
}

// TestNestedTwoBuckets: 50 → 10 → 50 % changes only on's replicas, moves
// users only out of on and back, every user on at 10 % is on at 50 %, and
// the round trip returns exactly the ring it started from.
func TestNestedTwoBuckets(t *testing.T) {
	users := 1_000_000
	if testing.Short() {
		users = 100_000
	}
	half := map[string]float64{"off": 0.5, "on": 0.5}
	start := plan.Fine(context.Background(), []string{"off", "on"}, half, fine)
	if !start.WithinTolerance {
		t.Fatalf("Fine(50/50) = %v, max error %v", start.Buckets, start.MaxError)
	}
	ten := plan.Nested(context.Background(), start.Buckets, map[string]float64{"off": 0.9, "on": 0.1}, fine)
	checkPlan(t, start.Buckets, map[string]float64{"off": 0.9, "on": 0.1}, ten)
	if !slices.Equal(ten.Varied, []string{"on"}) || ten.Buckets[0] != start.Buckets[0] || !ten.WithinTolerance {
		t.Fatalf("Nested(50 → 10) = %v varied %v, max error %v; want only on changed, within tolerance", ten.Buckets, ten.Varied, ten.MaxError)
	}
	for _, m := range mustChurn(t, start.Buckets, ten.Buckets).Moves {
		if m.From != "on" || m.To != "off" {
			t.Errorf("50 → 10 moves %v, want only on → off", m)
		}
	}
	back := plan.Nested(context.Background(), ten.Buckets, half, fine)
	if !slices.Equal(back.Buckets, start.Buckets) {
		t.Errorf("50 → 10 → 50 = %v, want the ring it started from, %v", back.Buckets, start.Buckets)
	}
	onTen := servedBy(mustRing(t, ten.Buckets...), "on", users)
	onHalf := servedBy(mustRing(t, start.Buckets...), "on", users)
	count := 0
	for u := range users {
		if onTen[u] {
			count++
			if !onHalf[u] {
				t.Fatalf("user-%d is on at 10 %% and off at 50 %%", u)
			}
		}
	}
	if got := float64(count) / float64(users); got < 0.095 || got > 0.105 {
		t.Errorf("%d of %d users on at 10 %%", count, users)
	}
}

func mustChurn(t *testing.T, a, b []ring.Bucket) ring.Churn {
	t.Helper()
	return ring.ChurnBetween(mustRing(t, a...), mustRing(t, b...))
}

// TestNestedOneGrows: thirds to quarters with a new bucket D changes only
// D, which takes users from the others and nothing else moves; random
// two-bucket changes of fine rings are nested and within tolerance.
func TestNestedOneGrows(t *testing.T) {
	third := 1.0 / 3
	thirds := map[string]float64{"A": third, "B": third, "C": third}
	start := plan.Fine(context.Background(), []string{"A", "B", "C"}, thirds, fine)
	quarters := map[string]float64{"A": 0.25, "B": 0.25, "C": 0.25, "D": 0.25}
	p := plan.Nested(context.Background(), start.Buckets, quarters, fine)
	checkPlan(t, start.Buckets, quarters, p)
	if !slices.Equal(p.Varied, []string{"D"}) || len(p.CrossMoves) != 0 {
		t.Errorf("Nested(thirds → quarters) varied %v cross moves %v, want only D, none", p.Varied, p.CrossMoves)
	}
	for _, m := range mustChurn(t, start.Buckets, p.Buckets).Moves {
		if m.To != "D" {
			t.Errorf("thirds → quarters moves %v, want only into D", m)
		}
	}
	if e := p.SharesAfter["D"] - 0.25; e > plan.FineTolerance || -e > plan.FineTolerance {
		t.Errorf("D's share %v, want 0.25 within %v", p.SharesAfter["D"], plan.FineTolerance)
	}

	rng := rand.New(rand.NewPCG(21, 2))
	for range 8 {
		a := 0.001 + 0.998*rng.Float64()
		from := plan.Fine(context.Background(), []string{"off", "on"}, map[string]float64{"off": 1 - a, "on": a}, fine)
		b := 0.001 + 0.998*rng.Float64()
		to := map[string]float64{"off": 1 - b, "on": b}
		p := plan.Nested(context.Background(), from.Buckets, to, fine)
		if !p.WithinTolerance || len(p.Varied) != 1 {
			t.Errorf("Nested(%v → %v) = %v varied %v, max error %v", from.Buckets, to, p.Buckets, p.Varied, p.MaxError)
		}
		grow, shrink := "on", "off"
		if b < a {
			grow, shrink = "off", "on"
		}
		for _, m := range mustChurn(t, from.Buckets, p.Buckets).Moves {
			if m.From != shrink || m.To != grow {
				t.Errorf("%v → %v moves %v, want only %s → %s", a, b, m, shrink, grow)
			}
		}
	}
}

// TestNestedSeveral: a change of several buckets at once in nested mode
// changes only the buckets that change; the exact plan reaches every
// target and lists the moves between existing buckets it makes.
func TestNestedSeveral(t *testing.T) {
	order := []string{"A", "B", "C", "D"}
	start := plan.Fine(context.Background(), order, map[string]float64{"A": 0.25, "B": 0.25, "C": 0.25, "D": 0.25}, fine)
	to := map[string]float64{"A": 0.4, "B": 0.1, "C": 0.25, "D": 0.25}
	n := plan.Nested(context.Background(), start.Buckets, to, fine)
	checkPlan(t, start.Buckets, to, n)
	if !slices.Equal(n.Varied, []string{"A", "B"}) {
		t.Errorf("Nested varied %v, want A and B", n.Varied)
	}
	for i, b := range n.Buckets {
		if (b.Name == "C" || b.Name == "D") && b != start.Buckets[i] {
			t.Errorf("Nested changed %v, want C and D as they were", b)
		}
	}
	e := plan.Shares(context.Background(), start.Buckets, to, fine)
	checkPlan(t, start.Buckets, to, e)
	if !e.WithinTolerance {
		t.Errorf("exact plan max error %v, want within %v", e.MaxError, plan.FineTolerance)
	}
	var cross float64
	for _, m := range mustChurn(t, start.Buckets, e.Buckets).Moves {
		if m.From != "B" || m.To != "A" { // B shrinks, A grows: every other move crosses
			cross += m.Share
		}
	}
	if d := cross - e.CrossChurn; d > 1e-12 || d < -1e-12 {
		t.Errorf("exact plan cross churn %v, want %v (moves %v)", e.CrossChurn, cross, e.CrossMoves)
	}
	t.Logf("nested: churn %.5f max error %.5f cross %.5f; exact: churn %.5f max error %.5f cross %.5f", n.Churn, n.MaxError, n.CrossChurn, e.Churn, e.MaxError, e.CrossChurn)
}

// TestNestedCoarse: a ring too coarse for the tolerance is scaled once
// (Replanned), after which changes are nested.
func TestNestedCoarse(t *testing.T) {
	coarse := []ring.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}
	to := map[string]float64{"off": 0.9, "on": 0.1}
	p := plan.Nested(context.Background(), coarse, to, fine)
	if !p.Replanned || !p.WithinTolerance || p.Buckets[0].Replicas <= 100 {
		t.Fatalf("Nested(coarse) = %v replanned %v max error %v", p.Buckets, p.Replanned, p.MaxError)
	}
	q := plan.Nested(context.Background(), p.Buckets, map[string]float64{"off": 0.8, "on": 0.2}, fine)
	if q.Replanned || !slices.Equal(q.Varied, []string{"on"}) || q.Buckets[0] != p.Buckets[0] {
		t.Errorf("Nested after the replan = %v replanned %v varied %v", q.Buckets, q.Replanned, q.Varied)
	}
}

// onlyMoves reports the moves of the change from a to b that are not from
// the bucket from to the bucket to (exact arithmetic: ring.ChurnBetween).
func onlyMoves(t *testing.T, a, b []ring.Bucket, from, to string) {
	t.Helper()
	for _, m := range mustChurn(t, a, b).Moves {
		if m.From != from || m.To != to {
			t.Errorf("%v → %v moves %v, want only %s → %s", a, b, m, from, to)
		}
	}
}

// nestedUsers checks over users 0 … n-1 that every user on serves at the
// ring of small it serves at the ring of large: the users of the smaller
// share are a subset of those of the larger.
func nestedUsers(t *testing.T, small, large []ring.Bucket, on string, n int) {
	t.Helper()
	inSmall := servedBy(mustRing(t, small...), on, n)
	inLarge := servedBy(mustRing(t, large...), on, n)
	for u := range n {
		if inSmall[u] && !inLarge[u] {
			t.Fatalf("user-%d gets %s from %v and not from %v", u, on, small, large)
		}
	}
}

// TestNestedAtLimit: a feature at the 20,000-point limit, 10,000 + 10,000
// replicas, cannot grow a bucket: a nested change then removes replicas of
// the one shrinking, which moves users only out of it (checked exactly and
// over 1,000,000 users), within the fine tolerance both ways; going back
// is nested too.
func TestNestedAtLimit(t *testing.T) {
	users := 1_000_000
	if testing.Short() || raceEnabled {
		users = 100_000
	}
	full := []ring.Bucket{{Name: "off", Replicas: 10_000}, {Name: "on", Replicas: 10_000}}
	to := map[string]float64{"off": 0.33, "on": 0.67}
	p := plan.Nested(context.Background(), full, to, fine)
	checkPlan(t, full, to, p)
	if !p.WithinTolerance || !slices.Equal(p.Varied, []string{"off"}) || p.Buckets[1] != full[1] || p.Buckets[0].Replicas >= 10_000 {
		t.Fatalf("Nested(full 50/50 → 33/67) = %v varied %v max error %v; want off's replicas removed, within tolerance", p.Buckets, p.Varied, p.MaxError)
	}
	onlyMoves(t, full, p.Buckets, "off", "on")
	nestedUsers(t, full, p.Buckets, "on", users)

	half := map[string]float64{"off": 0.5, "on": 0.5}
	back := plan.Nested(context.Background(), p.Buckets, half, fine)
	checkPlan(t, p.Buckets, half, back)
	if !back.WithinTolerance || len(back.Varied) != 1 {
		t.Fatalf("Nested(33/67 → 50/50) = %v varied %v max error %v", back.Buckets, back.Varied, back.MaxError)
	}
	onlyMoves(t, p.Buckets, back.Buckets, "on", "off")
	nestedUsers(t, back.Buckets, p.Buckets, "on", users)

	// The other way: on shrinks, removing its replicas as before.
	q := plan.Nested(context.Background(), full, map[string]float64{"off": 0.67, "on": 0.33}, fine)
	if !q.WithinTolerance || !slices.Equal(q.Varied, []string{"on"}) || q.Buckets[0] != full[0] {
		t.Errorf("Nested(full 50/50 → 67/33) = %v varied %v max error %v; want on's replicas removed", q.Buckets, q.Varied, q.MaxError)
	}
	onlyMoves(t, full, q.Buckets, "on", "off")

	// A third bucket at 0 %: off is still the only one shrinking.
	zero := append(slices.Clone(full), ring.Bucket{Name: "beta"})
	to3 := map[string]float64{"off": 0.33, "on": 0.67, "beta": 0}
	r := plan.Nested(context.Background(), zero, to3, fine)
	checkPlan(t, zero, to3, r)
	if !r.WithinTolerance || !slices.Equal(r.Varied, []string{"off"}) || len(r.Buckets) != 3 || r.Buckets[2].Replicas != 0 {
		t.Errorf("Nested(full, beta at 0 → 33/67/0) = %v varied %v max error %v", r.Buckets, r.Varied, r.MaxError)
	}
	onlyMoves(t, zero, r.Buckets, "off", "on")
}

// TestNestedFullRandom: random two-bucket changes of features at the
// 20,000-point limit (each bucket at least 5,000 replicas), to targets of
// 0.1 % to 99.9 %, are nested (users move only from the bucket shrinking
// to the one growing, exact arithmetic) and within the fine tolerance.
func TestNestedFullRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 3))
	cases := 24
	if testing.Short() || raceEnabled {
		cases = 6
	}
	for range cases {
		k := 5_000 + rng.IntN(10_001)
		from := []ring.Bucket{{Name: "off", Replicas: k}, {Name: "on", Replicas: 20_000 - k}}
		b := 0.001 + 0.998*rng.Float64()
		to := map[string]float64{"off": 1 - b, "on": b}
		p := plan.Nested(context.Background(), from, to, fine)
		checkPlan(t, from, to, p)
		if !p.WithinTolerance || len(p.Varied) != 1 {
			t.Errorf("Nested(%v → %v) = %v varied %v, max error %v", from, to, p.Buckets, p.Varied, p.MaxError)
			continue
		}
		grow, shrink := "on", "off"
		if p.SharesAfter["on"] < plan.RingShares(map[string]int{"off": k, "on": 20_000 - k})["on"] {
			grow, shrink = "off", "on"
		}
		onlyMoves(t, from, p.Buckets, shrink, grow)
	}
}

// TestNestedStaysFine: from a fine ring whose anchor (off) has a small
// share, 50/50 by shrinking on would leave a ring too coarse for the
// tolerance (the next change would re-plan, moving users across): the
// nested plan grows off instead, within tolerance on a fine ring, and the
// change back is nested too, with no re-plan.
func TestNestedStaysFine(t *testing.T) {
	half := map[string]float64{"off": 0.5, "on": 0.5}
	for _, a := range []float64{0.01, 0.1, 0.2} {
		from := map[string]float64{"off": a, "on": 1 - a}
		start := plan.Fine(context.Background(), []string{"off", "on"}, from, fine)
		p := plan.Nested(context.Background(), start.Buckets, half, fine)
		checkPlan(t, start.Buckets, half, p)
		if points := p.Buckets[0].Replicas + p.Buckets[1].Replicas; !p.WithinTolerance || points < 2000 || p.Replanned {
			t.Errorf("Nested(%v → 50/50) = %v varied %v max error %v; want within tolerance on at least 2,000 points", start.Buckets, p.Buckets, p.Varied, p.MaxError)
		}
		onlyMoves(t, start.Buckets, p.Buckets, "on", "off")
		back := plan.Nested(context.Background(), p.Buckets, from, fine)
		checkPlan(t, p.Buckets, from, back)
		if !back.WithinTolerance || back.Replanned || len(back.Varied) != 1 {
			t.Errorf("Nested(%v → back) = %v varied %v replanned %v max error %v", p.Buckets, back.Buckets, back.Varied, back.Replanned, back.MaxError)
		}
		onlyMoves(t, p.Buckets, back.Buckets, "off", "on")
	}
}
