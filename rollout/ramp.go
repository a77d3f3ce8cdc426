package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// Scheduled ramps. A ramp grows one bucket of a feature to a list of shares,
// one step at a time at the step's time. Each step is an ordinary change of
// the feature (actor RampActor, the step named in the summary) that only
// adds replicas to the bucket, and the last step of share 1 sets the other
// buckets to 0 replicas (they stay, serving no one, so that the kill
// switch can still serve the fallback and a later ramp can give them users
// again): adding the next replica of a bucket moves users only into it, so
// a user who enters the bucket at one step stays in it at every later
// step. A bucket may start at 0 replicas. A ramp down (decreasing shares,
// down to 0) only removes replicas of its bucket, so users move only out
// of it; a bucket that serves everyone cannot ramp down (the others have
// no replicas to take its users): ramp another bucket up instead.
//
// Ramps are stored. The runner (RunRamps, or ApplyDueRamps called by hand)
// reads the active ramps from the store and applies the steps that are due;
// a step's feature change and the ramp's advance are written in one store
// transaction, conditional on the feature's version and on the ramp's
// revision (ApplyRampStep), so that of several instances racing to apply
// the same step exactly one succeeds and the others write nothing.

// RampActor is the actor of the versions ramps make.
const RampActor = "ramp"

// MaxRampSteps is the most steps one ramp may have.
const MaxRampSteps = 100

// MaxRampHorizon is how far from now a ramp's steps may be, ahead or
// behind: times beyond it are mistakes, and its bound keeps the steps'
// times within what every store and JSON can hold.
const MaxRampHorizon = 100 * 365 * 24 * time.Hour

// RampState is where a ramp stands.
type RampState string

// The states of a ramp. Active and paused ramps are live: a feature has at
// most one live ramp.
const (
	RampActive   RampState = "active"   // steps apply at their times
	RampPaused   RampState = "paused"   // by hand or by a step that could not apply; Reason says why
	RampCanceled RampState = "canceled" // by hand; no step applies again
	RampDone     RampState = "done"     // every step applied
)

// RampStep is one step of a ramp: the bucket's share from At on, and once
// applied what it did.
type RampStep struct {
	Share float64   `json:"share"`
	At    time.Time `json:"at"`
	// Applied is when the step was applied; nil until then.
	Applied *time.Time `json:"applied,omitempty"`
	// Version is the feature's version the step made; 0 when the bucket
	// already had the share and nothing needed to change.
	Version int `json:"version,omitempty"`
	// Replicas and Reached are the bucket's replicas and exact share after
	// the step.
	Replicas int     `json:"replicas,omitempty"`
	Reached  float64 `json:"reached,omitempty"`
}

// Ramp is a scheduled ramp of one bucket of a feature.
type Ramp struct {
	ID        string     `json:"id"`
	Feature   string     `json:"feature"`    // the feature's key
	FeatureID string     `json:"feature_id"` // the feature's ID: a feature made again under the key is another
	Bucket    string     `json:"bucket"`
	Steps     []RampStep `json:"steps"`
	// MaxChurn, when not nil, pauses the ramp instead of applying a step
	// that would move more than this fraction of users.
	MaxChurn  *float64 `json:"max_churn"`
	Tolerance float64  `json:"tolerance"`
	// FineDefault says the tolerance is the default of a fine ring
	// (plan.FineTolerance, chosen because none was given): a step that cannot
	// come within it comes within plan.DefaultTolerance instead of pausing.
	FineDefault bool      `json:"fine_default,omitempty"`
	State       RampState `json:"state"`
	// Comment is what its author said of the ramp (at most MaxComment
	// bytes); its steps' versions carry it.
	Comment string `json:"comment,omitempty"`
	// Reason says why the ramp is paused (or was, before it resumed).
	Reason string `json:"reason,omitempty"`
	// Next is the index of the next step to apply; len(Steps) when done.
	Next int `json:"next"`
	// Replicas is the bucket's replica count after the ramp's last step
	// (at creation, the count then): a feature whose bucket has fewer has
	// been changed by hand in a way the ramp cannot continue from.
	Replicas  int       `json:"replicas"`
	Actor     string    `json:"actor"`
	Revision  int       `json:"revision"` // grows by one with each update of the ramp
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// UpdatedBy is who made the last update by hand (pause, resume,
	// cancel); "" when the ramp made it itself (a step). The store's
	// audit event of the update names them.
	UpdatedBy string `json:"updated_by,omitempty"`
	// Role is the role of the token that started the ramp ("" for the
	// command line, an open API, or a ramp older than roles on ramps).
	// An editor's ramp is bound by the settings at each step, unless
	// ApprovedBy approved it: a step moves at most the editors' churn
	// limit, and none applies while approvals cover the feature.
	Role auth.Role `json:"role,omitempty"`
	// ApprovedBy is who approved the ramp's steps: the approver of the
	// change request that started it, or who resumed it after it paused
	// for an approval.
	ApprovedBy string `json:"approved_by,omitempty"`
	// NeedsApproval says the ramp paused because approvals came to cover
	// its feature after an editor started it: resuming it, by another
	// person than its author, approves its steps.
	NeedsApproval bool `json:"needs_approval,omitempty"`
	// Request, when not nil, is the approval of the change request that
	// starts the ramp: the store marks it applied in the ramp's
	// transaction (CreateRamp).
	Request *RequestDecision `json:"-"`
	// Settles, when not nil, is the idempotency key of the request that
	// writes the ramp: the store marks it done in the ramp's transaction
	// (CreateRamp, UpdateRamp), as it does a Version's.
	Settles *Settlement `json:"-"`
}

// Live reports whether the ramp may still apply steps (active or paused).
func (r Ramp) Live() bool { return r.State == RampActive || r.State == RampPaused }

