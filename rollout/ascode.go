package rollout

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/document"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/rollout/plan"
)

// Rollouts as code (package rollout/document: a document.Document, its validation,
// its plan against a snapshot, its export). Service.PlanDocument plans a
// document against the features as the service holds them;
// Service.ApplyDocument makes every change of the plan as one batch of
// versions (Store.ApplyBatch), each checked against the version its plan
// read, or none of them.

// PlanDocument returns what applying d would change, against the features
// as this service holds them now (see Document.Plan). Nothing is stored.
func (s *Service) PlanDocument(ctx context.Context, d document.Document, opts plan.Options) (document.Plan, error) {
	if err := d.CheckEnvironment(s.env); err != nil {
		return document.Plan{}, err
	}
	return d.Plan(ctx, s.Snapshot(), opts)
}

// BatchWrite is one feature's new version in a batch (Store.ApplyBatch):
// Feature at Version, which replaces the stored feature at Version.Version-1
// of Feature's ID, or, with Create, is a new feature at version 1.
type BatchWrite struct {
	Feature feature.Feature
	Version Version
	Create  bool
}

// SegmentWrite is one segment's new version in a batch: Segment at
// Version.Version, which replaces the stored segment at the version below,
// or, with Create, is a new segment at version 1.
type SegmentWrite struct {
	Segment feature.Segment
	Version feature.SegmentVersion
	Create  bool
}

// Batch is what Store.ApplyBatch writes: new versions of several features
// and segments, and the idempotency key of the request that makes them.
type Batch struct {
	Features []BatchWrite
	Segments []SegmentWrite
	// Settles, when not nil, is marked done in the batch's transaction,
	// as a Version's Settles is in its own.
	Settles *idempotency.Settlement
}

// BatchStore writes versions of several features and segments at once.
type BatchStore interface {
	// ApplyBatch writes every write of b in one transaction, with a
	// commit and an audit event each, and settles b.Settles, or none of
	// them: a feature or segment that is not at the version its write
	// expects (or, for a Create, exists) fails the batch with an
	// EConflict *Error that names it, an update of one that does not
	// exist with ENotFound, a key no longer the request's with EKeyInUse.
	ApplyBatch(ctx context.Context, b Batch) error
}

// ApplyOptions are the guards and author of ApplyDocument.
type ApplyOptions struct {
	Actor   string
	Comment string
	// Role is the role of the token applying: an editor's document is
	// bound by the Settings (see checkDocument); "" and admins are not.
	Role auth.Role
	// Versions, when not nil, are the versions the document's plan read
	// (document.Plan.Versions): a feature of the document at another
	// version now (0: it must not exist) refuses the whole apply with
	// EPrecondition, storing nothing. Every feature the document lists
	// must have one.
	Versions map[string]int
	// SegmentVersions are, likewise, the versions of the document's
	// segments its plan read (document.Plan.SegmentVersions): needed with
	// Versions when the document lists segments.
	SegmentVersions map[string]int
	// MaxChurn refuses, with EChurn, a document that would move more than
	// this fraction of one feature's users; MaxTotalChurn one whose
	// TotalChurn is above it.
	MaxChurn      *float64
	MaxTotalChurn *float64
	Plan          plan.Options
	// Idempotency, when not nil, is the request's idempotency key, kept
	// with the batch's answer, a document.Plan (see Idempotency).
	Idempotency *idempotency.Key
}

// ApplyDocument makes every change d plans (see PlanDocument) as one batch
// of versions, each with opts's actor and comment, or none of them. It
// returns the plan it applied, Applied when it stored anything. Errors:
// EInvalid for a bad document, EPrecondition when a feature is not at the
// version opts.Versions names, EChurn when a guard refuses, naming the
// feature; the store's.
func (s *Service) ApplyDocument(ctx context.Context, d document.Document, opts ApplyOptions) (document.Plan, error) {
	if err := d.Validate(); err != nil {
		return document.Plan{}, err
	}
	if err := d.CheckEnvironment(s.env); err != nil {
		return document.Plan{}, err
	}
	if err := s.checkComment(opts.Comment, false); err != nil {
		return document.Plan{}, err
	}
	if opts.Versions != nil {
		for _, f := range d.Features {
			if _, ok := opts.Versions[f.Key]; !ok {
				return document.Plan{}, feature.Errorf(feature.EInvalid, "the versions do not name feature %q: give the versions of the document's plan for every feature it lists", f.Key)
			}
		}
		for _, sg := range d.Segments {
			if _, ok := opts.SegmentVersions[sg.Key]; !ok {
				return document.Plan{}, feature.Errorf(feature.EInvalid, "the segment_versions do not name segment %q: give the segment versions of the document's plan for every segment it lists", sg.Key)
			}
		}
	}
	g, err := s.gateFor(ctx, ChangeOptions{Role: opts.Role})
	if err != nil {
		return document.Plan{}, err
	}
	defer s.shareOut(ctx) // after the unlock: deferred calls run last first
	if err := s.mu.lock(ctx); err != nil {
		return document.Plan{}, err
	}
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		p, err := s.applyDocument(ctx, d, opts, g)
		if attempt >= 2 || feature.ErrorCode(err) != feature.EConflict {
			return p, err
		}
		// The snapshot lagged behind another instance: read the
		// document's features again, then check and plan anew.
		if _, rerr := s.syncLocked(ctx); rerr != nil {
			return document.Plan{}, rerr
		}
	}
}

