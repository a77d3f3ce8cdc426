package rollout

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/rollout/rollout/ring"
)

// DefaultTolerance is how far, as a fraction of users, a planned bucket's
// share may miss its target when PlanOptions gives no tolerance: half a
// percentage point.
const DefaultTolerance = 0.005

// MinTolerance and MaxTolerance bound a plan's tolerance: finer than one
// user in a million is no rollout's need and only makes the search longer;
// a tolerance of 1 or more is no bound at all.
const (
	MinTolerance = 1e-6
	MaxTolerance = 1 // excluded
)

// DefaultPlanBudget is the number of search steps a plan takes at most when
// PlanOptions gives no budget. A step adds or removes one replica and
// updates the plan's figures; it costs 35 to 250 nanoseconds (measured on
// an idle and a loaded machine), so a plan stops within one to five
// seconds on one core. Every plan of up to 10 buckets at the default
// tolerance measured took fewer than 2,000,000 steps; 40 buckets take 20 to
// 80 million, of which this budget is enough to come within tolerance in
// the cases measured.
const DefaultPlanBudget = 20_000_000

// reserveShare: a plan's search keeps back this fraction (1/reserveShare)
// of its budget to improve, toward the tolerance first, the best plan it
// found when the rest runs out.
const reserveShare = 5

// targetSumSlack is how far from 1 the targets of a plan may sum.
const targetSumSlack = 1e-9

// PlanOptions tune a plan.
type PlanOptions struct {
	// Tolerance is the largest difference allowed between a bucket's share
	// and its target, from MinTolerance up to (not including)
	// MaxTolerance; 0 means DefaultTolerance.
	Tolerance float64
	// Budget bounds the search: the plan stops after this many steps
	// (replicas added or removed while trying counts) and is the best
	// found so far, cut short. 0 means DefaultPlanBudget.
	Budget int64
}

// Why a plan was cut short (Plan.CutReason).
const (
	CutBudget   = "budget"   // its PlanOptions.Budget was spent
	CutDeadline = "deadline" // its context's deadline passed
	CutCanceled = "canceled" // its context was canceled: no one waits for it
)

// Plan is a list of buckets whose exact shares come within a tolerance of
// target shares, chosen to move as few users as possible from the buckets
// it was planned from.
type Plan struct {
	// Buckets are the planned buckets, name and replicas only: the
	// current buckets in their order, less those whose target is 0, then
	// new buckets by name. Applied with SetBuckets, each keeps its value.
	Buckets     []Bucket           `json:"buckets"`
	SharesAfter map[string]float64 `json:"shares_after"` // exact share of each planned bucket
	Targets     map[string]float64 `json:"targets"`
	Tolerance   float64            `json:"tolerance"`
	// MaxError is the largest |share after − target| over the buckets.
	MaxError float64 `json:"max_error"`
	// WithinTolerance reports whether MaxError is within Tolerance. When
	// no replica counts within the limits reach it, the plan is the
	// closest the search found.
	WithinTolerance bool `json:"within_tolerance"`
	// Churn is the exact fraction of users the plan moves from the current
	// buckets (1 for a new feature: every user gets a bucket).
	Churn float64 `json:"churn"`
	// LowerBound is ½·Σ|share now − target|: no plan that reaches the
	// targets exactly moves fewer users. A plan within tolerance may move
	// a little fewer, by at most half the tolerance per bucket.
	LowerBound float64 `json:"lower_bound"`
	// CutShort reports that the search stopped before it had finished,
	// for CutReason (CutBudget, CutDeadline or CutCanceled). The plan is
	// the best it had found: its figures are exact and its buckets keep
	// the limits, but a longer search might have moved fewer users or come
	// closer to the targets.
	CutShort  bool   `json:"cut_short"`
	CutReason string `json:"cut_reason,omitempty"`
	// Steps is the number of steps the search took (see PlanOptions.Budget).
	Steps int64 `json:"steps"`
}

// PlanShares plans the replicas that bring buckets to the target shares
// (bucket name → fraction of users). A target names every current bucket,
// 0 removing it; a name that is not a current bucket adds one. Targets are
// fractions from 0 to 1 that sum to 1 within 1e-9. The plan keeps the
// feature limits (replicas 1 to MaxReplicas per bucket, at most MaxPoints in
// all, at most MaxBuckets) and, among the replica counts it searches, moves
// the fewest users it finds; see planSearch. It is deterministic, and
// returns an EInvalid *Error for bad targets or tolerance. Its work is
// bounded by opts.Budget (see PlanSharesContext).
func PlanShares(buckets []Bucket, targets map[string]float64, opts PlanOptions) (Plan, error) {
	return PlanSharesContext(context.Background(), buckets, targets, opts)
}