// Clone returns a deep copy of r.
func (r Ramp) Clone() Ramp {
	r.Steps = slices.Clone(r.Steps)
	for i, st := range r.Steps {
		if st.Applied != nil {
			at := *st.Applied
			r.Steps[i].Applied = &at
		}
	}
	if r.MaxChurn != nil {
		m := *r.MaxChurn
		r.MaxChurn = &m
	}
	return r
}

// RampSpec is what a new ramp asks for: the bucket, its shares, and their
// times, either Every apart from Start (the first step at Start) or At,
// one time per share.
type RampSpec struct {
	Bucket    string
	Shares    []float64
	Every     time.Duration
	Start     time.Time // zero: now
	At        []time.Time
	MaxChurn  *float64
	Tolerance float64 // 0: the default (RampTolerance); else as CheckTolerance accepts
	Comment   string
	// Role is the role of the token starting the ramp: an editor's is
	// bound by the settings (StartRamp); "" and admins' are not.
	Role auth.Role
}

// rampSpecJSON is a RampSpec as a ramp request keeps it (its comment is
// the request's, its role the author's).
type rampSpecJSON struct {
	Bucket    string      `json:"bucket"`
	Steps     []float64   `json:"steps"`
	Every     string      `json:"every,omitempty"`
	Start     *time.Time  `json:"start,omitempty"`
	At        []time.Time `json:"at,omitempty"`
	MaxChurn  *float64    `json:"max_churn,omitempty"`
	Tolerance float64     `json:"tolerance,omitempty"`
}

