package plan

import (
	"context"
	"maps"
	"math"
	"slices"

	"github.com/rollout/rollout/ring"
)

// Nested plans: only the replicas of the buckets that change move, each to
// the count whose share comes closest to its target with the others as they
// are. Adding a replica of a bucket only takes users into it, removing one
// only gives its users away, so a plan that changes one bucket is nested:
// users move only into it (or only out of it), and a user it serves at one
// share it serves at every larger share. The count is a function of the
// other buckets' counts and the target alone (the crossing of a monotone
// share, ties to the smaller count), so changing a bucket's share and back
// returns exactly the same ring when the same bucket makes both changes.
// Which bucket changes is a choice: for two buckets either (one grows as
// the other shrinks), and Nested prefers the one after the anchor, as Fine
// plans it; when that one cannot reach its target within the limits (a
// full 20,000-point ring cannot grow it) or only on a ring too coarse for
// the tolerance, the other one changes: its replicas are removed (or
// added), which is as nested, but the change back is then made by the
// preferred bucket and returns other users than those it started from.

// FineTolerance is the tolerance of fine plans (Nested, Fine and Shares on
// fine limits) when none is given: 0.05 percentage points.
const FineTolerance = 0.0005

// fineTotal is the number of points a fine ring starts from at tolerance
// tol: four points per tolerance, where a share moves by one arc of about
// 1/points per replica (4,000 points at FineTolerance: 2,000 each for
// 50/50, within 0.031 points).
func fineTotal(tol float64, lim Limits) int {
	return min(lim.MaxPoints, max(64, int(math.Ceil(2/tol))))
}

// Nested plans the change of current to targets that moves users only into
// or out of the buckets that change (see the comment above). Targets are as
// for Shares; a target of 0 keeps the bucket with 0 replicas. The buckets
// it changes, Result.Varied, are:
//   - one bucket, when every other bucket's target is its current share
//     scaled by what that bucket leaves (within tolerance): one bucket grows
//     at the others' expense or shrinks in their favour, as in every change
//     of two buckets. Of several such, the first in order that is not the
//     anchor (the first bucket with replicas and a target above 0), which
//     stays as it is; but when its plan misses the tolerance, or meets it
//     only on a ring of fewer than half the points a fine ring starts
//     from, the next of them whose plan does (within tolerance on enough
//     points, else within tolerance, else the closest): for two buckets
//     the other one, the anchor;
//   - else every bucket whose share misses its target by more than the
//     tolerance, less the anchor when no other bucket with users is left
//     as it is. The others keep their replicas; their shares drift, and
//     users may move between two changed buckets (Result.CrossMoves).
//
// A ring too coarse for the tolerance (fewer than half the points a fine
// ring starts from) is first scaled: every bucket's replicas are multiplied
// so the ring has enough points, which moves users once (Result.Replanned);
// then the change is planned as above.
func Nested(ctx context.Context, current []ring.Bucket, targets map[string]float64, opts Search) Result {
	tol := opts.tolerance()
	counts := make(map[string]int, len(targets))
	order := make([]string, 0, len(targets))
	points := 0
	for _, b := range current {
		counts[b.Name] = b.Replicas
		order = append(order, b.Name)
		points += b.Replicas
	}
	for _, name := range slices.Sorted(maps.Keys(targets)) {
		if _, ok := counts[name]; !ok {
			order = append(order, name)
		}
	}
	h := hashes{}
	before := h.ring(counts)
	shares := before.Shares()
	anchor := ""
	for _, name := range order {
		if counts[name] > 0 && targets[name] > 0 {
			anchor = name
			break
		}
	}
	changed := func(name string) bool {
		return math.Abs(shares[name]-targets[name]) > tol+ShareSlack || targets[name] == 0 && counts[name] > 0
	}
	candidates := singleChange(order, anchor, shares, targets, tol, changed)
	var varied []string
	if len(candidates) > 0 {
		varied = candidates[:1]
	} else {
		keepsUsers := false
		for _, name := range order {
			if changed(name) {
				varied = append(varied, name)
			} else if counts[name] > 0 && targets[name] > 0 {
				keepsUsers = true
			}
		}
		if !keepsUsers && anchor != "" {
			varied = slices.DeleteFunc(varied, func(n string) bool { return n == anchor })
		}
	}

	start := maps.Clone(counts)
	replanned := false
	if want := fineTotal(tol, opts.Limits); len(varied) > 0 && points > 0 && points < want/2 {
		// Too coarse: scale every bucket that keeps users.
		k := want / points
		for _, name := range order {
			if !slices.Contains(varied, name) {
				start[name] = min(counts[name]*k, opts.Limits.MaxReplicas)
			}
		}
		replanned = true
	}

	names := slices.Sorted(slices.Values(order))
	var steps int64
	plan := func(varied []string) Result {
		sp := newSpace(names, counts, h, targets, tol, opts.Limits, func(name string) (int, int) {
			if !slices.Contains(varied, name) {
				return start[name], start[name]
			}
			if targets[name] == 0 {
				return 0, 0
			}
			return 0, opts.Limits.MaxReplicas
		})
		sp.ctx, sp.budget, sp.before = ctx, opts.budget()-steps, before
		sp.setCounts(countsOf(names, start))
		vary := make([]int, len(varied))
		for i, name := range varied {
			vary[i], _ = slices.BinarySearch(names, name)
		}
		sp.closestAll(vary)
		r := sp.result(order, names, counts, targets, tol, true)
		steps += r.Steps
		r.Steps = steps
		r.Varied, r.Replanned = varied, replanned
		return r
	}
	r := plan(varied)
	if replanned {
		return r
	}
	// The bucket preferred cannot reach its target within the limits (a
	// full ring cannot grow it), or only on a ring too coarse for the
	// tolerance: another bucket whose change alone brings the others to
	// their targets, such as the one shrinking, whose replicas it removes,
	// may. The first within tolerance on a fine ring wins, else the first
	// within tolerance, else the closest.
	want := fineTotal(tol, opts.Limits)
	fine := func(r Result) bool {
		n := 0
		for _, b := range r.Buckets {
			n += b.Replicas
		}
		return r.WithinTolerance && n >= want/2
	}
	for _, b := range candidates[min(1, len(candidates)):] {
		if fine(r) || r.CutShort {
			break
		}
		if q := plan([]string{b}); fine(q) || !r.WithinTolerance && q.MaxError < r.MaxError {
			r = q
		} else {
			r.Steps = q.Steps
		}
	}
	return r
}