// PlanSharesContext is PlanShares, stopping when ctx is done as well as
// when its budget is spent: it then returns the best plan it has found,
// CutShort, and no error. Cut by its budget alone, it is deterministic.
func PlanSharesContext(ctx context.Context, buckets []Bucket, targets map[string]float64, opts PlanOptions) (Plan, error) {
	tol, err := checkTargets(targets, opts)
	if err != nil {
		return Plan{}, err
	}
	current := make(map[string]int, len(buckets))
	for _, b := range buckets {
		if _, ok := targets[b.Name]; !ok {
			return Plan{}, Errorf(EInvalid, "the targets do not name bucket %q: give every bucket its share (0 removes it)", b.Name)
		}
		current[b.Name] = b.Replicas
	}
	order := make([]string, 0, len(targets))
	for _, b := range buckets {
		order = append(order, b.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(targets)) {
		if _, ok := current[name]; !ok {
			order = append(order, name)
		}
	}
	return planFrom(ctx, order, current, targets, tol, opts.budget(), sharesStarts(order, current, targets), false), nil
}

func (o PlanOptions) budget() int64 {
	if o.Budget <= 0 {
		return DefaultPlanBudget
	}
	return o.Budget
}

// sharesStarts returns where the search for PlanShares starts: the current
// counts (a new bucket with 1 replica), then counts that would give each
// bucket its target if its points kept their current density, at 1, 2, 4, …
// times the current number of points while they fit the limits. The later
// starts matter on small rings, whose shares are too lumpy to reach a
// target near the current counts.
func sharesStarts(order []string, current map[string]int, targets map[string]float64) []map[string]int {
	now := mustRing(current)
	shares := now.Shares()
	first := make(map[string]int, len(order))
	for _, name := range order {
		first[name] = current[name]
	}
	starts := []map[string]int{first}
	for k := 1; k*now.Len() <= MaxPoints; k *= 2 {
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
			fits = fits && n <= MaxReplicas
			start[name] = n
		}
		if !fits {
			break
		}
		starts = append(starts, start)
	}
	return starts
}

// PlanNew plans the replicas of a new feature whose buckets get the target
// shares: counts near DefaultReplicas per bucket in proportion to the
// targets, adjusted until every share is within tolerance. Targets are as
// for PlanShares; a target of 0 is refused, since a new feature has no
// bucket to remove. Its Churn is 1 and its LowerBound 1: every user gets a
// bucket. Its work is bounded as PlanShares's.
func PlanNew(targets map[string]float64, opts PlanOptions) (Plan, error) {
	return PlanNewContext(context.Background(), targets, opts)
}

// PlanNewContext is PlanNew, stopping when ctx is done as well (see
// PlanSharesContext).
func PlanNewContext(ctx context.Context, targets map[string]float64, opts PlanOptions) (Plan, error) {
	tol, err := checkTargets(targets, opts)
	if err != nil {
		return Plan{}, err
	}
	names := slices.Sorted(maps.Keys(targets))
	var starts []map[string]int
	for k := 1; k*DefaultReplicas*len(names) <= 2*MaxPoints; k *= 2 {
		start := make(map[string]int, len(names))
		total := float64(k * DefaultReplicas * len(names))
		for _, name := range names {
			t := targets[name]
			if t == 0 {
				return Plan{}, Errorf(EInvalid, "target of bucket %q is 0: a new feature's buckets need a share above 0", name)
			}
			start[name] = min(max(1, int(math.Round(t*total))), MaxReplicas)
		}
		starts = append(starts, start)
	}
	return planFrom(ctx, names, nil, targets, tol, opts.budget(), starts, true), nil
}

// ValidTolerance reports whether tol is a tolerance a plan accepts: from
// MinTolerance up to, not including, MaxTolerance.
func ValidTolerance(tol float64) bool {
	return tol >= MinTolerance && tol < MaxTolerance // false for NaN
}

// ToleranceRange says why tol is not a valid tolerance and what is.
func ToleranceRange(tol float64) string {
	return fmt.Sprintf("tolerance %v is out of range: give a fraction of users from %v to below %v, such as 0.005 for half a percentage point", tol, MinTolerance, MaxTolerance)
}

