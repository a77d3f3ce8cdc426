package rollout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/ramp"
	"github.com/rollout/rollout/rollout/request"
)

// RequestStore keeps change requests.
type RequestStore interface {
	// CreateRequest stores r (state open), records request_create and
	// settles r.Settles, in one transaction; EConflict when r's author
	// has request.MaxOpen open ones already.
	CreateRequest(ctx context.Context, r request.Request) error
	// Requests returns the requests q selects, newest first.
	Requests(ctx context.Context, q request.Query) ([]request.Request, error)
	// Request returns one request; ENotFound if none has that ID.
	Request(ctx context.Context, id string) (request.Request, error)
	// CloseRequest marks the open request id rejected or canceled by by,
	// with comment, and records its event (request_reject,
	// request_cancel); EConflict when it is not open.
	CloseRequest(ctx context.Context, id string, state request.State, by, comment string, at time.Time) error
	// RepreviewRequest replaces the preview of the open request r.ID with
	// r's IfMatch, BaseVersion, Report, Summary, Segments, RampSteps and
	// Repreviewed; EConflict when it is not open.
	RepreviewRequest(ctx context.Context, r request.Request) error
}

// submit stores the change that needsApproval describes as a request by
// opts.Actor.
func (s *Service) submit(ctx context.Context, na *needsApproval, opts ChangeOptions) (Result, error) {
	f := na.res.Feature
	r := s.newRequest(f, na.spec, opts)
	refs := s.segmentRefs(na.segments)
	r.Summary = audit.JoinSummary(na.summary, audit.PreviewSummary(na.res.Report), segmentWords(refs))
	r.IfMatch, r.BaseVersion, r.Report, r.Segments = na.ifMatch, na.base, na.res.Report, refs
	return s.file(ctx, na.res, r, opts)
}

// newRequest is an open request by opts.Actor of change spec to feature
// f, without its preview.
func (s *Service) newRequest(f feature.Feature, spec request.Spec, opts ChangeOptions) request.Request {
	return request.Request{
		ID: uuid.NewString(), Feature: f.Key, FeatureID: f.ID, State: request.Open, Author: actor(opts),
		CreatedAt: s.now().UTC(), Comment: opts.Comment, Change: spec,
	}
}

// request makes the change spec, whose result res is, a change request by
// opts.Actor, previewed on the feature as it stands; a dry run only says
// it needs an approval. The caller holds s.mu.
func (s *Service) request(ctx context.Context, res Result, spec request.Spec, opts ChangeOptions) (Result, error) {
	if opts.DryRun {
		res.Needs = "approval"
		return res, nil
	}
	r, err := s.preview(ctx, s.newRequest(res.Feature, spec, opts))
	if err != nil {
		return Result{}, err
	}
	return s.file(ctx, res, r, opts)
}

// file stores r, which res (its preview) answers, keeping the answer of
// opts.Idempotency with it.
func (s *Service) file(ctx context.Context, res Result, r request.Request, opts ChangeOptions) (Result, error) {
	res.Request = &r
	w := r
	var err error
	if w.Settles, err = opts.Idempotency.Settle(res, r.CreatedAt); err != nil {
		return Result{}, err
	}
	if err := s.store.CreateRequest(ctx, w); err != nil {
		return Result{}, err
	}
	return res, nil
}

// segmentRefs returns the versions of the segments keys name that exist,
// as the snapshot holds them; an empty map for none.
func (s *Service) segmentRefs(keys []string) map[string]request.SegmentRef {
	segs := s.Snapshot().CompiledSegments()
	out := make(map[string]request.SegmentRef, len(keys))
	for _, k := range keys {
		if c, ok := segs[k]; ok {
			out[k] = request.SegmentRef{Version: c.Segment().Version, CreatedAt: c.Segment().CreatedAt}
		}
	}
	return out
}

