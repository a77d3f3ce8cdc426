package api

import (
	"math"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout"
)

type planRequest struct {
	Targets   map[string]float64 `json:"targets"`
	Tolerance *float64           `json:"tolerance"`
}

// planResponse answers POST /api/features/K/plan: the plan and the churn
// report of applying it.
type planResponse struct {
	rollout.Plan
	Report rollout.Report `json:"report"`
}

// planOptions reads the targets and tolerance of a request that plans.
func planOptions(targets map[string]float64, tolerance *float64) (rollout.PlanOptions, error) {
	if targets == nil {
		return rollout.PlanOptions{}, badRequest(`give the target share of each bucket: {"targets":{"A":0.75,"B":0.25}}`)
	}
	var opts rollout.PlanOptions
	if tolerance != nil {
		if t := *tolerance; math.IsNaN(t) || t <= 0 || t > 1 {
			return opts, badRequest("tolerance %v is out of range: give a fraction of users above 0 and at most 1, such as 0.005 for half a percentage point", t)
		}
		opts.Tolerance = *tolerance
	}
	return opts, nil
}

// plan is POST /api/features/K/plan: the replicas that bring the feature's
// buckets to target shares while moving the fewest users the planner finds,
// with the exact churn beside its lower bound. Nothing is stored; apply the
// plan's buckets with PUT /api/features/K/buckets.
func (s *Server) plan(c echo.Context) error {
	var req planRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	opts, err := planOptions(req.Targets, req.Tolerance)
	if err != nil {
		return err
	}
	p, rep, err := s.svc.Plan(pathParam(c, "key"), req.Targets, opts)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, planResponse{Plan: p, Report: rep})
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
	if req.Buckets == nil {
		return badRequest(`give the whole list of buckets: {"buckets":[{"name":"A","replicas":100},…]}`)
	}
	for _, b := range req.Buckets {
		if b.Replicas == nil {
			return badRequest("bucket %q has no replicas: give every bucket its replicas", b.Name)
		}
	}
	return s.change(c, req.guards, rollout.SetBuckets(buckets(req.Buckets)))
}

// plannedBuckets returns the buckets of a new feature created with target
// shares: replicas from rollout.PlanNew, values from the request's buckets,
// which must give no replicas and name only buckets of the targets. The
// request's buckets come first, in their order.
func plannedBuckets(req createRequest) ([]rollout.Bucket, error) {
	opts, err := planOptions(req.Targets, req.Tolerance)
	if err != nil {
		return nil, err
	}
	for _, b := range req.Buckets {
		if b.Replicas != nil {
			return nil, badRequest("bucket %q gives replicas and the request gives targets: give one or the other", b.Name)
		}
		if _, ok := req.Targets[b.Name]; !ok {
			return nil, badRequest("bucket %q has no target: give every bucket its share in targets", b.Name)
		}
	}
	p, err := rollout.PlanNew(req.Targets, opts)
	if err != nil {
		return nil, err
	}
	if !p.WithinTolerance {
		return nil, rollout.Errorf(rollout.EInvalid, "no replica counts within the limits come within tolerance %v of the targets (closest: max error %v): give a larger tolerance", p.Tolerance, p.MaxError)
	}
	out := buckets(req.Buckets)
	for i := range out {
		j := slices.IndexFunc(p.Buckets, func(pb rollout.Bucket) bool { return pb.Name == out[i].Name })
		out[i].Replicas = p.Buckets[j].Replicas
	}
	for _, pb := range p.Buckets {
		if !slices.ContainsFunc(out, func(b rollout.Bucket) bool { return b.Name == pb.Name }) {
			out = append(out, pb)
		}
	}
	return out, nil
}
