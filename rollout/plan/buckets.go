package plan

import (
	"context"
	"maps"
	"math"
	"slices"

	"github.com/rollout/rollout/ring"
	"github.com/rollout/rollout/rollout/feature"
)

// Plans of a feature's buckets: For and New check a request (targets, a
// tolerance, a mode) with feature.Error codes, run the search of plan.go
// and nested.go within the feature's limits, and answer in the feature's
// types. They are what package rollout (Service.Plan, documents, ramps'
// tolerance) and the command line call.

// MinTolerance and MaxTolerance bound a tolerance, of a plan or a ramp:
// finer than one user in a million is no rollout's need and only makes the
// search longer; a tolerance of 1 or more is no bound at all.
const (
	MinTolerance = 1e-6
	MaxTolerance = 1 // excluded
)

// Plan modes (Options.Mode).
const (
	// ModeNested changes only the replicas of the buckets that change, so
	// users move only into or out of them (see Nested): one bucket
	// growing at the others' expense, or shrinking in their favour, as in
	// every change of two buckets, is nested exactly and changing it back
	// returns the same ring (unless the preferred bucket could not make
	// the change within the limits or on a fine ring and the other one
	// did: see Nested); when several change at once the others'
	// shares drift. A target of 0 keeps its bucket with 0 replicas.
	ModeNested = "nested"
	// ModeExact searches every bucket's replicas to bring every share
	// within tolerance, moving the fewest users it finds; the moves
	// between existing buckets a nested plan would not make are its
	// CrossMoves.
	ModeExact = "exact"
	// ModeAuto answers the nested plan when it changes one bucket (every
	// change of two buckets does) and reaches its target; else it plans
	// both and answers the exact plan. Options holds the plans made.
	ModeAuto = "auto"
)

// coarseLimits are the limits plans of no mode keep on features that fit
// them: those of features before fine plans (1,000 replicas per bucket,
// 10,000 points), so that they answer exactly as they did.
var coarseLimits = Limits{MaxReplicas: 1000, MaxPoints: 10_000}

// targetSumSlack is how far from 1 the targets of a plan may sum.
const targetSumSlack = 1e-9

// Options tune a plan.
type Options struct {
	// Tolerance is the largest difference allowed between a bucket's share
	// and its target, from MinTolerance up to (not including)
	// MaxTolerance; 0 means DefaultTolerance.
	Tolerance float64
	// Budget bounds the search: the plan stops after this many steps
	// (replicas added or removed while trying counts) and is the best
	// found so far, cut short. 0 means DefaultBudget.
	Budget int64
	// Mode is ModeNested, ModeExact or ModeAuto: fine plans, within the
	// feature limits and FineTolerance unless Tolerance is given. ""
	// plans as before fine plans did: the exact search, within 1,000
	// replicas per bucket and 10,000 points on features that fit them,
	// and DefaultTolerance.
	Mode string
	// Order is the order of a new feature's buckets (New in a mode):
	// the first with a target above 0 anchors its ring (see Fine).
	// Buckets it leaves out follow by name.
	Order []string
}

// Option is one of the plans of a change ModeAuto offers: its buckets
// and figures, as in Plan.
type Option struct {
	Buckets         []feature.Bucket   `json:"buckets"`
	SharesAfter     map[string]float64 `json:"shares_after"`
	MaxError        float64            `json:"max_error"`
	WithinTolerance bool               `json:"within_tolerance"`
	Churn           float64            `json:"churn"`
	CrossChurn      float64            `json:"cross_churn"`
	CrossMoves      []feature.Move     `json:"cross_moves"`
	Varied          []string           `json:"varied,omitempty"`
	Replanned       bool               `json:"replanned,omitempty"`
}

