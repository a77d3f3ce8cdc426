// Package plan plans a feature's buckets: the replica counts whose exact
// shares come within a tolerance of target shares, moving as few users as
// it can from the ring planned from. For and New (buckets.go) check a
// request, its targets, tolerance (CheckTolerance, the one rule for a
// tolerance, of plans and ramps alike) and mode, and answer a Plan in the
// feature's types; package rollout's Service.Plan, documents and ramps
// call them. The search under them knows rings (package ring), not
// features: its inputs are bucket names, replica counts, target shares
// and limits, which the caller has checked, and its Result is replica
// counts with their exact figures. Shares and Initial (plan.go, with the
// search of search.go) search every bucket's count; Nested and Fine
// (nested.go) plan fine rings whose changes move users only into or out
// of the buckets that change. It imports neither HTTP nor SQL.
package plan

import (
	"context"
	"maps"
	"math"
	"slices"

	"github.com/rollout/rollout/ring"
)

// DefaultTolerance is how far, as a fraction of users, a planned bucket's
// share may miss its target (or a ramp's step its share) when no tolerance
// is given: half a percentage point.
const DefaultTolerance = 0.005

// DefaultBudget is the number of search steps a plan takes at most when
// its Search gives no budget. A step adds or removes one replica and updates
// the plan's figures; it costs 35 to 250 nanoseconds (measured on an idle
// and a loaded machine), so a plan stops within one to five seconds on one
// core. Every plan of up to 10 buckets at the default tolerance measured
// took fewer than 2,000,000 steps; 40 buckets take 20 to 80 million, of
// which this budget is enough to come within tolerance in the cases
// measured.
const DefaultBudget = 20_000_000

// reserveShare: a plan's search keeps back this fraction (1/reserveShare)
// of its budget to improve, toward the tolerance first, the best plan it
// found when the rest runs out.
const reserveShare = 5

// ShareSlack absorbs the rounding of shares to float64 when they are
// compared with a target and a tolerance.
const ShareSlack = 1e-12

// Why a plan was cut short (Result.CutReason).
const (
	CutBudget   = "budget"   // its Search.Budget was spent
	CutDeadline = "deadline" // its context's deadline passed
	CutCanceled = "canceled" // its context was canceled: no one waits for it
)

// Limits bound the replica counts a plan chooses: 1 to MaxReplicas for
// each bucket with a target above 0, at most MaxPoints in all.
type Limits struct {
	MaxReplicas int
	MaxPoints   int
}

// Search tunes the search of a plan.
type Search struct {
	// Tolerance is the largest difference allowed between a bucket's share
	// and its target, above 0; 0 means DefaultTolerance.
	Tolerance float64
	// Budget bounds the search: the plan stops after this many steps
	// (replicas added or removed while trying count) and is the best found
	// so far, cut short. 0 means DefaultBudget.
	Budget int64
	// Limits must be given.
	Limits Limits
	// KeepEmpty keeps the buckets whose target is 0 in the plans of
	// Shares and Initial, with 0 replicas (present, serving nobody),
	// where else they are left out. Nested and Fine always keep them.
	KeepEmpty bool
}

func (o Search) tolerance() float64 {
	if o.Tolerance == 0 {
		return DefaultTolerance
	}
	return o.Tolerance
}

func (o Search) budget() int64 {
	if o.Budget <= 0 {
		return DefaultBudget
	}
	return o.Budget
}

// Result is a plan: replica counts and their exact figures.
type Result struct {
	// Buckets are the planned buckets: the current ones in their order,
	// less those whose target is 0 (kept with 0 replicas by Nested and
	// Fine, and with Search.KeepEmpty), then new ones by name.
	Buckets     []ring.Bucket
	SharesAfter map[string]float64 // exact share of each planned bucket
	Tolerance   float64            // the tolerance planned to
	// MaxError is the largest |share after − target| over the buckets.
	MaxError float64
	// WithinTolerance reports whether MaxError is within Tolerance. When
	// no replica counts within the limits reach it, the plan is the
	// closest the search found.
	WithinTolerance bool
	// Churn is the exact fraction of users the plan moves from the current
	// buckets (1 for a new ring: every user gets a bucket).
	Churn float64
	// LowerBound is ½·Σ|share now − target|: no plan that reaches the
	// targets exactly moves fewer users.
	LowerBound float64
	// CutShort reports that the search stopped before it had finished,
	// for CutReason (CutBudget, CutDeadline or CutCanceled): the plan is
	// the best it had found, its figures exact and its counts within the
	// limits.
	CutShort  bool
	CutReason string
	// Steps is the number of steps the search took (see Search.Budget).
	Steps int64
	// CrossMoves are the moves of users between two buckets that had
	// users before which a nested change would not make: into a bucket
	// whose target is not above its share before, or out of one whose
	// target is not below it; CrossChurn is their total.
	CrossMoves []ring.Move
	CrossChurn float64
	// Varied are the buckets whose replicas a nested plan changes, in
	// order; Replanned reports that it first scaled a ring too coarse for
	// its tolerance (see Nested).
	Varied    []string
	Replanned bool
}