// checkSegmentVersions refuses, with EPrecondition, a document whose
// segments are not at the versions want names (nil: no check). The
// caller holds s.mu.
func (s *Service) checkSegmentVersions(ctx context.Context, d document.Document, want map[string]int) error {
	if want == nil || len(d.Segments) == 0 {
		return nil
	}
	have := func() map[string]int {
		out := map[string]int{}
		for _, sg := range d.Segments {
			if c, ok := s.Snapshot().CompiledSegments()[sg.Key]; ok {
				out[sg.Key] = c.Segment().Version
			}
		}
		return out
	}
	got := have()
	for _, sg := range d.Segments {
		if got[sg.Key] != want[sg.Key] {
			// The snapshot may lag behind another instance.
			if err := s.reloadSegments(ctx); err != nil {
				return err
			}
			got = have()
			break
		}
	}
	for _, sg := range d.Segments {
		h, w := got[sg.Key], want[sg.Key]
		switch {
		case h == w:
		case w == 0:
			return feature.Errorf(feature.EPrecondition, "segment %q was created (it is at version %d) since the plan, which would have created it: plan again; nothing was changed", sg.Key, h)
		case h == 0:
			return feature.Errorf(feature.EPrecondition, "segment %q was deleted since the plan read its version %d: plan again; nothing was changed", sg.Key, w)
		default:
			return feature.Errorf(feature.EPrecondition, "segment %q is at version %d, not %d as the plan read: plan again; nothing was changed", sg.Key, h, w)
		}
	}
	return nil
}

