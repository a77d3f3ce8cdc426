package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/rollout/ramp"
	"github.com/rollout/rollout/rollout/request"
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

// RampStore keeps ramps. Each method is atomic.
//
// Errors: an *Error with ENotFound when the ramp (or, for ApplyRampStep,
// the feature) does not exist, EConflict when CreateRamp finds a live ramp
// of the same feature, or UpdateRamp/ApplyRampStep find the stored ramp is
// not at revision r.Revision-1 or the feature is not at version
// f.Version-1; EUnavailable as for Store.
type RampStore interface {
	// CreateRamp stores a new ramp at revision 1; with approval, it
	// marks that change request applied in the same transaction
	// (EConflict when it is no longer open) and records request_approve;
	// with settle, it settles that idempotency key.
	CreateRamp(ctx context.Context, r ramp.Ramp, approval *request.Decision, settle *idempotency.Settlement) error
	// Ramp returns one ramp.
	Ramp(ctx context.Context, id string) (ramp.Ramp, error)
	// Ramps returns the ramps of the feature key (every feature's when key
	// is ""), oldest first.
	Ramps(ctx context.Context, key string) ([]ramp.Ramp, error)
	// UpdateRamp replaces the stored ramp, which must be at revision
	// r.Revision-1, with r, and settles settle when it is not nil.
	UpdateRamp(ctx context.Context, r ramp.Ramp, settle *idempotency.Settlement) error
	// ApplyRampStep does what UpdateFeature(f, v) and UpdateRamp(r) do, in
	// one transaction: both or neither.
	ApplyRampStep(ctx context.Context, f feature.Feature, v Version, r ramp.Ramp) error
}

// CreateRamp stores a new active ramp of the feature key, not bound by
// the settings (spec.Role is ignored): StartRamp for a caller with no
// role, the command line's. It returns ENotFound for no such feature or
// bucket, EInvalid for a bad spec or a ramp whose last share the bucket has
// already, and EConflict when the feature has a live ramp already.
func (s *Service) CreateRamp(ctx context.Context, key string, spec ramp.Spec, actorName string) (ramp.Ramp, error) {
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
	Idempotency *idempotency.Key
}