// singleChange returns the buckets whose change alone brings the others to
// their targets, scaled (see Nested), in the order Nested prefers them: by
// order, the anchor last.
func singleChange(order []string, anchor string, shares, targets map[string]float64, tol float64, changed func(string) bool) []string {
	var out []string
	prefer := slices.DeleteFunc(slices.Clone(order), func(n string) bool { return n == anchor })
	if anchor != "" {
		prefer = append(prefer, anchor)
	}
	for _, b := range prefer {
		if !changed(b) || shares[b] >= 1 {
			continue
		}
		scale := (1 - targets[b]) / (1 - shares[b])
		ok := true
		for _, o := range order {
			if o != b && math.Abs(targets[o]-shares[o]*scale) > tol+ShareSlack {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, b)
		}
	}
	return out
}

// Fine plans the replicas of a new ring whose buckets, in order, get the
// target shares, with nested changes in mind: the first bucket with a
// target above 0 (the anchor) gets its share of a fine ring's points
// (fineTotal), and every other bucket the count closest to its target with
// the others as they are, in turn, until no count changes. Doubling the
// points while the shares miss the tolerance, it returns the first plan
// within it, or the closest. A target of 0 gives the bucket 0 replicas.
// Changing one bucket of the result by Nested and back returns it.
func Fine(ctx context.Context, order []string, targets map[string]float64, opts Search) Result {
	tol := opts.tolerance()
	anchor := slices.IndexFunc(order, func(n string) bool { return targets[n] > 0 })
	names := slices.Sorted(slices.Values(order))
	var best Result
	var steps int64
	for total := fineTotal(tol, opts.Limits); ; total *= 2 {
		total = min(total, opts.Limits.MaxPoints)
		start := make(map[string]int, len(order))
		var vary []int
		for i, name := range order {
			start[name] = int(math.Round(targets[name] * float64(total)))
			if targets[name] > 0 {
				start[name] = max(1, start[name])
			}
			if i != anchor && targets[name] > 0 {
				j, _ := slices.BinarySearch(names, name)
				vary = append(vary, j)
			}
		}
		sp := newSpace(names, nil, nil, targets, tol, opts.Limits, func(name string) (int, int) {
			if name == order[anchor] || targets[name] == 0 {
				return start[name], start[name]
			}
			return 1, opts.Limits.MaxReplicas
		})
		sp.ctx, sp.budget = ctx, opts.budget()
		sp.setCounts(countsOf(names, start))
		sp.closestAll(vary)
		r := sp.result(order, names, nil, targets, tol, true)
		steps += r.Steps
		if best.Buckets == nil || r.MaxError < best.MaxError {
			best = r
		}
		best.Steps = steps
		if best.WithinTolerance || best.CutShort || total >= opts.Limits.MaxPoints {
			return best
		}
	}
}

// newSpace is newPlanSpace with the bounds of each bucket's count given by
// bounds (lo, hi), and no bound on points beyond lim.MaxPoints.
func newSpace(names []string, current map[string]int, h hashes, targets map[string]float64, tol float64, lim Limits, bounds func(string) (int, int)) *planSpace {
	nb := len(names)
	sp := &planSpace{
		target: make([]int64, nb), tol: toUnits(tol),
		lo: make([]int, nb), hi: make([]int, nb), maxPoints: lim.MaxPoints,
		idx: make([][]int32, nb), n: make([]int, nb), share: make([]int64, nb),
		kept: make([]int64, nb), origSh: make([]int64, nb),
		ctx: context.Background(), budget: math.MaxInt64,
	}
	for b, name := range names {
		sp.target[b] = toUnits(targets[name])
		sp.lo[b], sp.hi[b] = bounds(name)
	}
	sp.build(names, current, h)
	return sp
}