// Plan is a list of buckets whose exact shares come within a tolerance of
// target shares, chosen to move as few users as possible from the buckets
// it was planned from.
type Plan struct {
	// Buckets are the planned buckets, name and replicas only: the
	// current buckets in their order, less those whose target is 0 in a
	// plan of no mode (in a mode they stay, with 0 replicas), then new
	// buckets by name. Applied with SetBuckets, each keeps its value.
	Buckets     []feature.Bucket   `json:"buckets"`
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
	// Steps is the number of steps the search took (see Options.Budget).
	Steps int64 `json:"steps"`
	// Mode is the mode of the plan (ModeNested or ModeExact), "" for a
	// plan of no mode.
	Mode string `json:"mode,omitempty"`
	// CrossMoves are the moves of users between two buckets that had
	// users which a nested change would not make (into a bucket not
	// growing or out of one not shrinking, beyond tolerance): they switch
	// users between existing variants of a running experiment.
	// CrossChurn is their total.
	CrossMoves []feature.Move `json:"cross_moves,omitempty"`
	CrossChurn float64        `json:"cross_churn,omitempty"`
	// Varied are the buckets a nested plan changes; Replanned reports that
	// it first scaled a ring too coarse for its tolerance, which moves
	// users once (see Nested).
	Varied    []string `json:"varied,omitempty"`
	Replanned bool     `json:"replanned,omitempty"`
	// Options are the plans ModeAuto made, by mode: the nested one alone
	// when it answers it, else both.
	Options map[string]Option `json:"options,omitempty"`
}

// planLimits are a feature's limits, as the planner takes them.
var planLimits = Limits{MaxReplicas: feature.MaxReplicas, MaxPoints: feature.MaxPoints}

// For plans the replicas that bring buckets to the target shares
// (bucket name → fraction of users). A target names every current bucket,
// 0 removing it in a plan of no mode and keeping it with 0 replicas
// (present, serving nobody) in every mode; a name that is not a current
// bucket adds one. Targets are fractions from 0 to 1 that sum to 1 within
// 1e-9. The plan keeps the feature limits (replicas 1 to
// feature.MaxReplicas per bucket, at most feature.MaxPoints in all, at most
// feature.MaxBuckets) and, among the replica counts it searches, moves the
// fewest users it finds (Shares, Nested). It is deterministic, and returns
// an EInvalid *feature.Error for bad targets or tolerance. Its work is
// bounded by opts.Budget (see ForContext).
func For(buckets []feature.Bucket, targets map[string]float64, opts Options) (Plan, error) {
	return ForContext(context.Background(), buckets, targets, opts)
}

// ForContext is For, stopping when ctx is done as well as
// when its budget is spent: it then returns the best plan it has found,
// CutShort, and no error. Cut by its budget alone, it is deterministic.
func ForContext(ctx context.Context, buckets []feature.Bucket, targets map[string]float64, opts Options) (Plan, error) {
	tol, err := checkTargets(targets, opts)
	if err != nil {
		return Plan{}, err
	}
	targets = rescaled(targets, opts)
	for _, b := range buckets {
		if _, ok := targets[b.Name]; !ok {
			return Plan{}, feature.Errorf(feature.EInvalid, "the targets do not name bucket %q: give every bucket its share (0 for no users)", b.Name)
		}
	}
	current := feature.RingBuckets(buckets)
	po := opts.search(tol, current)
	switch opts.Mode {
	case "":
		return planOf(Shares(ctx, current, targets, po), targets), nil
	case ModeNested:
		return modePlan(Nested(ctx, current, targets, po), targets, ModeNested), nil
	case ModeExact:
		return modePlan(Shares(ctx, current, targets, po), targets, ModeExact), nil
	}
	nested := modePlan(Nested(ctx, current, targets, po), targets, ModeNested)
	if len(nested.Varied) <= 1 && nested.variedWithin() {
		// One bucket grows at the others' expense or shrinks in their
		// favour: the others drift from their scaled shares by what the
		// arcs it takes or gives hold, which nesting is worth. No exact
		// search (the long one) is needed.
		nested.Options = map[string]Option{ModeNested: nested.option()}
		return nested, nil
	}
	exact := modePlan(Shares(ctx, current, targets, po), targets, ModeExact)
	exact.Steps += nested.Steps
	exact.Options = map[string]Option{ModeNested: nested.option(), ModeExact: exact.option()}
	return exact, nil
}

// checkMode reports an unknown mode.
func checkMode(mode string) error {
	switch mode {
	case "", ModeNested, ModeExact, ModeAuto:
		return nil
	}
	return feature.Errorf(feature.EInvalid, "mode %q is unknown: give %q (move users only into or out of the buckets that change), %q (rebalance every bucket exactly) or %q (both, answering the nested plan when one bucket changes)", mode, ModeNested, ModeExact, ModeAuto)
}