// MarshalJSON writes the spec as the API takes it: every as a duration
// ("1h0m0s"), start only when given (else the steps start when the ramp
// does).
func (sp RampSpec) MarshalJSON() ([]byte, error) {
	j := rampSpecJSON{Bucket: sp.Bucket, Steps: sp.Shares, At: sp.At, MaxChurn: sp.MaxChurn, Tolerance: sp.Tolerance}
	if sp.Every != 0 {
		j.Every = shortDuration(sp.Every)
	}
	if !sp.Start.IsZero() {
		j.Start = &sp.Start
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (sp *RampSpec) UnmarshalJSON(data []byte) error {
	var j rampSpecJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*sp = RampSpec{Bucket: j.Bucket, Shares: j.Steps, At: j.At, MaxChurn: j.MaxChurn, Tolerance: j.Tolerance}
	if j.Every != "" {
		d, err := time.ParseDuration(j.Every)
		if err != nil {
			return fmt.Errorf("ramp every %q: %w", j.Every, err)
		}
		sp.Every = d
	}
	if j.Start != nil {
		sp.Start = *j.Start
	}
	return nil
}

// FineRampPoints is the size of ring (its points) from which a ramp given
// no tolerance defaults to plan.FineTolerance (0.05 points) rather than
// plan.DefaultTolerance (0.5 points): the points a fine plan gives a ring, where
// one replica moves about 0.025 points of users, so that the replica count
// nearest each step's share is within 0.05 points of it. Coarser rings keep
// the coarse default, which few replicas can meet.
const FineRampPoints = 4000

// RampTolerance is the tolerance of a ramp of feature f given tol (0: none
// given), and whether it is the fine default: plan.FineTolerance when f has at
// least FineRampPoints points, else plan.DefaultTolerance.
func RampTolerance(f feature.Feature, tol float64) (float64, bool, error) {
	if tol != 0 {
		return tol, false, plan.CheckTolerance(tol)
	}
	points := 0
	for _, b := range f.Buckets {
		points += b.Replicas
	}
	if points >= FineRampPoints {
		return plan.FineTolerance, true, nil
	}
	return plan.DefaultTolerance, false, nil
}

// steps validates the spec and returns its steps, timed from now.
func (sp RampSpec) steps(now time.Time) ([]RampStep, error) {
	n := len(sp.Shares)
	switch {
	case n == 0:
		return nil, feature.Errorf(feature.EInvalid, "a ramp needs at least one step: give steps, the bucket's shares in increasing (or decreasing) order, e.g. [0.05, 0.25, 1]")
	case n > MaxRampSteps:
		return nil, feature.Errorf(feature.EInvalid, "a ramp has at most %d steps, got %d", MaxRampSteps, n)
	}
	down := n > 1 && sp.Shares[1] < sp.Shares[0]
	for i, s := range sp.Shares {
		if math.IsNaN(s) || s < 0 || s > 1 || s == 0 && !down {
			return nil, feature.Errorf(feature.EInvalid, "step %d has share %v: each step's share must be above 0 and at most 1 (or 0, the last step of a ramp down)", i+1, s)
		}
		if i > 0 && !down && s <= sp.Shares[i-1] {
			return nil, feature.Errorf(feature.EInvalid, "step %d has share %v, not above step %d's %v: a ramp's shares must increase (or all decrease, for a ramp down)", i+1, s, i, sp.Shares[i-1])
		}
		if i > 0 && down && s >= sp.Shares[i-1] {
			return nil, feature.Errorf(feature.EInvalid, "step %d has share %v, not below step %d's %v: the shares of a ramp down must all decrease", i+1, s, i, sp.Shares[i-1])
		}
	}
	if sp.MaxChurn != nil && (math.IsNaN(*sp.MaxChurn) || *sp.MaxChurn < 0 || *sp.MaxChurn > 1) {
		return nil, feature.Errorf(feature.EInvalid, "max_churn must be a fraction of users from 0 to 1, got %v", *sp.MaxChurn)
	}
	if sp.Tolerance != 0 {
		if err := plan.CheckTolerance(sp.Tolerance); err != nil {
			return nil, err
		}
	}
	if err := validateComment(sp.Comment); err != nil {
		return nil, err
	}
	steps := make([]RampStep, n)
	switch {
	case len(sp.At) > 0 && (sp.Every != 0 || !sp.Start.IsZero()):
		return nil, feature.Errorf(feature.EInvalid, "give either the steps' times (at) or every (with an optional start), not both")
	case len(sp.At) > 0:
		if len(sp.At) != n {
			return nil, feature.Errorf(feature.EInvalid, "%d times (at) for %d steps: give one time per step", len(sp.At), n)
		}
		for i, at := range sp.At {
			if err := checkRampTime(fmt.Sprintf("step %d's time", i+1), at, now); err != nil {
				return nil, err
			}
			if i > 0 && !at.After(sp.At[i-1]) {
				return nil, feature.Errorf(feature.EInvalid, "step %d's time %s is not after step %d's %s: times must increase", i+1, at.UTC().Format(time.RFC3339), i, sp.At[i-1].UTC().Format(time.RFC3339))
			}
			steps[i] = RampStep{Share: sp.Shares[i], At: at.UTC()}
		}
	default:
		if sp.Every <= 0 && n > 1 {
			return nil, feature.Errorf(feature.EInvalid, "every must be a positive duration such as \"24h\", got %s", sp.Every)
		}
		// (n-1)·every within the horizon cannot overflow a Duration.
		if n > 1 && sp.Every > MaxRampHorizon/time.Duration(n-1) {
			return nil, feature.Errorf(feature.EInvalid, "every %s is too long: %d steps that far apart would take more than %d years", sp.Every, n, MaxRampHorizon/(365*24*time.Hour))
		}
		start := sp.Start
		if start.IsZero() {
			start = now
		}
		if err := checkRampTime("start", start, now); err != nil {
			return nil, err
		}
		if last := start.Add(time.Duration(n-1) * sp.Every); last.Sub(now) > MaxRampHorizon {
			return nil, feature.Errorf(feature.EInvalid, "the last step would be at %s, more than %d years from now: start earlier or step more often", last.UTC().Format(time.RFC3339), MaxRampHorizon/(365*24*time.Hour))
		}
		for i := range steps {
			steps[i] = RampStep{Share: sp.Shares[i], At: start.Add(time.Duration(i) * sp.Every).UTC()}
		}
	}
	return steps, nil
}

// checkRampTime refuses a step time (what names it) further than
// MaxRampHorizon from now.
func checkRampTime(what string, at, now time.Time) error {
	if d := at.Sub(now); d > MaxRampHorizon || d < -MaxRampHorizon {
		return feature.Errorf(feature.EInvalid, "%s %s is more than %d years from now", what, at.UTC().Format(time.RFC3339), MaxRampHorizon/(365*24*time.Hour))
	}
	return nil
}

// RampStore keeps ramps. Each method is atomic.
//
// Errors: an *Error with ENotFound when the ramp (or, for ApplyRampStep,
// the feature) does not exist, EConflict when CreateRamp finds a live ramp
// of the same feature, or UpdateRamp/ApplyRampStep find the stored ramp is
// not at revision r.Revision-1 or the feature is not at version
// f.Version-1; EUnavailable as for Store.
type RampStore interface {
	// CreateRamp stores a new ramp at revision 1; with r.Request, it
	// marks that change request applied in the same transaction
	// (EConflict when it is no longer open) and records request_approve;
	// with r.Settles, it settles it.
	CreateRamp(ctx context.Context, r Ramp) error
	// Ramp returns one ramp.
	Ramp(ctx context.Context, id string) (Ramp, error)
	// Ramps returns the ramps of the feature key (every feature's when key
	// is ""), oldest first.
	Ramps(ctx context.Context, key string) ([]Ramp, error)
	// UpdateRamp replaces the stored ramp, which must be at revision
	// r.Revision-1, with r (and settles r.Settles).
	UpdateRamp(ctx context.Context, r Ramp) error
	// ApplyRampStep does what UpdateFeature(f, v) and UpdateRamp(r) do, in
	// one transaction: both or neither.
	ApplyRampStep(ctx context.Context, f feature.Feature, v Version, r Ramp) error
}

// CreateRamp stores a new active ramp of the feature key, not bound by
// the settings (spec.Role is ignored): StartRamp for a caller with no
// role, the command line's. It returns ENotFound for no such feature or
// bucket, EInvalid for a bad spec or a ramp whose last share the bucket has
// already, and EConflict when the feature has a live ramp already.
func (s *Service) CreateRamp(ctx context.Context, key string, spec RampSpec, actorName string) (Ramp, error) {
	spec.Role = ""
	st, err := s.StartRamp(ctx, key, spec, RampOptions{Actor: actorName})
	return st.Ramp, err
}

// RampOptions are who starts, pauses, resumes or cancels a ramp, and the
// request's idempotency key.
type RampOptions struct {
	Actor string // who makes the change; "anonymous" when empty
	// Idempotency, when not nil, is the request's idempotency key, kept
	// with the change's answer (see Idempotency): of a RampStart for
	// StartRamp, of the Ramp for PauseRamp, ResumeRamp and CancelRamp.
	Idempotency *Idempotency
}

// RampStart is what StartRamp did: the ramp it stored, or the change
// request the ramp became (Ramp is then the ramp it would start, not
// stored, and Steps its preview).
type RampStart struct {
	Ramp    Ramp
	Request *Request
	Steps   []RampStepPreview
}

// StartRamp stores a new active ramp of the feature key, started by
// opts.Actor with a token of spec.Role. An editor's ramp is bound by the
// settings as the editor's changes are: where approvals cover the feature
// it is not started but becomes a change request (RampStart.Request) with
// its preview, started when another person approves it; elsewhere each of
// its steps, as previewed from the feature as it is, must move at most the
// editors' churn limit (EForbidden otherwise, naming the step), and so
// must each step when it applies (the ramp pauses otherwise). Errors as
// CreateRamp's, and EForbidden.
func (s *Service) StartRamp(ctx context.Context, key string, spec RampSpec, opts RampOptions) (RampStart, error) {
	g, err := s.gateFor(ctx, ChangeOptions{Role: spec.Role})
	if err != nil {
		return RampStart{}, err
	}
	if g.covers(key) {
		return s.requestRamp(ctx, key, spec, opts)
	}
	c, err := s.known(ctx, key)
	if err != nil {
		return RampStart{}, err
	}
	r, err := s.newRamp(c, spec, opts.Actor)
	if err != nil {
		return RampStart{}, err
	}
	if g != nil {
		steps, _ := previewRamp(c, r)
		if err := g.checkRamp(key, steps); err != nil {
			return RampStart{}, err
		}
	}
	st := RampStart{Ramp: r}
	w := r
	if w.Settles, err = opts.Idempotency.settlement(st, r.CreatedAt); err != nil {
		return RampStart{}, err
	}
	if err := s.store.CreateRamp(ctx, w); err != nil {
		return RampStart{}, err
	}
	return st, nil
}

// requestRamp stores the ramp spec of feature key as a change request by
// opts.Actor, previewed on the feature as it is.
func (s *Service) requestRamp(ctx context.Context, key string, spec RampSpec, opts RampOptions) (RampStart, error) {
	if err := s.mu.lock(ctx); err != nil {
		return RampStart{}, err
	}
	defer s.mu.Unlock()
	c, err := s.current(ctx, key, ChangeOptions{})
	if err != nil {
		return RampStart{}, err
	}
	r, err := s.newRamp(c, spec, opts.Actor) // checks the spec
	if err != nil {
		return RampStart{}, err
	}
	comment := spec.Comment
	spec.Comment, spec.Role = "", ""
	req, err := s.preview(ctx, s.newRequest(c.Feature(), ChangeSpec{Kind: SpecRamp, Ramp: &spec}, ChangeOptions{Actor: opts.Actor, Comment: comment}))
	if err != nil {
		return RampStart{}, err
	}
	st := RampStart{Ramp: r, Request: &req, Steps: req.RampSteps}
	w := req // an Idempotency-Key is kept with the request
	if w.Settles, err = opts.Idempotency.settlement(st, req.CreatedAt); err != nil {
		return RampStart{}, err
	}
	if err := s.store.CreateRequest(ctx, w); err != nil {
		return RampStart{}, err
	}
	return st, nil
}

// previewRampRequest previews the ramp request r on its feature as it
// stands now (see preview). The caller holds s.mu.
func (s *Service) previewRampRequest(ctx context.Context, r Request) (Request, error) {
	if r.Change.Ramp == nil {
		return r, feature.Errorf(feature.EInvalid, "request %s asks for a ramp but names none", r.ID)
	}
	c, err := s.current(ctx, r.Feature, ChangeOptions{})
	if err != nil {
		return r, err
	}
	ramp, err := s.newRamp(c, *r.Change.Ramp, r.Author)
	if err != nil {
		return r, err
	}
	steps, rep := previewRamp(c, ramp)
	shares := make([]string, len(ramp.Steps))
	for i, st := range ramp.Steps {
		shares[i] = percent(st.Share)
	}
	what := fmt.Sprintf("ramp %s: %s", ramp.Bucket, strings.Join(shares, " → "))
	if sp := r.Change.Ramp; sp.Every != 0 {
		what += ", a step every " + shortDuration(sp.Every)
	}
	r.IfMatch, r.BaseVersion, r.Report, r.RampSteps, r.Segments = c.Feature().Tag(), c.Feature().Version, rep, steps, nil
	r.Summary = joinSummary(what, strings.Replace(previewSummary(rep), " would move", " would move in all", 1))
	return r, nil
}

// startApprovedRamp starts the ramp that request r asks for, approved by
// approver, on the feature at r.IfMatch (EPrecondition when it moved on),
// marking r applied in the ramp's transaction. It returns the ramp, and
// the feature with the request's preview. The caller holds s.mu.
func (s *Service) startApprovedRamp(ctx context.Context, r Request, approver, comment string) (Ramp, Result, error) {
	if r.Change.Ramp == nil {
		return Ramp{}, Result{}, feature.Errorf(feature.EInvalid, "request %s asks for a ramp but names none", r.ID)
	}
	c, err := s.current(ctx, r.Feature, ChangeOptions{IfMatch: r.IfMatch})
	if err != nil {
		return Ramp{}, Result{}, err
	}
	spec := *r.Change.Ramp
	spec.Comment = r.Comment
	ramp, err := s.newRamp(c, spec, r.Author)
	if err != nil {
		return Ramp{}, Result{}, err
	}
	ramp.Role, ramp.ApprovedBy = auth.RoleEditor, approver
	ramp.Request = &RequestDecision{ID: r.ID, By: approver, Comment: comment}
	if err := s.store.CreateRamp(ctx, ramp); err != nil {
		return Ramp{}, Result{}, err
	}
	return ramp, Result{Feature: c.Feature(), Report: r.Report, Shares: c.Shares()}, nil
}

// newRamp checks spec against the feature c as it is and returns the
// ramp it makes, not stored.
func (s *Service) newRamp(c *feature.Compiled, spec RampSpec, actorName string) (Ramp, error) {
	key := c.Feature().Key
	now := s.now().UTC()
	steps, err := spec.steps(now)
	if err != nil {
		return Ramp{}, err
	}
	b, ok := c.Feature().Bucket(spec.Bucket)
	if !ok {
		return Ramp{}, feature.Errorf(feature.ENotFound, "feature %q has no bucket %q: ramp one of its buckets", key, spec.Bucket)
	}
	last := steps[len(steps)-1].Share
	share := c.Feature().Ring().Shares()[b.Name]
	switch {
	case len(steps) == 1 && share > last || len(steps) > 1 && steps[1].Share < steps[0].Share:
		// A ramp down: it only removes replicas of its bucket.
		if share <= last {
			return Ramp{}, feature.Errorf(feature.EInvalid, "bucket %q already has %s of users, at most the ramp's last step (%s): nothing to ramp down", b.Name, percent(share), percent(last))
		}
		if share >= 1 {
			return Ramp{}, feature.Errorf(feature.EInvalid, "bucket %q serves every user and the other buckets have no replicas: removing its replicas cannot give them users; ramp another bucket up from 0 %% instead, which moves users out of %q only", b.Name, b.Name)
		}
	case share >= last:
		return Ramp{}, feature.Errorf(feature.EInvalid, "bucket %q already has %s of users, at least the ramp's last step (%s): nothing to ramp", b.Name, percent(share), percent(last))
	}
	tol, fine, err := RampTolerance(c.Feature(), spec.Tolerance)
	if err != nil {
		return Ramp{}, err
	}
	return Ramp{
		ID: uuid.NewString(), Feature: key, FeatureID: c.Feature().ID, Bucket: b.Name,
		Steps: steps, MaxChurn: spec.MaxChurn, Tolerance: tol, FineDefault: fine, State: RampActive,
		Comment:  spec.Comment,
		Replicas: b.Replicas, Actor: actor(ChangeOptions{Actor: actorName}), Revision: 1,
		CreatedAt: now, UpdatedAt: now, Role: spec.Role,
	}, nil
}

// RampPreview is what a ramp would do, step by step, if the feature did
// not change meanwhile: a dry run of StartRamp. Needs, for an editor's
// ramp, is what starting it needs: "approval" (it would become a change
// request), "admin" (a step moves more than the editors' churn limit), or
// "" (it would start).
type RampPreview struct {
	Ramp  Ramp              `json:"ramp"`
	Steps []RampStepPreview `json:"steps"`
	Needs string            `json:"needs,omitempty"`
}

// RampStepPreview is one step of a RampPreview: the share the bucket would
// reach (exactly) and the fraction of all users the step would move, with
// its report; Error says why the step could not apply (the ramp would
// pause there), and no later step is previewed.
type RampStepPreview struct {
	Share    float64   `json:"share"`
	At       time.Time `json:"at"`
	Replicas int       `json:"replicas"`
	Reached  float64   `json:"reached"`
	Churn    float64   `json:"churn"`
	Summary  string    `json:"summary"`
	Error    string    `json:"error,omitempty"`

	report feature.Report // the step's, when it applies
}

// PreviewRamp checks spec as StartRamp does and returns what each step
// would do to the feature as it is now, storing nothing.
func (s *Service) PreviewRamp(ctx context.Context, key string, spec RampSpec, actorName string) (RampPreview, error) {
	g, err := s.gateFor(ctx, ChangeOptions{Role: spec.Role})
	if err != nil {
		return RampPreview{}, err
	}
	c, err := s.known(ctx, key)
	if err != nil {
		return RampPreview{}, err
	}
	r, err := s.newRamp(c, spec, actorName)
	if err != nil {
		return RampPreview{}, err
	}
	p := RampPreview{Ramp: r}
	p.Steps, _ = previewRamp(c, r)
	switch {
	case g.covers(key):
		p.Needs = "approval"
	case g.checkRamp(key, p.Steps) != nil:
		p.Needs = "admin"
	}
	return p, nil
}

// previewRamp previews each step of r on the feature c as it is, and
// reports what the steps that can apply do in all (from c to the last of
// them).
func previewRamp(c *feature.Compiled, r Ramp) ([]RampStepPreview, feature.Report) {
	var out []RampStepPreview
	cur := feature.Compile(c.Feature(), nil)
	down := r.Down(c.Feature().Ring().Shares()[r.Bucket])
	for _, step := range r.Steps {
		sp := RampStepPreview{Share: step.Share, At: step.At}
		b, _ := cur.Feature().Bucket(r.Bucket)
		var ch Change
		if step.Share >= 1 {
			sp.Replicas, sp.Reached = max(b.Replicas, 1), 1
			ch = rampFinal(r.Bucket, sp.Replicas, "")
		} else {
			var err error
			sp.Replicas, sp.Reached, err = r.replicasFor(cur.Feature(), step.Share, down)
			if err != nil {
				sp.Error = feature.ErrorMessage(err)
				out = append(out, sp)
				break
			}
			ch = rampReplicasChange(r.Bucket, sp.Replicas, "")
		}
		next := cur.Feature().Clone()
		if err := ch.apply(&next); err != nil {
			sp.Error = feature.ErrorMessage(err)
			out = append(out, sp)
			break
		}
		if err := next.Validate(); err != nil {
			sp.Error = feature.ErrorMessage(err)
			out = append(out, sp)
			break
		}
		next.Version = cur.Feature().Version + 1
		nc := feature.Compile(next, nil)
		rep := nc.ReportFrom(cur)
		sp.Churn, sp.Summary, sp.report = rep.Churn, ShareSummary(rep), rep
		if r.MaxChurn != nil && rep.Churn > *r.MaxChurn {
			sp.Error = fmt.Sprintf("the step would move %s of users, more than max_churn %s: the ramp would pause here", percent(rep.Churn), percent(*r.MaxChurn))
			out = append(out, sp)
			break
		}
		out = append(out, sp)
		cur = nc
	}
	return out, cur.ReportFrom(feature.Compile(c.Feature(), nil))
}

// replicasFor is rampReplicas at r's tolerance; a ramp at the fine
// default that cannot come within it comes within plan.DefaultTolerance.
func (r Ramp) replicasFor(f feature.Feature, share float64, down bool) (int, float64, error) {
	n, reached, err := rampReplicas(f, r.Bucket, share, r.Tolerance, down)
	if err != nil && r.FineDefault {
		return rampReplicas(f, r.Bucket, share, plan.DefaultTolerance, down)
	}
	return n, reached, err
}

// Ramps returns the ramps of the feature key, or of every feature when key
// is "", oldest first.
func (s *Service) Ramps(ctx context.Context, key string) ([]Ramp, error) {
	if key != "" {
		if _, err := s.known(ctx, key); err != nil {
			return nil, err
		}
	}
	return s.store.Ramps(ctx, key)
}

// Ramp returns the ramp id of the feature key; ENotFound when the feature
// has no such ramp.
func (s *Service) Ramp(ctx context.Context, key, id string) (Ramp, error) {
	r, err := s.store.Ramp(ctx, id)
	if err == nil && r.Feature != key {
		err = feature.Errorf(feature.ENotFound, "feature %q has no ramp %q", key, id)
	}
	return r, err
}

// PauseRamp pauses the active ramp id of the feature key. It returns
// EConflict when the ramp is not active.
func (s *Service) PauseRamp(ctx context.Context, key, id string, opts RampOptions) (Ramp, error) {
	return s.moveRamp(ctx, key, id, opts, func(r *Ramp) error {
		if r.State != RampActive {
			return feature.Errorf(feature.EConflict, "ramp %q is %s, not active: only an active ramp can be paused", id, r.State)
		}
		r.State, r.Reason = RampPaused, "paused by "+actor(ChangeOptions{Actor: opts.Actor})
		return nil
	})
}

// ResumeRamp makes the paused ramp id active again; steps whose time has
// passed apply at the runner's next pass, one after the other. A ramp
// that paused for an approval (NeedsApproval) is approved by resuming it,
// which its author may not do (EForbidden): another editor or an admin
// does. It returns EConflict when the ramp is not paused.
func (s *Service) ResumeRamp(ctx context.Context, key, id string, opts RampOptions) (Ramp, error) {
	by := actor(ChangeOptions{Actor: opts.Actor})
	return s.moveRamp(ctx, key, id, opts, func(r *Ramp) error {
		if r.State != RampPaused {
			return feature.Errorf(feature.EConflict, "ramp %q is %s, not paused: only a paused ramp can be resumed", id, r.State)
		}
		if r.NeedsApproval {
			if by == r.Actor {
				return feature.Errorf(feature.EForbidden, "you (%s) started ramp %q, which waits for an approval: another editor or an admin approves its steps by resuming it", by, id)
			}
			r.NeedsApproval, r.ApprovedBy = false, by
		}
		r.State, r.Reason = RampActive, ""
		return nil
	})
}

// CancelRamp ends the live ramp id for good; the feature keeps the steps
// applied so far. It returns EConflict when the ramp is done or canceled.
func (s *Service) CancelRamp(ctx context.Context, key, id string, opts RampOptions) (Ramp, error) {
	return s.moveRamp(ctx, key, id, opts, func(r *Ramp) error {
		if !r.Live() {
			return feature.Errorf(feature.EConflict, "ramp %q is %s already", id, r.State)
		}
		r.State, r.Reason = RampCanceled, "canceled by "+actor(ChangeOptions{Actor: opts.Actor})
		return nil
	})
}

// moveRamp applies move to the stored ramp and stores the result, reading
// the ramp again when a step (or another instance) updated it meanwhile.
// opts.Actor is who moves it, for the audit trail.
func (s *Service) moveRamp(ctx context.Context, key, id string, opts RampOptions, move func(*Ramp) error) (Ramp, error) {
	for attempt := 0; ; attempt++ {
		r, err := s.Ramp(ctx, key, id)
		if err != nil {
			return Ramp{}, err
		}
		if err := move(&r); err != nil {
			return Ramp{}, err
		}
		r.Revision++
		r.UpdatedAt = s.now().UTC()
		r.UpdatedBy = actor(ChangeOptions{Actor: opts.Actor})
		w := r
		if w.Settles, err = opts.Idempotency.settlement(r, r.UpdatedAt); err != nil {
			return Ramp{}, err
		}
		err = s.store.UpdateRamp(ctx, w)
		if feature.ErrorCode(err) == feature.EConflict && attempt < 3 {
			continue
		}
		return r, err
	}
}

// maxRampConflicts is how many times one pass of ApplyDueRamps reads a
// ramp again after losing a race for it before leaving it to the next pass.
const maxRampConflicts = 3

// DefaultRampInterval is how often RunRamps looks for due steps when given
// no interval.
const DefaultRampInterval = 10 * time.Second

// RunRamps applies the ramps' due steps (ApplyDueRamps) at once and then
// at every interval (0: DefaultRampInterval) until ctx is done. Every
// instance may run it: each step applies exactly once whichever instances
// run it. Failures go to report (nil drops them).
func (s *Service) RunRamps(ctx context.Context, interval time.Duration, report func(error)) {
	if interval <= 0 {
		interval = DefaultRampInterval
	}
	every(ctx, interval, true, func(ctx context.Context) error {
		_, err := s.ApplyDueRamps(ctx)
		return err
	}, report)
}

// ApplyDueRamps applies, for every active ramp, the steps whose time has
// come, in order; a step that cannot apply pauses its ramp with the reason.
// It returns how many steps this call applied. A step another instance
// applied first is not applied again.
func (s *Service) ApplyDueRamps(ctx context.Context) (int, error) {
	ramps, err := s.store.Ramps(ctx, "")
	if err != nil {
		return 0, fmt.Errorf("read ramps: %w", err)
	}
	applied := 0
	var errs []error
	for _, r := range ramps {
		conflicts := 0
		for r.State == RampActive && r.Next < len(r.Steps) && !r.Steps[r.Next].At.After(s.now()) {
			next, did, err := s.stepRamp(ctx, r)
			if code := feature.ErrorCode(err); code == feature.EConflict || code == feature.ENotFound {
				// Another instance moved the ramp or the feature on:
				// read the ramp again and go on from where it stands,
				// or, after losing several races in a row to instances
				// that are applying its steps, leave it to the next
				// pass. Losing a race is no failure to report.
				if conflicts == maxRampConflicts {
					break
				}
				conflicts++
				next, err = s.store.Ramp(ctx, r.ID)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("ramp %s of feature %q: %w", r.ID, r.Feature, err))
				break
			}
			if did {
				applied++
			}
			r = next
		}
	}
	return applied, errors.Join(errs...)
}

// stepRamp applies r's next step and returns the ramp as stored after it,
// and whether it changed the feature. A step that cannot apply pauses r.
func (s *Service) stepRamp(ctx context.Context, r Ramp) (Ramp, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.reload(ctx, r.Feature)
	if err != nil {
		return r, false, err
	}
	i, step := r.Next, r.Steps[r.Next]
	now := s.now().UTC()
	pause := func(format string, args ...any) (Ramp, bool, error) {
		next := r.Clone()
		next.UpdatedBy = ""
		next.State, next.Reason = RampPaused, fmt.Sprintf("step %d of %d: ", i+1, len(r.Steps))+fmt.Sprintf(format, args...)
		next.Revision++
		next.UpdatedAt = now
		return next, false, s.store.UpdateRamp(ctx, next)
	}
	if cur == nil || cur.Feature().ID != r.FeatureID {
		return pause("feature %q was archived (or purged): restore it, then resume the ramp", r.Feature)
	}
	f := cur.Feature()
	b, ok := f.Bucket(r.Bucket)
	if !ok {
		return pause("bucket %q was removed from the feature by hand", r.Bucket)
	}
	down := r.Down(f.Ring().Shares()[r.Bucket])
	if !down && b.Replicas < r.Replicas {
		return pause("bucket %q has %d replicas, fewer than the %d of the ramp's last step: it was lowered by hand, and growing it again would move users out and back in; cancel this ramp and start a new one", r.Bucket, b.Replicas, r.Replicas)
	}
	if down && b.Replicas > r.Replicas {
		return pause("bucket %q has %d replicas, more than the %d of the ramp's last step: it was raised by hand, and lowering it again would move users in and back out; cancel this ramp and start a new one", r.Bucket, b.Replicas, r.Replicas)
	}
	limit, err := s.rampLimit(ctx, r)
	switch {
	case err != nil:
		return r, false, err
	case limit.approval:
		next := r.Clone()
		next.NeedsApproval = true
		r = next
		return pause("needs approval: approvals now cover feature %q, and %s, an editor, started the ramp; another editor or an admin approves its steps by resuming it", r.Feature, r.Actor)
	}
	var (
		ch       Change
		replicas int
		reached  = 1.0
	)
	if step.Share >= 1 {
		replicas = max(b.Replicas, 1)
		ch = rampFinal(r.Bucket, replicas, fmt.Sprintf("ramp %s: step %d of %d, %s", r.Bucket, i+1, len(r.Steps), percent(step.Share)))
	} else {
		replicas, reached, err = r.replicasFor(f, step.Share, down)
		if err != nil {
			return pause("%s", feature.ErrorMessage(err))
		}
		ch = rampReplicasChange(r.Bucket, replicas, fmt.Sprintf("ramp %s: step %d of %d, %s", r.Bucket, i+1, len(r.Steps), percent(step.Share)))
	}
	next := r.Clone()
	next.UpdatedBy = ""
	next.Next++
	next.Revision++
	next.UpdatedAt = now
	next.Replicas = replicas
	next.Steps[i].Applied, next.Steps[i].Replicas, next.Steps[i].Reached = &now, replicas, reached
	if next.Next == len(next.Steps) {
		next.State = RampDone
	}
	if step.Share < 1 && replicas == b.Replicas || step.Share >= 1 && replicas == b.Replicas && othersEmpty(f, r.Bucket) {
		// The bucket has the share already (changed by hand): nothing
		// to change, the step is done.
		return next, false, s.store.UpdateRamp(ctx, next)
	}
	opts := ChangeOptions{Actor: RampActorFor(r), MaxChurn: r.MaxChurn, Comment: r.Comment}
	if limit.churn != nil && (opts.MaxChurn == nil || *limit.churn < *opts.MaxChurn) {
		opts.MaxChurn = limit.churn
	}
	res, err := s.applyWith(ctx, cur, ch, opts, func(f feature.Feature, v Version) error {
		next.Steps[i].Version = f.Version
		return s.store.ApplyRampStep(ctx, f, v, next)
	})
	switch code := feature.ErrorCode(err); {
	case err == nil:
		return next, true, nil
	case code == feature.EChurn && opts.MaxChurn == limit.churn:
		rep := res.Report
		if e, ok := errors.AsType[*feature.Error](err); ok && e.Report != nil {
			rep = *e.Report
		}
		return pause("the step would move %s of users, more than the editors' limit of %s, and %s, an editor, started the ramp: an admin starts a new one, or approvals on for the feature make it a change request", percent(rep.Churn), percent(*limit.churn), r.Actor)
	case code == feature.EChurn || code == feature.EInvalid || isChangeError(err):
		// Over max_churn, or a change the feature refuses (the last
		// step removing the fallback, say).
		return pause("%s", feature.ErrorMessage(err))
	}
	return r, false, err
}

// shortDuration writes d as time.Duration does, without its zero minutes
// and seconds: "24h", "1h30m".
func shortDuration(d time.Duration) string {
	out := d.String()
	if strings.HasSuffix(out, "m0s") {
		out = strings.TrimSuffix(out, "0s")
	}
	if strings.HasSuffix(out, "h0m") {
		out = strings.TrimSuffix(out, "0m")
	}
	return out
}

// rampBounds are the settings' bounds on a ramp's next step: none, or
// for an editor's ramp no one approved, the editors' churn limit (churn)
// and whether approvals now cover the feature (approval: the step waits).
type rampBounds struct {
	churn    *float64
	approval bool
}

// rampLimit reads the settings' bounds on r's next step.
func (s *Service) rampLimit(ctx context.Context, r Ramp) (rampBounds, error) {
	if r.Role != auth.RoleEditor || r.ApprovedBy != "" {
		return rampBounds{}, nil
	}
	st, err := s.store.Settings(ctx)
	if err != nil {
		return rampBounds{}, fmt.Errorf("read settings: %w", err)
	}
	return rampBounds{churn: &st.MaxChurn, approval: st.RequireApproval.Covers(r.Feature)}, nil
}

// checkRamp decides an editor's ramp of feature key, whose steps preview
// says (each from the one before): each must move at most the editors'
// churn limit, as a change of the editor's would (EForbidden otherwise,
// naming the first step above it). A nil gate passes anything.
//
// Each step is held to the limit, not the ramp's total: a step is one
// change of the feature, made on its own at its time, as the editor's
// own changes are, each held to the limit; a ramp of small steps moves no
// more users at once than as many changes by hand would.
func (g *gate) checkRamp(key string, steps []RampStepPreview) error {
	if g == nil {
		return nil
	}
	for i, st := range steps {
		if st.Error == "" && st.Churn > g.settings.MaxChurn {
			rep := st.report
			return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
				"step %d of the ramp (to %s) would move %s of users of feature %q, more than the editors' limit of %s: use smaller steps, or it needs an admin, or approvals on for the feature (an admin sets them in the settings) to submit it as a change request; nothing was started",
				i+1, percent(st.Share), percent(st.Churn), key, percent(g.settings.MaxChurn))}
		}
	}
	return nil
}