// Shares plans the replicas that bring the ring of current to the target
// shares (bucket name → fraction of users) and, among the replica counts
// it searches, moves the fewest users it finds. The caller has checked the
// input: current's buckets are a valid ring within opts.Limits, targets
// name every one of them (0 removes it, or keeps it with 0 replicas with
// opts.KeepEmpty) and maybe new ones, with valid
// names and fractions from 0 to 1 that sum to 1. It stops when its budget
// is spent or ctx is done, at the best plan it has found, cut short. Cut by
// its budget alone, or not cut, it is deterministic.
func Shares(ctx context.Context, current []ring.Bucket, targets map[string]float64, opts Search) Result {
	counts := make(map[string]int, len(current))
	order := make([]string, 0, len(targets))
	for _, b := range current {
		counts[b.Name] = b.Replicas
		order = append(order, b.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(targets)) {
		if _, ok := counts[name]; !ok {
			order = append(order, name)
		}
	}
	h := hashes{}
	before := h.ring(counts)
	return planFrom(ctx, order, counts, before, h, targets, opts, sharesStarts(order, counts, before, targets, opts.Limits), false)
}

// sharesStarts returns where the search for Shares starts: the current
// counts (a new bucket with 1 replica), then counts that would give each
// bucket its target if its points kept their current density, at 1, 2, 4, …
// times the current number of points while they fit the limits. The later
// starts matter on small rings, whose shares are too lumpy to reach a
// target near the current counts.
func sharesStarts(order []string, current map[string]int, now *ring.Ring, targets map[string]float64, lim Limits) []map[string]int {
	shares := now.Shares()
	first := make(map[string]int, len(order))
	for _, name := range order {
		first[name] = current[name]
	}
	starts := []map[string]int{first}
	for k := 1; k*now.Len() <= lim.MaxPoints; k *= 2 {
		start, fits := make(map[string]int, len(order)), true
		for _, name := range order {
			want := targets[name] * float64(k*now.Len()) // a new bucket: its part of the points
			if s := shares[name]; s > 0 {
				want = float64(k*current[name]) * targets[name] / s
			}
			n := int(math.Round(want))
			if targets[name] > 0 {
				n = max(n, 1)
			}
			fits = fits && n <= lim.MaxReplicas
			start[name] = n
		}
		if !fits {
			break
		}
		starts = append(starts, start)
	}
	return starts
}

// Initial plans the replicas of a new ring whose buckets get the target
// shares: counts near perBucket replicas per bucket in proportion to the
// targets, adjusted until every share is within tolerance. Targets are as
// for Shares, each above 0. Its Churn is 1 and its LowerBound 1: every user
// gets a bucket. Its work is bounded as Shares's.
func Initial(ctx context.Context, targets map[string]float64, perBucket int, opts Search) Result {
	names := slices.Sorted(maps.Keys(targets))
	var starts []map[string]int
	for k := 1; k*perBucket*len(names) <= 2*opts.Limits.MaxPoints; k *= 2 {
		start := make(map[string]int, len(names))
		total := float64(k * perBucket * len(names))
		for _, name := range names {
			start[name] = min(max(1, int(math.Round(targets[name]*total))), opts.Limits.MaxReplicas)
		}
		starts = append(starts, start)
	}
	return planFrom(ctx, names, nil, nil, nil, targets, opts, starts, true)
}

// planFrom searches replica counts for the buckets order names from each
// of starts (see planSpace.search), within opts' budget and while ctx is
// not done, and returns the plan with its exact figures measured against
// the ring of current (nil: no ring), which is before when that is not nil.
// The positions h holds (may be nil) are not hashed again.
func planFrom(ctx context.Context, order []string, current map[string]int, before *ring.Ring, h hashes, targets map[string]float64, opts Search, starts []map[string]int, stopWithin bool) Result {
	tol, budget := opts.tolerance(), opts.budget()
	names := slices.Sorted(slices.Values(order))
	sp := newPlanSpace(names, current, targets, tol, opts.Limits, h)
	sp.ctx, sp.budget, sp.reserve, sp.before = ctx, budget-budget/reserveShare, budget/reserveShare, before
	counts := make([][]int, len(starts))
	for i, start := range starts {
		counts[i] = make([]int, len(names))
		for b, name := range names {
			counts[i][b] = start[name]
		}
	}
	sp.search(counts, stopWithin)

	return sp.result(order, names, current, targets, tol, opts.KeepEmpty)
}

// RingShares returns the exact share of users of each bucket of the ring of
// counts (replicas by bucket name), which must be a valid ring: a planner's
// figures, or checked ones. It panics on an invalid ring.
func RingShares(counts map[string]int) map[string]float64 {
	return mustRing(counts).Shares()
}

// hashes are the positions of buckets' points a plan has hashed, by bucket
// name: replicas 0, 1, … of each, as ring.AppendPoints gives them.
type hashes map[string][]ring.Position

// ring returns the ring of checked replica counts, as mustRing, hashing
// only the points h does not hold yet, and keeps them in h.
func (h hashes) ring(counts map[string]int) *ring.Ring {
	bs := make([]ring.Bucket, 0, len(counts))
	ps := make([][]ring.Position, 0, len(counts))
	for name, n := range counts {
		if have := len(h[name]); n > have {
			h[name] = ring.AppendPoints(h[name], name, have, n)
		}
		bs = append(bs, ring.Bucket{Name: name, Replicas: n})
		ps = append(ps, h[name])
	}
	r, err := ring.NewHashed(bs, ps)
	if err != nil {
		panic("plan: ring of checked buckets: " + err.Error())
	}
	return r
}

// mustRing returns the ring of checked replica counts.
func mustRing(counts map[string]int) *ring.Ring {
	bs := make([]ring.Bucket, 0, len(counts))
	for name, n := range counts {
		bs = append(bs, ring.Bucket{Name: name, Replicas: n})
	}
	r, err := ring.New(bs...)
	if err != nil {
		panic("plan: ring of checked buckets: " + err.Error())
	}
	return r
}