func modePlan(r Result, targets map[string]float64, mode string) Plan {
	p := planOf(r, targets)
	p.Mode = mode
	p.CrossMoves = make([]feature.Move, len(r.CrossMoves))
	for i, m := range r.CrossMoves {
		p.CrossMoves[i] = feature.Move(m)
	}
	p.CrossChurn, p.Varied, p.Replanned = r.CrossChurn, r.Varied, r.Replanned
	return p
}

// variedWithin reports whether the buckets a nested plan changes are
// within its tolerance of their targets.
func (p Plan) variedWithin() bool {
	for _, name := range p.Varied {
		if math.Abs(p.SharesAfter[name]-p.Targets[name]) > p.Tolerance+ShareSlack {
			return false
		}
	}
	return true
}

func (p Plan) option() Option {
	return Option{
		Buckets: p.Buckets, SharesAfter: p.SharesAfter, MaxError: p.MaxError, WithinTolerance: p.WithinTolerance,
		Churn: p.Churn, CrossChurn: p.CrossChurn, CrossMoves: p.CrossMoves, Varied: p.Varied, Replanned: p.Replanned,
	}
}

// New plans the replicas of a new feature whose buckets get the target
// shares: counts near DefaultReplicas per bucket in proportion to the
// targets, adjusted until every share is within tolerance. Targets are as
// for For; a target of 0 is refused, since a new feature has no
// bucket to remove. Its Churn is 1 and its LowerBound 1: every user gets a
// bucket. Its work is bounded as For's.
func New(targets map[string]float64, opts Options) (Plan, error) {
	return NewContext(context.Background(), targets, opts)
}

// NewContext is New, stopping when ctx is done as well (see
// ForContext).
func NewContext(ctx context.Context, targets map[string]float64, opts Options) (Plan, error) {
	tol, err := checkTargets(targets, opts)
	if err != nil {
		return Plan{}, err
	}
	targets = rescaled(targets, opts)
	if opts.Mode != "" {
		order := slices.Clone(opts.Order)
		for _, name := range slices.Sorted(maps.Keys(targets)) {
			if !slices.Contains(order, name) {
				order = append(order, name)
			}
		}
		order = slices.DeleteFunc(order, func(name string) bool { _, ok := targets[name]; return !ok })
		p := planOf(Fine(ctx, order, targets, opts.search(tol, nil)), targets)
		p.Mode = ModeNested
		return p, nil
	}
	for _, name := range slices.Sorted(maps.Keys(targets)) {
		if targets[name] == 0 {
			return Plan{}, feature.Errorf(feature.EInvalid, "target of bucket %q is 0: a new feature's buckets need a share above 0", name)
		}
	}
	r := Initial(ctx, targets, feature.DefaultReplicas, opts.search(tol, nil))
	return planOf(r, targets), nil
}

// search is the search of a plan with these options at tolerance tol
// from current: a plan of no mode keeps the coarse limits on buckets that
// fit them.
func (o Options) search(tol float64, current []ring.Bucket) Search {
	lim := planLimits
	if o.Mode == "" {
		lim = coarseLimits
		points := 0
		for _, b := range current {
			points += b.Replicas
			if b.Replicas > coarseLimits.MaxReplicas {
				lim = planLimits
			}
		}
		if points > coarseLimits.MaxPoints {
			lim = planLimits
		}
	}
	// In a mode a bucket whose target is 0 stays, with 0 replicas: a
	// ramp's 100 % step keeps the others for the kill switch.
	return Search{Tolerance: tol, Budget: o.Budget, Limits: lim, KeepEmpty: o.Mode != ""}
}

// planOf returns the planner's result r for targets as a Plan.
func planOf(r Result, targets map[string]float64) Plan {
	p := Plan{
		Buckets: make([]feature.Bucket, len(r.Buckets)), SharesAfter: r.SharesAfter, Targets: targets,
		Tolerance: r.Tolerance, MaxError: r.MaxError, WithinTolerance: r.WithinTolerance,
		Churn: r.Churn, LowerBound: r.LowerBound,
		CutShort: r.CutShort, CutReason: r.CutReason, Steps: r.Steps,
	}
	for i, b := range r.Buckets {
		p.Buckets[i] = feature.Bucket{Name: b.Name, Replicas: b.Replicas}
	}
	return p
}