// segmentWords says which segments' versions a preview was made with:
// "with segment staff at version 3"; "" for none.
func segmentWords(refs map[string]request.SegmentRef) string {
	if len(refs) == 0 {
		return ""
	}
	parts := make([]string, 0, len(refs))
	for _, k := range slices.Sorted(maps.Keys(refs)) {
		parts = append(parts, fmt.Sprintf("%s at version %d", k, refs[k].Version))
	}
	return "with segment(s) " + strings.Join(parts, ", ")
}

// movedSegments names the segments whose versions differ between was (a
// request's) and now (a preview made now): changed, deleted, created
// again, or newly used; "" when none moved.
func movedSegments(was, now map[string]request.SegmentRef) string {
	var moved []string
	for k, a := range was {
		if b, ok := now[k]; !ok {
			moved = append(moved, k+" (deleted)")
		} else if a.Version != b.Version || !a.CreatedAt.Equal(b.CreatedAt) {
			moved = append(moved, fmt.Sprintf("%s (version %d → %d)", k, a.Version, b.Version))
		}
	}
	for k, b := range now {
		if _, ok := was[k]; !ok {
			moved = append(moved, fmt.Sprintf("%s (version %d, not in the preview)", k, b.Version))
		}
	}
	slices.Sort(moved)
	return strings.Join(moved, ", ")
}

// preview previews the change request r asks for on its feature as it
// stands now: r with a new IfMatch, BaseVersion, Report, Summary,
// Segments and RampSteps. The caller holds s.mu.
func (s *Service) preview(ctx context.Context, r request.Request) (request.Request, error) {
	var (
		res  Result
		what string
		segs []string
	)
	switch r.Change.Kind {
	case request.SpecArchive:
		cur, err := s.current(ctx, r.Feature, ChangeOptions{})
		if err != nil {
			return r, err
		}
		if res, err = archiveResult(cur, ChangeOptions{}); err != nil {
			return r, err
		}
		r.IfMatch, r.BaseVersion, what = cur.Feature().Tag(), cur.Feature().Version, "archive: apps would get not-found"
	case request.SpecRestore:
		var err error
		if res, _, _, err = s.restoreResult(ctx, r.Feature, ChangeOptions{}); err != nil {
			return r, err
		}
		if res.Feature.ID != r.FeatureID {
			return r, feature.Errorf(feature.EConflict, "feature %q was purged and created again since request %s was made: reject it", r.Feature, r.ID)
		}
		old := res.Feature
		old.Version--
		r.IfMatch, r.BaseVersion, what, segs = old.Tag(), old.Version, "restore from the archive", res.Feature.Segments()
	case request.SpecRamp:
		return s.previewRampRequest(ctx, r)
	default:
		cur, err := s.current(ctx, r.Feature, ChangeOptions{})
		if err != nil {
			return r, err
		}
		ch, err := s.requested(ctx, r)
		if err != nil {
			return r, err
		}
		if res, _, _, err = s.prepare(cur, ch, ChangeOptions{DryRun: true}); err != nil {
			return r, err
		}
		r.IfMatch, r.BaseVersion, what = cur.Feature().Tag(), cur.Feature().Version, ch.Summary()
		segs = append(cur.Feature().Segments(), res.Feature.Segments()...)
	}
	r.Report, r.Segments = res.Report, s.segmentRefs(segs)
	r.Summary = audit.JoinSummary(what, audit.PreviewSummary(res.Report), segmentWords(r.Segments))
	return r, nil
}

// Requests returns the requests q selects, newest first, at most
// request.MaxPage (the default).
func (s *Service) Requests(ctx context.Context, q request.Query) ([]request.Request, error) {
	if q.Limit <= 0 || q.Limit > request.MaxPage {
		q.Limit = request.MaxPage
	}
	return s.store.Requests(ctx, q)
}

// Request returns the request id.
func (s *Service) Request(ctx context.Context, id string) (request.Request, error) {
	return s.store.Request(ctx, id)
}