// checkTargets reports what is wrong with targets and the tolerance, and
// returns the tolerance to use.
func checkTargets(targets map[string]float64, opts PlanOptions) (float64, error) {
	tol := opts.Tolerance
	switch {
	case tol == 0:
		tol = DefaultTolerance
	case !ValidTolerance(tol):
		return 0, Errorf(EInvalid, "%s", ToleranceRange(tol))
	}
	if len(targets) == 0 {
		return 0, Errorf(EInvalid, `give the target share of each bucket, such as {"A":0.75,"B":0.25}`)
	}
	if len(targets) > MaxBuckets {
		return 0, Errorf(EInvalid, "the targets name %d buckets; a feature has at most %d", len(targets), MaxBuckets)
	}
	var sum float64
	for _, name := range slices.Sorted(maps.Keys(targets)) {
		t := targets[name]
		if !bucketPattern.MatchString(name) {
			return 0, Errorf(EInvalid, "bucket name %q is invalid: use 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', '-'", name)
		}
		if math.IsNaN(t) || t < 0 || t > 1 {
			return 0, Errorf(EInvalid, "target of bucket %q is %v: give a fraction of users from 0 to 1", name, t)
		}
		sum += t
	}
	if math.Abs(sum-1) > targetSumSlack {
		return 0, Errorf(EInvalid, "the targets sum to %v, not 1: give fractions of users that add up to 1, such as 0.25 for 25 %%", sum)
	}
	return tol, nil
}

// planFrom searches replica counts for the buckets order names from each
// of starts (see planSpace.search), within budget steps and while ctx is
// not done, and returns the plan with its exact figures measured against
// the ring of current (nil: no ring).
func planFrom(ctx context.Context, order []string, current map[string]int, targets map[string]float64, tol float64, budget int64, starts []map[string]int, stopWithin bool) Plan {
	names := slices.Sorted(slices.Values(order))
	sp := newPlanSpace(names, current, targets, tol)
	sp.ctx, sp.budget, sp.reserve = ctx, budget-budget/reserveShare, budget/reserveShare
	counts := make([][]int, len(starts))
	for i, start := range starts {
		counts[i] = make([]int, len(names))
		for b, name := range names {
			counts[i][b] = start[name]
		}
	}
	sp.search(counts, stopWithin)

	p := Plan{Targets: targets, Tolerance: tol, Buckets: []Bucket{}, Steps: sp.steps, CutShort: sp.cut != "", CutReason: sp.cut}
	for _, name := range order {
		b := slices.Index(names, name)
		if sp.n[b] > 0 {
			p.Buckets = append(p.Buckets, Bucket{Name: name, Replicas: sp.n[b]})
		}
	}
	before := mustRing(current)
	after, _ := ring.New(ringBuckets(p.Buckets)...)
	sharesBefore := before.Shares()
	p.SharesAfter = after.Shares()
	p.Churn = ring.ChurnBetween(before, after).Total
	var bound float64
	for _, name := range names {
		bound += math.Abs(sharesBefore[name] - targets[name])
		p.MaxError = max(p.MaxError, math.Abs(p.SharesAfter[name]-targets[name]))
	}
	if before.Len() == 0 {
		bound = 2 // everyone moves from no bucket
	}
	p.LowerBound = bound / 2
	p.WithinTolerance = p.MaxError <= tol+shareSlack
	return p
}

// shareSlack absorbs the rounding of shares to float64 when they are
// compared with a target and a tolerance.
const shareSlack = 1e-12

func mustRing(counts map[string]int) *ring.Ring {
	bs := make([]ring.Bucket, 0, len(counts))
	for name, n := range counts {
		bs = append(bs, ring.Bucket{Name: name, Replicas: n})
	}
	r, err := ring.New(bs...)
	if err != nil {
		panic("rollout: ring of checked buckets: " + err.Error())
	}
	return r
}

// Plan returns the plan that brings the feature key's buckets to the target
// shares (see PlanShares), with the churn report of applying it by
// SetBuckets. Nothing is stored. It returns ENotFound for no such feature,
// EInvalid for bad targets, and the error the change would meet when the
// planned buckets cannot replace the current ones (removing the fallback or
// a bucket that overrides name). Its work is bounded as PlanShares's.
func (s *Service) Plan(key string, targets map[string]float64, opts PlanOptions) (Plan, Report, error) {
	return s.PlanContext(context.Background(), key, targets, opts)
}

// PlanContext is Plan, stopping when ctx is done as well (see
// PlanSharesContext).
func (s *Service) PlanContext(ctx context.Context, key string, targets map[string]float64, opts PlanOptions) (Plan, Report, error) {
	cur, ok := s.Snapshot().features[key]
	if !ok {
		return Plan{}, Report{}, notFound(key)
	}
	p, err := PlanSharesContext(ctx, cur.feature.Buckets, targets, opts)
	if err != nil {
		return Plan{}, Report{}, err
	}
	next := cur.feature.Clone()
	if err := SetBuckets(p.Buckets).apply(&next); err != nil {
		return Plan{}, Report{}, err
	}
	if err := next.Validate(); err != nil {
		return Plan{}, Report{}, err
	}
	next.Version++
	return p, newReport(cur, compile(next)), nil
}