// ValidTolerance reports whether tol is a tolerance plans and ramps accept:
// from MinTolerance up to, not including, MaxTolerance.
func ValidTolerance(tol float64) bool {
	return tol >= MinTolerance && tol < MaxTolerance // false for NaN
}

// CheckTolerance is the one rule for a tolerance given by a user, to a plan
// or a ramp, through the API or the command line: it returns an EInvalid
// *Error that says what is accepted unless ValidTolerance(tol).
func CheckTolerance(tol float64) error {
	if ValidTolerance(tol) {
		return nil
	}
	return feature.Errorf(feature.EInvalid, "tolerance %v is out of range: give a fraction of users from %v to below %v, such as 0.005 for half a percentage point", tol, MinTolerance, MaxTolerance)
}

// tolerance returns the tolerance of options that leave it 0 when none was
// given: DefaultTolerance then, else tol if CheckTolerance accepts it.
func tolerance(tol float64) (float64, error) {
	if tol == 0 {
		return DefaultTolerance, nil
	}
	return tol, CheckTolerance(tol)
}

// planTolerance is tolerance for a plan: FineTolerance by default in a
// mode.
func planTolerance(opts Options) (float64, error) {
	if err := checkMode(opts.Mode); err != nil {
		return 0, err
	}
	if opts.Tolerance == 0 && opts.Mode != "" {
		return FineTolerance, nil
	}
	return tolerance(opts.Tolerance)
}

// checkTargets reports what is wrong with targets and the tolerance, and
// returns the tolerance to use.
func checkTargets(targets map[string]float64, opts Options) (float64, error) {
	tol, err := planTolerance(opts)
	if err != nil {
		return 0, err
	}
	if len(targets) == 0 {
		return 0, feature.Errorf(feature.EInvalid, `give the target share of each bucket, such as {"A":0.75,"B":0.25}`)
	}
	if len(targets) > feature.MaxBuckets {
		return 0, feature.Errorf(feature.EInvalid, "the targets name %d buckets; a feature has at most %d", len(targets), feature.MaxBuckets)
	}
	var sum float64
	for _, name := range slices.Sorted(maps.Keys(targets)) {
		t := targets[name]
		if !feature.ValidBucketName(name) {
			return 0, feature.Errorf(feature.EInvalid, "bucket name %q is invalid: use 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', '-'", name)
		}
		if math.IsNaN(t) || t < 0 || t > 1 {
			return 0, feature.Errorf(feature.EInvalid, "target of bucket %q is %v: give a fraction of users from 0 to 1", name, t)
		}
		sum += t
	}
	if math.Abs(sum-1) > targetSumSlack && (opts.Mode == "" || math.Abs(sum-1) > RoundedSumSlack*float64(len(targets))) {
		return 0, feature.Errorf(feature.EInvalid, "the targets sum to %v, not 1: give fractions of users that add up to 1, such as 0.25 for 25 %%", sum)
	}
	return tol, nil
}

// RoundedSumSlack is how far from 1, per bucket, the targets of a plan in
// a mode may sum, and a document's shares (package rollout): percentages
// rounded to two decimals (3 × 33.33 % for thirds). Such targets are
// rescaled to sum to 1 (see rescaled).
const RoundedSumSlack = 0.00005

// rescaled returns targets divided by their sum, when in a mode they sum
// to 1 only within RoundedSumSlack (3 × 0.3333: thirds); else targets.
func rescaled(targets map[string]float64, opts Options) map[string]float64 {
	var sum float64
	for _, name := range slices.Sorted(maps.Keys(targets)) {
		sum += targets[name]
	}
	if opts.Mode == "" || math.Abs(sum-1) <= targetSumSlack {
		return targets
	}
	out := make(map[string]float64, len(targets))
	for name, t := range targets {
		out[name] = t / sum
	}
	return out
}