// ApproveRequest applies the open request id, approved by approver, as a
// new version of its feature whose actor names both ("alice, approved by
// bob"), with the preview's If-Match (an archive, a restore, a ramp started
// alike). If the feature moved on, or a segment the preview was made with
// changed, the change is previewed again as things stand, the request
// keeps open with the new preview, and EPrecondition (with the new report)
// says to approve again. Errors: ENotFound, EConflict (not open any more),
// EForbidden (the approver wrote it), the change's.
func (s *Service) ApproveRequest(ctx context.Context, id, approver, comment string) (Result, request.Request, error) {
	if err := s.checkComment(comment, false); err != nil {
		return Result{}, request.Request{}, err
	}
	defer s.shareOut(ctx) // after the unlock: deferred calls run last first
	if err := s.mu.lock(ctx); err != nil {
		return Result{}, request.Request{}, err
	}
	defer s.mu.Unlock()
	r, err := s.openRequest(ctx, id)
	if err != nil {
		return Result{}, r, err
	}
	approver = actor(ChangeOptions{Actor: approver})
	if approver == r.Author {
		return Result{}, r, feature.Errorf(feature.EForbidden, "you (%s) submitted request %s: another editor or an admin approves it", approver, id)
	}
	// Segments changed on another instance count too.
	if err := s.reloadSegments(ctx); err != nil {
		return Result{}, r, err
	}
	now, err := s.preview(ctx, r)
	if err != nil && feature.ErrorCode(err) != feature.EPrecondition {
		return Result{}, r, noLongerApplies(r, err)
	}
	if moved := movedSegments(r.Segments, now.Segments); err == nil && moved != "" {
		return Result{}, r, s.saveRepreview(ctx, r, now, fmt.Sprintf("segment(s) %s changed since request %s was previewed", moved, r.ID))
	}
	opts := ChangeOptions{
		Actor: r.Author + ", approved by " + approver, IfMatch: r.IfMatch, Comment: r.Comment,
		request: &request.Decision{ID: r.ID, By: approver, Comment: comment},
	}
	var res Result
	switch r.Change.Kind {
	case request.SpecArchive:
		res, err = s.archive(ctx, r.Feature, opts)
	case request.SpecRestore:
		res, err = s.restore(ctx, r.Feature, opts)
	case request.SpecRamp:
		var started ramp.Ramp
		if started, res, err = s.startApprovedRamp(ctx, r, approver, comment); err == nil {
			r.AppliedRamp = started.ID
		}
	default:
		var ch change.Change
		if ch, err = s.requested(ctx, r); err != nil {
			return Result{}, r, err
		}
		res, err = s.onFresh(ctx, r.Feature, opts, func(cur *feature.Compiled) (Result, error) {
			return s.apply(ctx, cur, ch, opts)
		}, nil)
	}
	if feature.ErrorCode(err) == feature.EPrecondition {
		return Result{}, r, s.repreview(ctx, r)
	}
	if err != nil {
		return Result{}, r, err
	}
	at := s.now().UTC()
	r.State, r.DecidedBy, r.DecidedAt, r.Decision, r.AppliedVersion = request.Applied, approver, &at, comment, res.Feature.Version
	if r.Change.Kind == request.SpecRamp || r.Change.Kind == request.SpecArchive {
		r.AppliedVersion = 0 // neither makes a version
	}
	return res, r, nil
}

// repreview previews the request r's change on its feature as it stands
// now, saves the new preview, and returns the EPrecondition that says so.
func (s *Service) repreview(ctx context.Context, r request.Request) error {
	if _, err := s.reload(ctx, r.Feature); err != nil {
		return err
	}
	now, err := s.preview(ctx, r)
	if err != nil {
		return noLongerApplies(r, err)
	}
	return s.saveRepreview(ctx, r, now, fmt.Sprintf("feature %q moved on from version %d, where request %s was previewed, to version %d", r.Feature, r.BaseVersion, r.ID, now.BaseVersion))
}