// Down reports whether r ramps its bucket down, when the bucket has share
// now: its steps decrease, or its one step is below share.
func (r Ramp) Down(share float64) bool {
	if len(r.Steps) > 1 {
		return r.Steps[1].Share < r.Steps[0].Share
	}
	return len(r.Steps) == 1 && r.Steps[0].Share < share
}

// othersEmpty reports whether every bucket of f but bucket has 0 replicas.
func othersEmpty(f feature.Feature, bucket string) bool {
	for _, b := range f.Buckets {
		if b.Name != bucket && b.Replicas > 0 {
			return false
		}
	}
	return true
}

// rampReplicas returns the replicas of bucket whose exact share, the other
// buckets of f as they are, comes closest to target: the smallest count not
// below the bucket's current one (not above it, down) whose share reaches
// target, or the count just below it when that one's share falls short of
// target by less than the other passes it (and either is within tol). It
// returns EInvalid when no count within the feature's limits comes within
// tol of target.
func rampReplicas(f feature.Feature, bucket string, target, tol float64, down bool) (int, float64, error) {
	counts := make(map[string]int, len(f.Buckets))
	points := 0
	for _, b := range f.Buckets {
		counts[b.Name] = b.Replicas
		points += b.Replicas
	}
	lo := counts[bucket]
	hi := min(feature.MaxReplicas, feature.MaxPoints-(points-lo))
	if down {
		lo, hi = 0, lo
	}
	share := func(n int) float64 {
		counts[bucket] = n
		return plan.RingShares(counts)[bucket]
	}
	if s := share(lo); s >= target-shareSlack {
		return lo, s, nil
	}
	if s := share(hi); s < target-shareSlack {
		if target-s <= tol+shareSlack {
			return hi, s, nil
		}
		return 0, 0, feature.Errorf(feature.EInvalid, "bucket %q cannot reach %s: with the most replicas the feature's limits allow (%d) it has %s", bucket, percent(target), hi, percent(s))
	}
	// The bucket's share grows with its replicas: search for the smallest
	// count that reaches target.
	a, z := lo, hi // share(a) < target <= share(z)
	for z-a > 1 {
		m := (a + z) / 2
		if share(m) >= target-shareSlack {
			z = m
		} else {
			a = m
		}
	}
	over, under := share(z), share(a)
	if over-target <= tol+shareSlack && over-target <= target-under {
		return z, over, nil
	}
	if target-under <= tol+shareSlack || target-under < over-target {
		return a, under, nil
	}
	return z, over, nil
}

// shareSlack absorbs the rounding of shares to float64 when they are
// compared with a target and a tolerance.
const shareSlack = plan.ShareSlack

// rampReplicasChange sets the replicas of bucket, as a ramp step.
func rampReplicasChange(bucket string, replicas int, summary string) Change {
	ch := UpdateBucket(bucket, &replicas, nil)
	ch.summary, ch.kind = summary, audit.RampStep
	return ch
}

// rampFinal sets every bucket but bucket to 0 replicas, and bucket to
// replicas, as a ramp's last step of share 1: the other buckets stay, at 0
// %, so that the kill switch can still serve its fallback and a later ramp
// can give them users again.
func rampFinal(bucket string, replicas int, summary string) Change {
	return Change{
		summary: summary,
		kind:    audit.RampStep,
		apply: func(f *feature.Feature) error {
			for i := range f.Buckets {
				f.Buckets[i].Replicas = 0
				if f.Buckets[i].Name == bucket {
					f.Buckets[i].Replicas = replicas
				}
			}
			return nil
		},
	}
}

func isChangeError(err error) bool {
	var ce *changeError
	return errors.As(err, &ce)
}

// percent formats a fraction as a percentage with up to two decimals.
func percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*10000)/100, 'f', -1, 64) + " %"
}
