package rollout

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"

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
	// (FineTolerance, chosen because none was given): a step that cannot
	// come within it comes within DefaultTolerance instead of pausing.
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
}

// FineRampPoints is the size of ring (its points) from which a ramp given
// no tolerance defaults to FineTolerance (0.05 points) rather than
// DefaultTolerance (0.5 points): the points a fine plan gives a ring, where
// one replica moves about 0.025 points of users, so that the replica count
// nearest each step's share is within 0.05 points of it. Coarser rings keep
// the coarse default, which few replicas can meet.
const FineRampPoints = 4000

// RampTolerance is the tolerance of a ramp of feature f given tol (0: none
// given), and whether it is the fine default: FineTolerance when f has at
// least FineRampPoints points, else DefaultTolerance.
func RampTolerance(f Feature, tol float64) (float64, bool, error) {
	if tol != 0 {
		return tol, false, CheckTolerance(tol)
	}
	points := 0
	for _, b := range f.Buckets {
		points += b.Replicas
	}
	if points >= FineRampPoints {
		return FineTolerance, true, nil
	}
	return DefaultTolerance, false, nil
}

// steps validates the spec and returns its steps, timed from now.
func (sp RampSpec) steps(now time.Time) ([]RampStep, error) {
	n := len(sp.Shares)
	switch {
	case n == 0:
		return nil, Errorf(EInvalid, "a ramp needs at least one step: give steps, the bucket's shares in increasing (or decreasing) order, e.g. [0.05, 0.25, 1]")
	case n > MaxRampSteps:
		return nil, Errorf(EInvalid, "a ramp has at most %d steps, got %d", MaxRampSteps, n)
	}
	down := n > 1 && sp.Shares[1] < sp.Shares[0]
	for i, s := range sp.Shares {
		if math.IsNaN(s) || s < 0 || s > 1 || s == 0 && !down {
			return nil, Errorf(EInvalid, "step %d has share %v: each step's share must be above 0 and at most 1 (or 0, the last step of a ramp down)", i+1, s)
		}
		if i > 0 && !down && s <= sp.Shares[i-1] {
			return nil, Errorf(EInvalid, "step %d has share %v, not above step %d's %v: a ramp's shares must increase (or all decrease, for a ramp down)", i+1, s, i, sp.Shares[i-1])
		}
		if i > 0 && down && s >= sp.Shares[i-1] {
			return nil, Errorf(EInvalid, "step %d has share %v, not below step %d's %v: the shares of a ramp down must all decrease", i+1, s, i, sp.Shares[i-1])
		}
	}
	if sp.MaxChurn != nil && (math.IsNaN(*sp.MaxChurn) || *sp.MaxChurn < 0 || *sp.MaxChurn > 1) {
		return nil, Errorf(EInvalid, "max_churn must be a fraction of users from 0 to 1, got %v", *sp.MaxChurn)
	}
	if _, err := tolerance(sp.Tolerance); err != nil {
		return nil, err
	}
	if err := validateComment(sp.Comment); err != nil {
		return nil, err
	}
	steps := make([]RampStep, n)
	switch {
	case len(sp.At) > 0 && (sp.Every != 0 || !sp.Start.IsZero()):
		return nil, Errorf(EInvalid, "give either the steps' times (at) or every (with an optional start), not both")
	case len(sp.At) > 0:
		if len(sp.At) != n {
			return nil, Errorf(EInvalid, "%d times (at) for %d steps: give one time per step", len(sp.At), n)
		}
		for i, at := range sp.At {
			if err := checkRampTime(fmt.Sprintf("step %d's time", i+1), at, now); err != nil {
				return nil, err
			}
			if i > 0 && !at.After(sp.At[i-1]) {
				return nil, Errorf(EInvalid, "step %d's time %s is not after step %d's %s: times must increase", i+1, at.UTC().Format(time.RFC3339), i, sp.At[i-1].UTC().Format(time.RFC3339))
			}
			steps[i] = RampStep{Share: sp.Shares[i], At: at.UTC()}
		}
	default:
		if sp.Every <= 0 && n > 1 {
			return nil, Errorf(EInvalid, "every must be a positive duration such as \"24h\", got %s", sp.Every)
		}
		// (n-1)·every within the horizon cannot overflow a Duration.
		if n > 1 && sp.Every > MaxRampHorizon/time.Duration(n-1) {
			return nil, Errorf(EInvalid, "every %s is too long: %d steps that far apart would take more than %d years", sp.Every, n, MaxRampHorizon/(365*24*time.Hour))
		}
		start := sp.Start
		if start.IsZero() {
			start = now
		}
		if err := checkRampTime("start", start, now); err != nil {
			return nil, err
		}
		if last := start.Add(time.Duration(n-1) * sp.Every); last.Sub(now) > MaxRampHorizon {
			return nil, Errorf(EInvalid, "the last step would be at %s, more than %d years from now: start earlier or step more often", last.UTC().Format(time.RFC3339), MaxRampHorizon/(365*24*time.Hour))
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
		return Errorf(EInvalid, "%s %s is more than %d years from now", what, at.UTC().Format(time.RFC3339), MaxRampHorizon/(365*24*time.Hour))
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
	// CreateRamp stores a new ramp at revision 1.
	CreateRamp(ctx context.Context, r Ramp) error
	// Ramp returns one ramp.
	Ramp(ctx context.Context, id string) (Ramp, error)
	// Ramps returns the ramps of the feature key (every feature's when key
	// is ""), oldest first.
	Ramps(ctx context.Context, key string) ([]Ramp, error)
	// UpdateRamp replaces the stored ramp, which must be at revision
	// r.Revision-1, with r.
	UpdateRamp(ctx context.Context, r Ramp) error
	// ApplyRampStep does what UpdateFeature(f, v) and UpdateRamp(r) do, in
	// one transaction: both or neither.
	ApplyRampStep(ctx context.Context, f Feature, v Version, r Ramp) error
}

// CreateRamp stores a new active ramp of the feature key. It returns
// ENotFound for no such feature or bucket, EInvalid for a bad spec or a
// ramp whose last share the bucket has already, and EConflict when the
// feature has a live ramp already.
func (s *Service) CreateRamp(ctx context.Context, key string, spec RampSpec, actorName string) (Ramp, error) {
	r, _, err := s.newRamp(ctx, key, spec, actorName)
	if err != nil {
		return Ramp{}, err
	}
	Settle(ctx, r, r.CreatedAt)
	if err := s.store.CreateRamp(ctx, r); err != nil {
		return Ramp{}, err
	}
	return r, nil
}

// newRamp checks spec against the feature key as it is and returns the
// ramp it makes, not stored, and the feature.
func (s *Service) newRamp(ctx context.Context, key string, spec RampSpec, actorName string) (Ramp, Feature, error) {
	c, err := s.known(ctx, key)
	if err != nil {
		return Ramp{}, Feature{}, err
	}
	now := s.now().UTC()
	steps, err := spec.steps(now)
	if err != nil {
		return Ramp{}, Feature{}, err
	}
	b, ok := c.feature.Bucket(spec.Bucket)
	if !ok {
		return Ramp{}, Feature{}, Errorf(ENotFound, "feature %q has no bucket %q: ramp one of its buckets", key, spec.Bucket)
	}
	last := steps[len(steps)-1].Share
	share := c.feature.Ring().Shares()[b.Name]
	switch {
	case len(steps) == 1 && share > last || len(steps) > 1 && steps[1].Share < steps[0].Share:
		// A ramp down: it only removes replicas of its bucket.
		if share <= last {
			return Ramp{}, Feature{}, Errorf(EInvalid, "bucket %q already has %s of users, at most the ramp's last step (%s): nothing to ramp down", b.Name, percent(share), percent(last))
		}
		if share >= 1 {
			return Ramp{}, Feature{}, Errorf(EInvalid, "bucket %q serves every user and the other buckets have no replicas: removing its replicas cannot give them users; ramp another bucket up from 0 %% instead, which moves users out of %q only", b.Name, b.Name)
		}
	case share >= last:
		return Ramp{}, Feature{}, Errorf(EInvalid, "bucket %q already has %s of users, at least the ramp's last step (%s): nothing to ramp", b.Name, percent(share), percent(last))
	}
	tol, fine, err := RampTolerance(c.feature, spec.Tolerance)
	if err != nil {
		return Ramp{}, Feature{}, err
	}
	r := Ramp{
		ID: uuid.NewString(), Feature: key, FeatureID: c.feature.ID, Bucket: b.Name,
		Steps: steps, MaxChurn: spec.MaxChurn, Tolerance: tol, FineDefault: fine, State: RampActive,
		Comment:  spec.Comment,
		Replicas: b.Replicas, Actor: actor(ChangeOptions{Actor: actorName}), Revision: 1,
		CreatedAt: now, UpdatedAt: now,
	}
	return r, c.feature, nil
}

// RampPreview is what a ramp would do, step by step, if the feature did
// not change meanwhile: a dry run of CreateRamp.
type RampPreview struct {
	Ramp  Ramp              `json:"ramp"`
	Steps []RampStepPreview `json:"steps"`
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
}

// PreviewRamp checks spec as CreateRamp does and returns what each step
// would do to the feature as it is now, storing nothing.
func (s *Service) PreviewRamp(ctx context.Context, key string, spec RampSpec, actorName string) (RampPreview, error) {
	r, f, err := s.newRamp(ctx, key, spec, actorName)
	if err != nil {
		return RampPreview{}, err
	}
	p := RampPreview{Ramp: r}
	cur := compile(f)
	down := r.Down(f.Ring().Shares()[r.Bucket])
	for _, step := range r.Steps {
		sp := RampStepPreview{Share: step.Share, At: step.At}
		b, _ := cur.feature.Bucket(r.Bucket)
		var ch Change
		if step.Share >= 1 {
			sp.Replicas, sp.Reached = max(b.Replicas, 1), 1
			ch = rampFinal(r.Bucket, sp.Replicas, "")
		} else {
			sp.Replicas, sp.Reached, err = r.replicasFor(cur.feature, step.Share, down)
			if err != nil {
				sp.Error = ErrorMessage(err)
				p.Steps = append(p.Steps, sp)
				break
			}
			ch = rampReplicasChange(r.Bucket, sp.Replicas, "")
		}
		next := cur.feature.Clone()
		if err := ch.apply(&next); err != nil {
			sp.Error = ErrorMessage(err)
			p.Steps = append(p.Steps, sp)
			break
		}
		if err := next.Validate(); err != nil {
			sp.Error = ErrorMessage(err)
			p.Steps = append(p.Steps, sp)
			break
		}
		nc := compile(next)
		rep := newReport(cur, nc)
		sp.Churn, sp.Summary = rep.Churn, ShareSummary(rep)
		if r.MaxChurn != nil && rep.Churn > *r.MaxChurn {
			sp.Error = fmt.Sprintf("the step would move %s of users, more than max_churn %s: the ramp would pause here", percent(rep.Churn), percent(*r.MaxChurn))
			p.Steps = append(p.Steps, sp)
			break
		}
		p.Steps = append(p.Steps, sp)
		cur = nc
	}
	return p, nil
}

// replicasFor is rampReplicas at r's tolerance; a ramp at the fine
// default that cannot come within it comes within DefaultTolerance.
func (r Ramp) replicasFor(f Feature, share float64, down bool) (int, float64, error) {
	n, reached, err := rampReplicas(f, r.Bucket, share, r.Tolerance, down)
	if err != nil && r.FineDefault {
		return rampReplicas(f, r.Bucket, share, DefaultTolerance, down)
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
		err = Errorf(ENotFound, "feature %q has no ramp %q", key, id)
	}
	return r, err
}

// PauseRamp pauses the active ramp id of the feature key. It returns
// EConflict when the ramp is not active.
func (s *Service) PauseRamp(ctx context.Context, key, id, actorName string) (Ramp, error) {
	return s.moveRamp(ctx, key, id, actorName, func(r *Ramp) error {
		if r.State != RampActive {
			return Errorf(EConflict, "ramp %q is %s, not active: only an active ramp can be paused", id, r.State)
		}
		r.State, r.Reason = RampPaused, "paused by "+actor(ChangeOptions{Actor: actorName})
		return nil
	})
}

// ResumeRamp makes the paused ramp id active again; steps whose time has
// passed apply at the runner's next pass, one after the other. It returns
// EConflict when the ramp is not paused.
func (s *Service) ResumeRamp(ctx context.Context, key, id, actorName string) (Ramp, error) {
	return s.moveRamp(ctx, key, id, actorName, func(r *Ramp) error {
		if r.State != RampPaused {
			return Errorf(EConflict, "ramp %q is %s, not paused: only a paused ramp can be resumed", id, r.State)
		}
		r.State, r.Reason = RampActive, ""
		return nil
	})
}

// CancelRamp ends the live ramp id for good; the feature keeps the steps
// applied so far. It returns EConflict when the ramp is done or canceled.
func (s *Service) CancelRamp(ctx context.Context, key, id, actorName string) (Ramp, error) {
	return s.moveRamp(ctx, key, id, actorName, func(r *Ramp) error {
		if !r.Live() {
			return Errorf(EConflict, "ramp %q is %s already", id, r.State)
		}
		r.State, r.Reason = RampCanceled, "canceled by "+actor(ChangeOptions{Actor: actorName})
		return nil
	})
}

// moveRamp applies move to the stored ramp and stores the result, reading
// the ramp again when a step (or another instance) updated it meanwhile.
// actorName is who moves it, for the audit trail.
func (s *Service) moveRamp(ctx context.Context, key, id, actorName string, move func(*Ramp) error) (Ramp, error) {
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
		r.UpdatedBy = actor(ChangeOptions{Actor: actorName})
		Settle(ctx, r, r.UpdatedAt)
		err = s.store.UpdateRamp(ctx, r)
		if ErrorCode(err) == EConflict && attempt < 3 {
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
			if code := ErrorCode(err); code == EConflict || code == ENotFound {
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
	if cur == nil || cur.feature.ID != r.FeatureID {
		return pause("feature %q was archived (or purged): restore it, then resume the ramp", r.Feature)
	}
	f := cur.feature
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
			return pause("%s", ErrorMessage(err))
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
	_, err = s.applyWith(ctx, cur, ch, opts, func(f Feature, v Version) error {
		next.Steps[i].Version = f.Version
		return s.store.ApplyRampStep(ctx, f, v, next)
	})
	switch code := ErrorCode(err); {
	case err == nil:
		return next, true, nil
	case code == EChurn || code == EInvalid || isChangeError(err):
		// Over max_churn, or a change the feature refuses (the last
		// step removing the fallback, say).
		return pause("%s", ErrorMessage(err))
	}
	return r, false, err
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
func othersEmpty(f Feature, bucket string) bool {
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
func rampReplicas(f Feature, bucket string, target, tol float64, down bool) (int, float64, error) {
	counts := make(map[string]int, len(f.Buckets))
	points := 0
	for _, b := range f.Buckets {
		counts[b.Name] = b.Replicas
		points += b.Replicas
	}
	lo := counts[bucket]
	hi := min(MaxReplicas, MaxPoints-(points-lo))
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
		return 0, 0, Errorf(EInvalid, "bucket %q cannot reach %s: with the most replicas the feature's limits allow (%d) it has %s", bucket, percent(target), hi, percent(s))
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
	ch.summary, ch.kind = summary, AuditRampStep
	return ch
}

// rampFinal sets every bucket but bucket to 0 replicas, and bucket to
// replicas, as a ramp's last step of share 1: the other buckets stay, at 0
// %, so that the kill switch can still serve its fallback and a later ramp
// can give them users again.
func rampFinal(bucket string, replicas int, summary string) Change {
	return Change{
		summary: summary,
		kind:    AuditRampStep,
		apply: func(f *Feature) error {
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