func countsOf(names []string, counts map[string]int) []int {
	out := make([]int, len(names))
	for b, name := range names {
		out[b] = counts[name]
	}
	return out
}

// closestAll sets each bucket of vary in turn to its closest count (see
// closest), over and over until a round changes nothing (at most
// maxRounds), or the search is stopped.
func (sp *planSpace) closestAll(vary []int) {
	const maxRounds = 16
	for range maxRounds {
		moved := false
		for _, b := range vary {
			if sp.stopped() {
				return
			}
			n0 := sp.n[b]
			sp.closest(b)
			moved = moved || sp.n[b] != n0
		}
		if !moved || len(vary) == 1 {
			return
		}
	}
}

// closest sets bucket b's count to the one, within its bounds, whose share
// comes closest to its target with the other counts as they are; of two
// equally close, the smaller. A bucket's share never falls as its count
// grows, so the result depends on the other counts and the target alone,
// not on the count it starts from.
func (sp *planSpace) closest(b int) {
	t := sp.target[b]
	for sp.share[b] < t && sp.canAdd(b) && !sp.stopped() {
		sp.add(b)
	}
	for sp.share[b] > t && sp.canRemove(b) && !sp.stopped() {
		sp.remove(b)
	}
	// Now share(n) <= t < share(n+1), or a bound: compare with n+1.
	if sp.share[b] <= t && sp.canAdd(b) && !sp.stopped() {
		under := t - sp.share[b]
		sp.add(b)
		if sp.share[b]-t >= under {
			sp.remove(b)
		}
	}
}

// result is the plan of the space's counts, with its exact figures
// measured against the ring of current (nil: none); keepEmpty keeps the
// buckets of 0 replicas, which else are left out.
func (sp *planSpace) result(order, names []string, current map[string]int, targets map[string]float64, tol float64, keepEmpty bool) Result {
	p := Result{Tolerance: tol, Buckets: []ring.Bucket{}, Steps: sp.steps, CutShort: sp.cut != "", CutReason: sp.cut}
	for _, name := range order {
		b, _ := slices.BinarySearch(names, name)
		_, was := current[name]
		if sp.n[b] > 0 || keepEmpty && (was || targets[name] == 0) {
			p.Buckets = append(p.Buckets, ring.Bucket{Name: name, Replicas: sp.n[b]})
		}
	}
	before := sp.before
	if before == nil {
		before = mustRing(current)
	}
	ps := make([][]ring.Position, len(p.Buckets))
	for i, bk := range p.Buckets {
		b, _ := slices.BinarySearch(names, bk.Name)
		ps[i] = sp.pos[b] // the universe holds every count the search reached
	}
	after, err := ring.NewHashed(p.Buckets, ps)
	if err != nil {
		panic("plan: the ring of a plan: " + err.Error())
	}
	sharesBefore := before.Shares()
	p.SharesAfter = after.Shares()
	for _, b := range p.Buckets {
		if _, ok := p.SharesAfter[b.Name]; !ok {
			p.SharesAfter[b.Name] = 0
		}
	}
	c := ring.ChurnBetween(before, after)
	p.Churn = c.Total
	var bound float64
	for _, name := range names {
		bound += math.Abs(sharesBefore[name] - targets[name])
		p.MaxError = max(p.MaxError, math.Abs(p.SharesAfter[name]-targets[name]))
	}
	if before.Len() == 0 {
		bound = 2 // everyone moves from no bucket
	}
	p.LowerBound = bound / 2
	p.WithinTolerance = p.MaxError <= tol+ShareSlack
	p.CrossMoves, p.CrossChurn = crossMoves(c.Moves, sharesBefore, targets, tol)
	return p
}

// crossMoves returns the moves of users between two buckets that had users
// before which a nested change would not make: into a bucket whose target
// is not above its share before by more than the tolerance, or out of one
// whose target is not below it by more than the tolerance. They switch users between existing variants of a running experiment.
func crossMoves(moves []ring.Move, before, targets map[string]float64, tol float64) ([]ring.Move, float64) {
	out := []ring.Move{}
	var total float64
	for _, m := range moves {
		if before[m.From] <= 0 || before[m.To] <= 0 {
			continue
		}
		grows := targets[m.To] > before[m.To]+tol+ShareSlack
		shrinks := targets[m.From] < before[m.From]-tol-ShareSlack
		if !grows || !shrinks {
			out = append(out, m)
			total += m.Share
		}
	}
	return out, total
}