// applyDocument is one attempt of ApplyDocument. The caller holds s.mu.
func (s *Service) applyDocument(ctx context.Context, d document.Document, opts ApplyOptions, g *gate) (document.Plan, error) {
	// Segments first: a segment changed meanwhile moved on the features
	// that use it too, and is what to name.
	if err := s.checkSegmentVersions(ctx, d, opts.SegmentVersions); err != nil {
		return document.Plan{}, err
	}
	for _, f := range d.Features {
		want, ok := opts.Versions[f.Key]
		if !ok {
			continue
		}
		c := s.Snapshot().Compiled(f.Key)
		if c == nil && want != 0 || c != nil && c.Feature().Version != want {
			// The snapshot may lag behind another instance: ask the store.
			var err error
			if c, err = s.reload(ctx, f.Key); err != nil {
				return document.Plan{}, err
			}
		}
		have := 0
		if c != nil {
			have = c.Feature().Version
		}
		switch {
		case have == want:
		case want == 0:
			return document.Plan{}, feature.Errorf(feature.EPrecondition, "feature %q was created (it is at version %d) since the plan, which would have created it: plan again; nothing was changed", f.Key, have)
		case have == 0:
			return document.Plan{}, feature.Errorf(feature.EPrecondition, "feature %q was deleted since the plan read its version %d: plan again; nothing was changed", f.Key, want)
		default:
			return document.Plan{}, feature.Errorf(feature.EPrecondition, "feature %q is at version %d, not %d as the plan read: plan again; nothing was changed", f.Key, have, want)
		}
	}
	if err := d.CheckSegments(s.Snapshot().CompiledSegments()); err != nil {
		// Made by another instance? Ask the store before refusing.
		if rerr := s.reloadSegments(ctx); rerr != nil {
			return document.Plan{}, rerr
		}
	}
	p, err := d.Plan(ctx, s.Snapshot(), opts.Plan)
	if err != nil {
		return document.Plan{}, err
	}
	for _, ch := range p.Changes {
		if ch.Action != document.ActionNone && opts.MaxChurn != nil && ch.Churn > *opts.MaxChurn {
			return document.Plan{}, overMaxChurn(fmt.Sprintf("feature %q", ch.Feature), ch.Report, *opts.MaxChurn, "nothing was changed")
		}
	}
	if err := g.checkDocument(p); err != nil {
		return document.Plan{}, err
	}
	if opts.MaxTotalChurn != nil && p.TotalChurn > *opts.MaxTotalChurn {
		return document.Plan{}, feature.Errorf(feature.EChurn, "the document would move %.4f%% of users in all (the sum over its features), more than max_total_churn %.4f%%: nothing was changed", 100*p.TotalChurn, 100**opts.MaxTotalChurn)
	}
	if p.Changed == 0 {
		return p, nil
	}
	now := s.now().UTC()
	segs := s.Snapshot().CompiledSegments()
	var sws []SegmentWrite
	for _, sc := range p.Segments {
		if sc.Action == document.ActionNone {
			continue
		}
		if sws == nil {
			segs = maps.Clone(segs)
		}
		seg := sc.After().Clone()
		seg.UpdatedAt = now
		summary := "changed: " + feature.DescribeConditions(seg.Conditions)
		if sc.Action == document.ActionCreate {
			seg.CreatedAt = now
			summary = "created: " + feature.DescribeConditions(seg.Conditions)
		} else if !slices.Contains(sc.Fields, "conditions") {
			summary = "description changed"
		}
		if seg.List && sc.Action == document.ActionCreate {
			summary = "created: a user list of 0 users, from a document"
		}
		segs[seg.Key] = feature.CompileSegmentAfter(seg, segs[seg.Key])
		sws = append(sws, SegmentWrite{Segment: seg, Create: sc.Action == document.ActionCreate, Version: feature.SegmentVersion{
			Version: seg.Version, Actor: actor(ChangeOptions{Actor: opts.Actor}), Time: now, Summary: change.AbbreviateSummary(summary), Comment: opts.Comment, Config: seg,
		}})
	}
	ws := make([]BatchWrite, 0, p.Changed)
	compiled := make(map[string]*feature.Compiled, p.Changed) // the changed features as stored
	for _, ch := range p.Changes {
		if ch.Action == document.ActionNone {
			continue
		}
		f := ch.After().Feature()
		f.UpdatedAt = now
		create := ch.Before() == nil
		if create {
			f.ID, f.CreatedAt = uuid.NewString(), now
		}
		summary := "applied from a document: " + strings.Join(ch.Fields, ", ")
		if create {
			summary = "created from a document"
		}
		compiled[ch.Feature] = feature.Compile(f, segs)
		v := Version{
			Version: f.Version, Actor: actor(ChangeOptions{Actor: opts.Actor}), Time: now, Summary: summary, Comment: opts.Comment,
			Config: f, OverrideCount: len(f.Overrides), Report: ch.Report,
		}
		if create {
			v.Elsewhere = s.envs.elsewhere(s, f, v)
			s.redefined.Store(len(v.Elsewhere) > 0 || s.redefined.Load()) // shareOut syncs them
		} else {
			s.noteDefinition(ch.Before().Feature(), f)
		}
		ws = append(ws, BatchWrite{Feature: f, Create: create, Version: v})
	}
	p.Applied = true
	settles, err := opts.Idempotency.Settle(p, now)
	if err != nil {
		return document.Plan{}, err
	}
	// The write is bounded by the store's own deadline, which grows with
	// the batch, not by the plan's (ctx may end when the plan's search
	// time does).
	if err := s.store.ApplyBatch(context.WithoutCancel(ctx), Batch{Features: ws, Segments: sws, Settles: settles}); err != nil {
		if feature.ErrorCode(err) == feature.EConflict && opts.Versions != nil {
			return document.Plan{}, feature.Errorf(feature.EPrecondition, "%s; nothing was changed", feature.ErrorMessage(err))
		}
		return document.Plan{}, err
	}
	next := s.Snapshot()
	if len(sws) > 0 {
		next = next.WithSegments(segs)
	}
	for _, ch := range p.Changes {
		if ch.Action != document.ActionNone {
			s.retire(next.Compiled(ch.Feature))
			next = next.With(ch.Feature, compiled[ch.Feature])
		}
	}
	s.snap.Store(next)
	s.committed()
	return p, nil
}