// RampStart is what StartRamp did: the ramp it stored, or the change
// request the ramp became (Ramp is then the ramp it would start, not
// stored, and Steps its preview).
type RampStart struct {
	Ramp    ramp.Ramp
	Request *request.Request
	Steps   []ramp.StepPreview
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
func (s *Service) StartRamp(ctx context.Context, key string, spec ramp.Spec, opts RampOptions) (RampStart, error) {
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
	settle, err := opts.Idempotency.Settle(st, r.CreatedAt)
	if err != nil {
		return RampStart{}, err
	}
	if err := s.store.CreateRamp(ctx, r, nil, settle); err != nil {
		return RampStart{}, err
	}
	return st, nil
}

// requestRamp stores the ramp spec of feature key as a change request by
// opts.Actor, previewed on the feature as it is.
func (s *Service) requestRamp(ctx context.Context, key string, spec ramp.Spec, opts RampOptions) (RampStart, error) {
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
	req, err := s.preview(ctx, s.newRequest(c.Feature(), request.Spec{Kind: request.SpecRamp, Ramp: &spec}, ChangeOptions{Actor: opts.Actor, Comment: comment}))
	if err != nil {
		return RampStart{}, err
	}
	st := RampStart{Ramp: r, Request: &req, Steps: req.RampSteps}
	w := req // an Idempotency-Key is kept with the request
	if w.Settles, err = opts.Idempotency.Settle(st, req.CreatedAt); err != nil {
		return RampStart{}, err
	}
	if err := s.store.CreateRequest(ctx, w); err != nil {
		return RampStart{}, err
	}
	return st, nil
}

// previewRampRequest previews the ramp request r on its feature as it
// stands now (see preview). The caller holds s.mu.
func (s *Service) previewRampRequest(ctx context.Context, r request.Request) (request.Request, error) {
	if r.Change.Ramp == nil {
		return r, feature.Errorf(feature.EInvalid, "request %s asks for a ramp but names none", r.ID)
	}
	c, err := s.current(ctx, r.Feature, ChangeOptions{})
	if err != nil {
		return r, err
	}
	rp, err := s.newRamp(c, *r.Change.Ramp, r.Author)
	if err != nil {
		return r, err
	}
	steps, rep := previewRamp(c, rp)
	shares := make([]string, len(rp.Steps))
	for i, st := range rp.Steps {
		shares[i] = feature.Percent(st.Share)
	}
	what := fmt.Sprintf("ramp %s: %s", rp.Bucket, strings.Join(shares, " → "))
	if sp := r.Change.Ramp; sp.Every != 0 {
		what += ", a step every " + ramp.FormatEvery(sp.Every)
	}
	r.IfMatch, r.BaseVersion, r.Report, r.RampSteps, r.Segments = c.Feature().Tag(), c.Feature().Version, rep, steps, nil
	r.Summary = audit.JoinSummary(what, strings.Replace(audit.PreviewSummary(rep), " would move", " would move in all", 1))
	return r, nil
}

// startApprovedRamp starts the ramp that request r asks for, approved by
// approver, on the feature at r.IfMatch (EPrecondition when it moved on),
// marking r applied in the ramp's transaction. It returns the ramp, and
// the feature with the request's preview. The caller holds s.mu.
func (s *Service) startApprovedRamp(ctx context.Context, r request.Request, approver, comment string) (ramp.Ramp, Result, error) {
	if r.Change.Ramp == nil {
		return ramp.Ramp{}, Result{}, feature.Errorf(feature.EInvalid, "request %s asks for a ramp but names none", r.ID)
	}
	c, err := s.current(ctx, r.Feature, ChangeOptions{IfMatch: r.IfMatch})
	if err != nil {
		return ramp.Ramp{}, Result{}, err
	}
	spec := *r.Change.Ramp
	spec.Comment = r.Comment
	rp, err := s.newRamp(c, spec, r.Author)
	if err != nil {
		return ramp.Ramp{}, Result{}, err
	}
	rp.Role, rp.ApprovedBy = auth.RoleEditor, approver
	approval := &request.Decision{ID: r.ID, By: approver, Comment: comment}
	if err := s.store.CreateRamp(ctx, rp, approval, nil); err != nil {
		return ramp.Ramp{}, Result{}, err
	}
	return rp, Result{Feature: c.Feature(), Report: r.Report, Shares: c.Shares()}, nil
}

// newRamp checks spec against the feature c as it is and returns the
// ramp it makes, not stored.
func (s *Service) newRamp(c *feature.Compiled, spec ramp.Spec, actorName string) (ramp.Ramp, error) {
	key := c.Feature().Key
	now := s.now().UTC()
	steps, err := spec.Steps(now)
	if err != nil {
		return ramp.Ramp{}, err
	}
	if err := s.checkComment(spec.Comment, false); err != nil {
		return ramp.Ramp{}, err
	}
	b, ok := c.Feature().Bucket(spec.Bucket)
	if !ok {
		return ramp.Ramp{}, feature.Errorf(feature.ENotFound, "feature %q has no bucket %q: ramp one of its buckets", key, spec.Bucket)
	}
	last := steps[len(steps)-1].Share
	share := c.Feature().Ring().Shares()[b.Name]
	switch {
	case len(steps) == 1 && share > last || len(steps) > 1 && steps[1].Share < steps[0].Share:
		// A ramp down: it only removes replicas of its bucket.
		if share <= last {
			return ramp.Ramp{}, feature.Errorf(feature.EInvalid, "bucket %q already has %s of users, at most the ramp's last step (%s): nothing to ramp down", b.Name, feature.Percent(share), feature.Percent(last))
		}
		if share >= 1 {
			return ramp.Ramp{}, feature.Errorf(feature.EInvalid, "bucket %q serves every user and the other buckets have no replicas: removing its replicas cannot give them users; ramp another bucket up from 0 %% instead, which moves users out of %q only", b.Name, b.Name)
		}
	case share >= last:
		return ramp.Ramp{}, feature.Errorf(feature.EInvalid, "bucket %q already has %s of users, at least the ramp's last step (%s): nothing to ramp", b.Name, feature.Percent(share), feature.Percent(last))
	}
	tol, fine, err := ramp.Tolerance(c.Feature(), spec.Tolerance)
	if err != nil {
		return ramp.Ramp{}, err
	}
	return ramp.Ramp{
		ID: uuid.NewString(), Feature: key, FeatureID: c.Feature().ID, Bucket: b.Name,
		Steps: steps, MaxChurn: spec.MaxChurn, Tolerance: tol, FineDefault: fine, State: ramp.Active,
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
	Ramp  ramp.Ramp          `json:"ramp"`
	Steps []ramp.StepPreview `json:"steps"`
	Needs string             `json:"needs,omitempty"`
}

// PreviewRamp checks spec as StartRamp does and returns what each step
// would do to the feature as it is now, storing nothing.
func (s *Service) PreviewRamp(ctx context.Context, key string, spec ramp.Spec, actorName string) (RampPreview, error) {
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
func previewRamp(c *feature.Compiled, r ramp.Ramp) ([]ramp.StepPreview, feature.Report) {
	var out []ramp.StepPreview
	cur := feature.Compile(c.Feature(), nil)
	down := r.Down(c.Feature().Ring().Shares()[r.Bucket])
	for _, step := range r.Steps {
		sp := ramp.StepPreview{Share: step.Share, At: step.At}
		b, _ := cur.Feature().Bucket(r.Bucket)
		var ch change.Change
		if step.Share >= 1 {
			sp.Replicas, sp.Reached = max(b.Replicas, 1), 1
			ch = change.RampFinal(r.Bucket, sp.Replicas, "")
		} else {
			var err error
			sp.Replicas, sp.Reached, err = r.ReplicasFor(cur.Feature(), step.Share, down)
			if err != nil {
				sp.Error = feature.ErrorMessage(err)
				out = append(out, sp)
				break
			}
			ch = change.RampStep(r.Bucket, sp.Replicas, "")
		}
		next := cur.Feature().Clone()
		if err := ch.Apply(&next); err != nil {
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
		sp.Churn, sp.Summary, sp.Report = rep.Churn, audit.ShareSummary(rep), rep
		if r.MaxChurn != nil && rep.Churn > *r.MaxChurn {
			sp.Error = overMaxChurn("the step", rep, *r.MaxChurn, "the ramp would pause here").Message
			out = append(out, sp)
			break
		}
		out = append(out, sp)
		cur = nc
	}
	return out, cur.ReportFrom(feature.Compile(c.Feature(), nil))
}

// Ramps returns the ramps of the feature key, or of every feature when key
// is "", oldest first.
func (s *Service) Ramps(ctx context.Context, key string) ([]ramp.Ramp, error) {
	if key != "" {
		if _, err := s.known(ctx, key); err != nil {
			return nil, err
		}
	}
	return s.store.Ramps(ctx, key)
}

// Ramp returns the ramp id of the feature key; ENotFound when the feature
// has no such ramp.
func (s *Service) Ramp(ctx context.Context, key, id string) (ramp.Ramp, error) {
	r, err := s.store.Ramp(ctx, id)
	if err == nil && r.Feature != key {
		err = feature.Errorf(feature.ENotFound, "feature %q has no ramp %q", key, id)
	}
	return r, err
}

// PauseRamp pauses the active ramp id of the feature key. It returns
// EConflict when the ramp is not active.
func (s *Service) PauseRamp(ctx context.Context, key, id string, opts RampOptions) (ramp.Ramp, error) {
	return s.moveRamp(ctx, key, id, opts, func(r *ramp.Ramp) error {
		if r.State != ramp.Active {
			return feature.Errorf(feature.EConflict, "ramp %q is %s, not active: only an active ramp can be paused", id, r.State)
		}
		r.State, r.Reason = ramp.Paused, "paused by "+actor(ChangeOptions{Actor: opts.Actor})
		return nil
	})
}

// ResumeRamp makes the paused ramp id active again; steps whose time has
// passed apply at the runner's next pass, one after the other. A ramp
// that paused for an approval (NeedsApproval) is approved by resuming it,
// which its author may not do (EForbidden): another editor or an admin
// does. It returns EConflict when the ramp is not paused.
func (s *Service) ResumeRamp(ctx context.Context, key, id string, opts RampOptions) (ramp.Ramp, error) {
	by := actor(ChangeOptions{Actor: opts.Actor})
	return s.moveRamp(ctx, key, id, opts, func(r *ramp.Ramp) error {
		if r.State != ramp.Paused {
			return feature.Errorf(feature.EConflict, "ramp %q is %s, not paused: only a paused ramp can be resumed", id, r.State)
		}
		if r.NeedsApproval {
			if by == r.Actor {
				return feature.Errorf(feature.EForbidden, "you (%s) started ramp %q, which waits for an approval: another editor or an admin approves its steps by resuming it", by, id)
			}
			r.NeedsApproval, r.ApprovedBy = false, by
		}
		r.State, r.Reason = ramp.Active, ""
		return nil
	})
}

// CancelRamp ends the live ramp id for good; the feature keeps the steps
// applied so far. It returns EConflict when the ramp is done or canceled.
func (s *Service) CancelRamp(ctx context.Context, key, id string, opts RampOptions) (ramp.Ramp, error) {
	return s.moveRamp(ctx, key, id, opts, func(r *ramp.Ramp) error {
		if !r.Live() {
			return feature.Errorf(feature.EConflict, "ramp %q is %s already", id, r.State)
		}
		r.State, r.Reason = ramp.Canceled, "canceled by "+actor(ChangeOptions{Actor: opts.Actor})
		return nil
	})
}

// moveRamp applies move to the stored ramp and stores the result, reading
// the ramp again when a step (or another instance) updated it meanwhile.
// opts.Actor is who moves it, for the audit trail.
func (s *Service) moveRamp(ctx context.Context, key, id string, opts RampOptions, move func(*ramp.Ramp) error) (ramp.Ramp, error) {
	for attempt := 0; ; attempt++ {
		r, err := s.Ramp(ctx, key, id)
		if err != nil {
			return ramp.Ramp{}, err
		}
		if err := move(&r); err != nil {
			return ramp.Ramp{}, err
		}
		r.Revision++
		r.UpdatedAt = s.now().UTC()
		r.UpdatedBy = actor(ChangeOptions{Actor: opts.Actor})
		settle, err := opts.Idempotency.Settle(r, r.UpdatedAt)
		if err != nil {
			return ramp.Ramp{}, err
		}
		err = s.store.UpdateRamp(ctx, r, settle)
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
		for r.State == ramp.Active && r.Next < len(r.Steps) && !r.Steps[r.Next].At.After(s.now()) {
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
func (s *Service) stepRamp(ctx context.Context, r ramp.Ramp) (ramp.Ramp, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.reload(ctx, r.Feature)
	if err != nil {
		return r, false, err
	}
	i, step := r.Next, r.Steps[r.Next]
	now := s.now().UTC()
	pause := func(format string, args ...any) (ramp.Ramp, bool, error) {
		next := r.Clone()
		next.UpdatedBy = ""
		next.State, next.Reason = ramp.Paused, fmt.Sprintf("step %d of %d: ", i+1, len(r.Steps))+fmt.Sprintf(format, args...)
		next.Revision++
		next.UpdatedAt = now
		return next, false, s.store.UpdateRamp(ctx, next, nil)
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
		ch       change.Change
		replicas int
		reached  = 1.0
	)
	if step.Share >= 1 {
		replicas = max(b.Replicas, 1)
		ch = change.RampFinal(r.Bucket, replicas, fmt.Sprintf("ramp %s: step %d of %d, %s", r.Bucket, i+1, len(r.Steps), feature.Percent(step.Share)))
	} else {
		replicas, reached, err = r.ReplicasFor(f, step.Share, down)
		if err != nil {
			return pause("%s", feature.ErrorMessage(err))
		}
		ch = change.RampStep(r.Bucket, replicas, fmt.Sprintf("ramp %s: step %d of %d, %s", r.Bucket, i+1, len(r.Steps), feature.Percent(step.Share)))
	}
	next := r.Clone()
	next.UpdatedBy = ""
	next.Next++
	next.Revision++
	next.UpdatedAt = now
	next.Replicas = replicas
	next.Steps[i].Applied, next.Steps[i].Replicas, next.Steps[i].Reached = &now, replicas, reached
	if next.Next == len(next.Steps) {
		next.State = ramp.Done
	}
	if step.Share < 1 && replicas == b.Replicas || step.Share >= 1 && replicas == b.Replicas && othersEmpty(f, r.Bucket) {
		// The bucket has the share already (changed by hand): nothing
		// to change, the step is done.
		return next, false, s.store.UpdateRamp(ctx, next, nil)
	}
	opts := ChangeOptions{Actor: ramp.ActorFor(r), MaxChurn: r.MaxChurn, Comment: r.Comment}
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
		return pause("the step would move %s of users, more than the editors' limit of %s, and %s, an editor, started the ramp: an admin starts a new one, or approvals on for the feature make it a change request", feature.Percent(rep.Churn), feature.Percent(*limit.churn), r.Actor)
	case code == feature.EChurn || code == feature.EInvalid || isChangeError(err):
		// Over max_churn, or a change the feature refuses (the last
		// step removing the fallback, say).
		return pause("%s", feature.ErrorMessage(err))
	}
	return r, false, err
}

// rampBounds are the settings' bounds on a ramp's next step: none, or
// for an editor's ramp no one approved, the editors' churn limit (churn)
// and whether approvals now cover the feature (approval: the step waits).
type rampBounds struct {
	churn    *float64
	approval bool
}

// rampLimit reads the settings' bounds on r's next step.
func (s *Service) rampLimit(ctx context.Context, r ramp.Ramp) (rampBounds, error) {
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
func (g *gate) checkRamp(key string, steps []ramp.StepPreview) error {
	if g == nil {
		return nil
	}
	for i, st := range steps {
		if st.Error == "" && st.Churn > g.settings.MaxChurn {
			rep := st.Report
			return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
				"step %d of the ramp (to %s) would move %s of users of feature %q, more than the editors' limit of %s: use smaller steps, or it needs an admin, or approvals on for the feature (an admin sets them in the settings) to submit it as a change request; nothing was started",
				i+1, feature.Percent(st.Share), feature.Percent(st.Churn), key, feature.Percent(g.settings.MaxChurn))}
		}
	}
	return nil
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

func isChangeError(err error) bool {
	var ce *changeError
	return errors.As(err, &ce)
}
