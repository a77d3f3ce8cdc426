package api

import (
	"context"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// DefaultPlanTimeout is how long a plan searches at most when PlanLimits
// give no timeout. Its budget of steps ends it sooner, in one to five
// seconds; the deadline holds on a machine so busy that the plan gets
// little of a core, and its answer still comes well within the server's
// 30 s write timeout.
const DefaultPlanTimeout = 10 * time.Second

// planRetryAfter is the Retry-After, in seconds, of a plan refused because
// as many are running as the server runs at once: about a plan's length.
const planRetryAfter = 1

// codeTooManyPlans answers a plan refused because as many are running as
// the server runs at once.
const codeTooManyPlans = "too_many_plans"

// PlanLimits bound the planner's work on a server: POST
// /api/features/K/plan and features created with targets. The zero value
// is the defaults.
type PlanLimits struct {
	// Running is how many plans run at once; beyond it a plan is refused
	// at once with 429 and a Retry-After. 0 means half of GOMAXPROCS, at
	// least 2, so that plans leave cores to evaluation. One token runs
	// at most half of them (at least 1), so that no token holds every
	// slot (unless Running is 1).
	Running int
	// Timeout ends a plan's search; the answer is the best plan found,
	// cut short. 0 means DefaultPlanTimeout.
	Timeout time.Duration
	// Budget is the number of search steps a plan takes at most (see
	// plan.Options); 0 means plan.DefaultBudget.
	Budget int64
}

// planner runs plans within PlanLimits.
type planner struct {
	slots    chan struct{} // one per running plan
	perToken int           // slots one token holds at most
	timeout  time.Duration
	budget   int64

	mu   sync.Mutex
	held map[string]int // slots held, by token ID
}

func newPlanner(l PlanLimits) *planner {
	running := l.Running
	if running <= 0 {
		running = max(2, runtime.GOMAXPROCS(0)/2)
	}
	timeout := l.Timeout
	if timeout <= 0 {
		timeout = DefaultPlanTimeout
	}
	return &planner{
		slots: make(chan struct{}, running), perToken: max(1, running/2), timeout: timeout, budget: l.Budget,
		held: map[string]int{},
	}
}

// take counts a slot for the token id ("": no token, not counted) unless
// it holds as many as one token may; release gives it back.
func (p *planner) take(id string) bool {
	if id == "" {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[id] >= p.perToken {
		return false
	}
	p.held[id]++
	return true
}

func (p *planner) release(id string) {
	if id == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held[id]--; p.held[id] <= 0 {
		delete(p.held, id)
	}
}

// planHook, when set (by tests), is called in a plan's slot before its
// search, with the search's context; the func it returns, if not nil, is
// called once the slot is free again.
var planHook atomic.Pointer[func(context.Context) func()]

// run calls do in a slot, with a context that ends at the plan's timeout
// or when the client goes, and opts's budget set; with every slot taken,
// or as many as one token may hold taken by the request's token, it
// refuses at once with codeTooManyPlans and a Retry-After.
func (p *planner) run(c echo.Context, opts plan.Options, do func(context.Context, plan.Options) error) error {
	var id string
	if tok, ok := TokenOf(c); ok {
		id = tok.ID
	}
	if !p.take(id) {
		c.Response().Header().Set("Retry-After", strconv.Itoa(planRetryAfter))
		return feature.Errorf(codeTooManyPlans, "this token runs as many plans at once as one token may (%d of the server's %d): try again in a second", p.perToken, cap(p.slots))
	}
	select {
	case p.slots <- struct{}{}:
	default:
		p.release(id)
		c.Response().Header().Set("Retry-After", strconv.Itoa(planRetryAfter))
		return feature.Errorf(codeTooManyPlans, "as many plans are running as this server runs at once (%d): try again in a second", cap(p.slots))
	}
	var freed func()
	defer func() {
		<-p.slots
		p.release(id)
		if freed != nil {
			freed()
		}
	}()
	ctx, cancel := context.WithTimeout(c.Request().Context(), p.timeout)
	defer cancel()
	if h := planHook.Load(); h != nil {
		freed = (*h)(ctx)
	}
	opts.Budget = p.budget
	return do(ctx, opts)
}

type planRequest struct {
	Targets   map[string]float64 `json:"targets"`
	Tolerance *float64           `json:"tolerance"`
	// Mode is plan.ModeNested, ModeExact or ModeAuto; none is
	// ModeAuto, unless a tolerance is given: then the plan is the one of
	// no mode, as before modes were.
	Mode string `json:"mode"`
}

// planResponse answers POST /api/features/K/plan: the plan and the churn
// report of applying it.
type planResponse struct {
	plan.Plan
	Report feature.Report `json:"report"`
}

// planOptions reads the targets, tolerance and mode of a request that
// plans: with neither a tolerance nor a mode, the mode is ModeAuto.
func planOptions(targets map[string]float64, tolerance *float64, mode string) (plan.Options, error) {
	if targets == nil {
		return plan.Options{}, badRequest(`give the target share of each bucket: {"targets":{"A":0.75,"B":0.25}}`)
	}
	opts := plan.Options{Mode: mode}
	if mode == "" && tolerance == nil {
		opts.Mode = plan.ModeAuto
	}
	if tolerance != nil {
		if err := plan.CheckTolerance(*tolerance); err != nil {
			return opts, err
		}
		opts.Tolerance = *tolerance
	}
	return opts, nil
}

// plan is POST /api/features/K/plan: the replicas that bring the feature's
// buckets to target shares while moving the fewest users the planner finds,
// with the exact churn beside its lower bound. Nothing is stored; apply the
// plan's buckets with PUT /api/features/K/buckets. The search is bounded
// (see PlanLimits): cut short, the answer is the best plan it found, with
// cut_short and cut_reason.
func (s *Server) plan(c echo.Context) error {
	var req planRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	opts, err := planOptions(req.Targets, req.Tolerance, req.Mode)
	if err != nil {
		return err
	}
	var res planResponse
	err = s.planner.run(c, opts, func(ctx context.Context, opts plan.Options) (err error) {
		res.Plan, res.Report, err = s.in(c).PlanContext(ctx, c.Param("key"), req.Targets, opts)
		return err
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, res)
}

type setBucketsRequest struct {
	Buckets []bucketRequest `json:"buckets"`
	guards
}

// setBuckets is PUT /api/features/K/buckets: the whole bucket list replaced
// as one version, under the usual guards. A bucket given without a value
// (or with null) keeps the value of the current bucket of that name.
func (s *Server) setBuckets(c echo.Context) error {
	var req setBucketsRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	ch, err := req.change()
	if err != nil {
		return err
	}
	return s.change(c, req.guards, ch)
}

// change is the change a PUT of buckets asks for (its body without the
// guards).
func (req setBucketsRequest) change() (change.Change, error) {
	if req.Buckets == nil {
		return change.Change{}, badRequest(`give the whole list of buckets: {"buckets":[{"name":"A","replicas":100},…]}`)
	}
	for _, b := range req.Buckets {
		if b.Replicas == nil {
			return change.Change{}, badRequest("bucket %q has no replicas: give every bucket its replicas", b.Name)
		}
	}
	return change.SetBuckets(buckets(req.Buckets)), nil
}

// plannedBuckets returns the buckets of a new feature created with target
// shares: replicas from plan.New, values from the request's buckets,
// which must give no replicas and name only buckets of the targets. The
// request's buckets come first, in their order. The plan runs within the
// server's PlanLimits.
func (s *Server) plannedBuckets(c echo.Context, req createRequest) ([]feature.Bucket, error) {
	opts, err := planOptions(req.Targets, req.Tolerance, req.Mode)
	if err != nil {
		return nil, err
	}
	for _, b := range req.Buckets {
		opts.Order = append(opts.Order, b.Name)
	}
	for _, b := range req.Buckets {
		if b.Replicas != nil {
			return nil, badRequest("bucket %q gives replicas and the request gives targets: give one or the other", b.Name)
		}
		if _, ok := req.Targets[b.Name]; !ok {
			return nil, badRequest("bucket %q has no target: give every bucket its share in targets", b.Name)
		}
	}
	var p plan.Plan
	err = s.planner.run(c, opts, func(ctx context.Context, opts plan.Options) (err error) {
		p, err = plan.NewContext(ctx, req.Targets, opts)
		return err
	})
	switch {
	case err != nil:
		return nil, err
	case !p.WithinTolerance && p.CutShort:
		return nil, feature.Errorf(feature.EInvalid, "the planner stopped (%s) before it came within tolerance %v of the targets (closest: max error %v): give a larger tolerance", p.CutReason, p.Tolerance, p.MaxError)
	case !p.WithinTolerance:
		return nil, feature.Errorf(feature.EInvalid, "no replica counts within the limits come within tolerance %v of the targets (closest: max error %v): give a larger tolerance", p.Tolerance, p.MaxError)
	}
	out := buckets(req.Buckets)
	for i := range out {
		j := slices.IndexFunc(p.Buckets, func(pb feature.Bucket) bool { return pb.Name == out[i].Name })
		out[i].Replicas = p.Buckets[j].Replicas
	}
	for _, pb := range p.Buckets {
		if !slices.ContainsFunc(out, func(b feature.Bucket) bool { return b.Name == pb.Name }) {
			out = append(out, pb)
		}
	}
	return out, nil
}