// noLongerApplies says that request r's change cannot be made as things
// stand (err says why), keeping err's code.
func noLongerApplies(r request.Request, err error) error {
	var e *feature.Error
	if !errors.As(err, &e) || e.Code == feature.EInternal || e.Code == feature.EUnavailable {
		return err
	}
	return &feature.Error{Code: e.Code, Report: e.Report, Message: fmt.Sprintf("request %s no longer applies as things stand: %s; reject it (or its author cancels it)", r.ID, e.Message)}
}

// saveRepreview saves now, the new preview of request r, and returns the
// EPrecondition that says why (what moved) and what it now does.
func (s *Service) saveRepreview(ctx context.Context, r request.Request, now request.Request, why string) error {
	now.Repreviewed = r.Repreviewed + 1
	if err := s.store.RepreviewRequest(ctx, now); err != nil {
		return err
	}
	rep := now.Report
	return &feature.Error{Code: feature.EPrecondition, Report: &rep, Message: fmt.Sprintf(
		"%s: the change now moves %s of users (%s); nothing was applied; the request stays open with this new preview: approve it again to apply it",
		why, feature.Percent(rep.Churn), now.Summary)}
}

// requested makes the change request r asks for.
func (s *Service) requested(ctx context.Context, r request.Request) (change.Change, error) {
	if r.Change.Kind != request.SpecRollback {
		return change.FromSpec(r.Change)
	}
	old, err := s.store.Version(ctx, r.Feature, r.Change.Version)
	if err != nil {
		return change.Change{}, err
	}
	return change.Rollback(old.Config, r.Change.KeepOverrides).WithSpec(r.Change), nil
}

// RejectRequest closes the open request id as rejected by actorName, who
// may not be its author (the author cancels). CancelRequest closes it as
// canceled by its author, the only one who may.
func (s *Service) RejectRequest(ctx context.Context, id, actorName, comment string) (request.Request, error) {
	return s.closeRequest(ctx, id, request.Rejected, actorName, comment)
}

// CancelRequest: see RejectRequest.
func (s *Service) CancelRequest(ctx context.Context, id, actorName, comment string) (request.Request, error) {
	return s.closeRequest(ctx, id, request.Canceled, actorName, comment)
}

func (s *Service) closeRequest(ctx context.Context, id string, state request.State, by, comment string) (request.Request, error) {
	if err := validateComment(comment); err != nil {
		return request.Request{}, err
	}
	r, err := s.openRequest(ctx, id)
	if err != nil {
		return r, err
	}
	by = actor(ChangeOptions{Actor: by})
	switch {
	case state == request.Rejected && by == r.Author:
		return r, feature.Errorf(feature.EForbidden, "you (%s) submitted request %s: cancel it (POST /api/requests/%s/cancel) rather than reject it", by, id, id)
	case state == request.Canceled && by != r.Author:
		return r, feature.Errorf(feature.EForbidden, "only its author, %s, cancels request %s: reject it instead", r.Author, id)
	}
	now := s.now().UTC()
	if err := s.store.CloseRequest(ctx, id, state, by, comment, now); err != nil {
		return r, err
	}
	r.State, r.DecidedBy, r.DecidedAt, r.Decision = state, by, &now, comment
	return r, nil
}

// openRequest reads request id, EConflict when it is not open.
func (s *Service) openRequest(ctx context.Context, id string) (request.Request, error) {
	r, err := s.store.Request(ctx, id)
	if err != nil {
		return r, err
	}
	if r.State != request.Open {
		return r, feature.Errorf(feature.EConflict, "request %s is %s already (by %s): nothing was done", id, r.State, r.DecidedBy)
	}
	return r, nil
}

// asRequest turns a change refused by the gate for approval into a
// request; other results pass.
func (s *Service) asRequest(ctx context.Context, res Result, err error, opts ChangeOptions) (Result, error) {
	na, ok := errors.AsType[*needsApproval](err)
	if !ok {
		return res, err
	}
	return s.submit(ctx, na, opts)
}
