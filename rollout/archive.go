package rollout

import (
	"context"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/environment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/rollout/request"
)

// Archive, restore, purge. A feature is never deleted in one step: archiving
// stops serving it (apps get not-found, in-app clients drop it) and takes
// it out of the list, but keeps it, its history, exposures and audit
// events; Restore serves its configuration again as a new version; only
// an archived feature can be purged, which removes its rows but never its
// audit events. Its key can be used again only after the purge.
//
// A feature is one in every environment: archiving, restoring or purging
// it in one does it in all of them, in one transaction; the result says
// what it does elsewhere (Result.Elsewhere). An editor's archive or restore
// that would serve a protected environment's users otherwise is a change
// request, as in that environment.

// ArchiveStore is the storage of archived features.
type ArchiveStore interface {
	// ArchiveFeature archives the served feature key, which must be at
	// the given version, and records e (its FeatureID and Version set by
	// the store), canceling its pending schedules (each with its
	// schedule_cancel event); with an approval, marks that request applied
	// (EConflict when it is no longer open); with settle, settles it.
	// ENotFound when no feature key is served, EConflict when it is at
	// another version.
	ArchiveFeature(ctx context.Context, key string, version int, e audit.Event, approval *request.Decision, settle *idempotency.Settlement) error
	// ArchivedFeatures returns the archived features, ordered by key.
	ArchivedFeatures(ctx context.Context) ([]feature.Feature, error)
	// ArchivedFeature returns the archived feature key: ENotFound when
	// there is none, EConflict when the feature is served (not archived).
	ArchivedFeature(ctx context.Context, key string) (feature.Feature, error)
	// RestoreFeature serves the archived feature of f's key again as f,
	// a new version appended as UpdateFeature does (the stored one must
	// be at f.Version-1). ENotFound when no feature key is archived,
	// EConflict when it moved on.
	RestoreFeature(ctx context.Context, f feature.Feature, v Version) error
	// PurgeFeature removes the archived feature key with its history,
	// exposures, ramps and schedules, keeping its audit events, records e and
	// settles settle.
	// ENotFound when there is no feature key, EConflict when it is
	// served (archive it first).
	PurgeFeature(ctx context.Context, key string, e audit.Event, settle *idempotency.Settlement) error
}

// Archive stops serving the feature key, keeping it and its history to be
// restored. The result holds the feature as it was and the report of its
// archiving: every user who had a bucket has none afterwards. DryRun and
// MaxChurn apply as to any change; If-Match names the version archived.
// An editor's archive of a feature that approvals cover is not made: it
// becomes a change request (Result.Request), applied when another person
// approves it.
func (s *Service) Archive(ctx context.Context, key string, opts ChangeOptions) (Result, error) {
	defer s.shareOut(ctx) // after the unlock: deferred calls run last first
	if err := s.checkComment(opts.Comment, opts.DryRun); err != nil {
		return Result{}, err
	}
	g, err := s.gateFor(ctx, opts)
	if err != nil {
		return Result{}, err
	}
	if err := s.mu.lock(ctx); err != nil {
		return Result{}, err
	}
	defer s.mu.Unlock()
	if err := s.requiredBy(key); err != nil {
		return Result{}, err
	}
	if g.covers(key) || g != nil && s.envs.touchesProtected(s.archivedElsewhere(key)) {
		cur, err := s.current(ctx, key, opts)
		if err != nil {
			return Result{}, err
		}
		res, err := archiveResult(cur, opts)
		if err != nil {
			return res, err
		}
		res.Elsewhere = s.archivedElsewhere(key)
		return s.request(ctx, res, request.Spec{Kind: request.SpecArchive}, opts)
	}
	res, err := s.archive(ctx, key, opts)
	if err == nil {
		res.Elsewhere = s.archivedElsewhere(key)
	}
	return res, err
}

// archivedElsewhere is what archiving the feature key in the environment of
// s does in the others that serve it.
func (s *Service) archivedElsewhere(key string) []environment.Effect {
	var out []environment.Effect
	for _, o := range s.envs.others(s) {
		if c := o.Snapshot().Compiled(key); c != nil {
			res, _ := archiveResult(c, ChangeOptions{})
			out = append(out, environment.Effect{Environment: o.env, Version: c.Feature().Version, Churn: res.Report.Churn, Protected: s.envs.protected(o.env)})
		}
	}
	return out
}

// restoredElsewhere is what restoring the feature key in the environment
// of s does in the others where it is archived; an error when one of
// them could not serve it again.
func (s *Service) restoredElsewhere(ctx context.Context, key string) ([]environment.Effect, error) {
	var out []environment.Effect
	for _, o := range s.envs.others(s) {
		old, err := o.store.ArchivedFeature(ctx, key)
		switch feature.ErrorCode(err) {
		case feature.ENotFound, feature.EConflict:
			continue // not there, or served there
		case "":
		default:
			return nil, err
		}
		if err := old.Validate(); err != nil {
			return nil, feature.Errorf(feature.EInvalid, "the archived configuration of feature %q in environment %s is not valid any more (%s): purge it and create it again", key, o.env, feature.ErrorMessage(err))
		}
		if err := s.checkSegments(ctx, old); err != nil {
			return nil, feature.Errorf(feature.EInvalid, "the rules of archived feature %q in environment %s use a segment that is gone (%s): create it again first", key, o.env, feature.ErrorMessage(err))
		}
		rep := s.compileFeature(old).ReportFrom(nil)
		out = append(out, environment.Effect{Environment: o.env, Version: old.Version + 1, Churn: rep.Churn, Protected: s.envs.protected(o.env)})
	}
	return out, nil
}

// archive is Archive not bound by the settings. The caller holds s.mu.
func (s *Service) archive(ctx context.Context, key string, opts ChangeOptions) (Result, error) {
	return s.onFresh(ctx, key, opts, func(cur *feature.Compiled) (Result, error) {
		if err := s.requiredBy(key); err != nil {
			return Result{}, err
		}
		res, err := archiveResult(cur, opts)
		if err != nil || opts.DryRun {
			return res, err
		}
		now := s.now().UTC()
		settles, err := opts.Idempotency.Settle(res, now)
		if err != nil {
			return Result{}, err
		}
		churn := res.Report.Churn
		e := audit.Event{
			Time: now, Actor: actor(opts), Kind: audit.Archive, Feature: key, Version: cur.Feature().Version,
			Summary: audit.JoinSummary(archivedSummary, audit.ShareSummary(res.Report)), Comment: opts.Comment, Churn: &churn,
		}
		if err := s.store.ArchiveFeature(ctx, key, cur.Feature().Version, e, opts.request, settles); err != nil {
			return Result{}, err
		}
		s.everywhere()
		s.swap(key, nil)
		s.committed()
		return res, nil
	}, nil)
}

// archivedSummary says what archiving does.
const archivedSummary = "archived: apps get not-found"

// archiveResult is the result of archiving cur: the feature as it is, and
// the report of every user who has a bucket having none; EChurn when it
// moves more than opts.MaxChurn allows.
func archiveResult(cur *feature.Compiled, opts ChangeOptions) (Result, error) {
	gone := cur.Feature().Clone()
	gone.Version, gone.Enabled, gone.Fallback = 0, false, "" // serves no one
	rep := feature.Compile(gone, nil).ReportFrom(cur)
	if err := checkChurn(rep, opts); err != nil {
		return Result{}, err
	}
	return Result{Feature: cur.Feature(), Report: rep, Shares: cur.Shares(), DryRun: opts.DryRun}, nil
}

// ArchivedFeatures returns the archived features, ordered by key.
func (s *Service) ArchivedFeatures(ctx context.Context) ([]feature.Feature, error) {
	return s.store.ArchivedFeatures(ctx)
}

// ArchivedFeature returns the archived feature key: ENotFound when there is
// no feature key, EConflict when it is served.
func (s *Service) ArchivedFeature(ctx context.Context, key string) (feature.Feature, error) {
	return s.store.ArchivedFeature(ctx, key)
}

// Restore serves the archived feature key again with the configuration it
// had when archived, as a new version whose report moves users from no
// bucket back into theirs. If-Match names the archived version. An
// editor's restore of a feature that approvals cover is not made: it
// becomes a change request (Result.Request) with this preview, applied
// when another person approves it. Errors: ENotFound when no feature key
// exists, EConflict when it is not archived.
func (s *Service) Restore(ctx context.Context, key string, opts ChangeOptions) (Result, error) {
	defer s.shareOut(ctx) // after the unlock: deferred calls run last first
	if err := s.checkComment(opts.Comment, opts.DryRun); err != nil {
		return Result{}, err
	}
	g, err := s.gateFor(ctx, opts)
	if err != nil {
		return Result{}, err
	}
	if err := s.mu.lock(ctx); err != nil {
		return Result{}, err
	}
	defer s.mu.Unlock()
	elsewhere, err := s.restoredElsewhere(ctx, key)
	if err != nil {
		return Result{}, err
	}
	if g.covers(key) || g != nil && s.envs.touchesProtected(elsewhere) {
		res, _, _, err := s.restoreResult(ctx, key, opts)
		if err != nil {
			return res, err
		}
		res.Elsewhere = elsewhere
		return s.request(ctx, res, request.Spec{Kind: request.SpecRestore}, opts)
	}
	res, err := s.restore(ctx, key, opts)
	if err == nil {
		res.Elsewhere = elsewhere
	}
	return res, err
}

// restore is Restore not bound by the settings. The caller holds s.mu.
func (s *Service) restore(ctx context.Context, key string, opts ChangeOptions) (Result, error) {
	res, next, cc, err := s.restoreResult(ctx, key, opts)
	if err != nil || opts.DryRun {
		return res, err
	}
	now := next.UpdatedAt
	settles, err := opts.Idempotency.Settle(res, now)
	if err != nil {
		return Result{}, err
	}
	v := Version{
		Version: next.Version, Actor: actor(opts), Time: now, Summary: restoredSummary,
		Comment: opts.Comment, Config: next, OverrideCount: len(next.Overrides), Report: res.Report, Kind: audit.Restore,
		Request: opts.request, Settles: settles,
	}
	if err := s.store.RestoreFeature(ctx, next, v); err != nil {
		return Result{}, err
	}
	s.everywhere()
	s.swap(key, cc)
	s.committed()
	return res, nil
}

// restoredSummary says what restoring does.
const restoredSummary = "restored from the archive"

// restoreResult previews the restore of the archived feature key: its
// result, the feature as it would be served and its compiled form. It
// checks If-Match against the archived version, the configuration, its
// segments and opts.MaxChurn. The caller holds s.mu.
func (s *Service) restoreResult(ctx context.Context, key string, opts ChangeOptions) (Result, feature.Feature, *feature.Compiled, error) {
	old, err := s.store.ArchivedFeature(ctx, key)
	if err != nil {
		return Result{}, feature.Feature{}, nil, err
	}
	if opts.IfMatch != "" && opts.IfMatch != "*" && opts.IfMatch != old.Tag() {
		return Result{}, feature.Feature{}, nil, feature.Errorf(feature.EPrecondition, "archived feature %q is %q, not %q: reload it and decide again", key, old.Tag(), opts.IfMatch)
	}
	if err := old.Validate(); err != nil {
		return Result{}, feature.Feature{}, nil, feature.Errorf(feature.EInvalid, "the archived configuration of feature %q is not valid any more (%s): purge it and create it again", key, feature.ErrorMessage(err))
	}
	if err := s.checkSegments(ctx, old); err != nil {
		return Result{}, feature.Feature{}, nil, feature.Errorf(feature.EInvalid, "the rules of archived feature %q use a segment that is gone (%s): create it again first", key, feature.ErrorMessage(err))
	}
	next := old.Clone()
	next.Version, next.UpdatedAt = old.Version+1, s.now().UTC()
	cc := s.compileFeature(next)
	if err := cc.CheckPatterns(); err != nil {
		return Result{}, feature.Feature{}, nil, feature.Errorf(feature.EInvalid, "the rules of archived feature %q would pass the limits of patterns with the segments as they are now (%s): purge it and create it again", key, feature.ErrorMessage(err))
	}
	rep := cc.ReportFrom(nil)
	rep.FromVersion = old.Version
	if err := checkChurn(rep, opts); err != nil {
		return Result{}, feature.Feature{}, nil, err
	}
	return Result{Feature: next, Report: rep, Shares: cc.Shares(), DryRun: opts.DryRun}, next, cc, nil
}

// Purge removes the archived feature key with its history, exposures and
// ramps; its audit events stay, and the purge's own is added. Its key can
// then be used for a new feature. The API lets only admins purge, so no
// editor's purge is ever a change request. Errors: ENotFound when there is no
// feature key, EConflict when it is served (archive it first).
func (s *Service) Purge(ctx context.Context, key string, opts ChangeOptions) error {
	defer s.shareOut(ctx) // after the unlock: deferred calls run last first
	if err := s.checkComment(opts.Comment, opts.DryRun); err != nil {
		return err
	}
	if err := s.mu.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	now := s.now().UTC()
	settles, err := opts.Idempotency.Settle(struct{}{}, now)
	if err != nil {
		return err
	}
	e := audit.Event{
		Time: now, Actor: actor(opts), Kind: audit.Purge, Feature: key,
		Summary: "purged: its configuration, history, exposures and ramps were removed; its audit events are kept",
		Comment: opts.Comment,
	}
	if err := s.store.PurgeFeature(ctx, key, e, settles); err != nil {
		return err
	}
	s.everywhere()
	s.swap(key, nil)
	s.committed()
	return nil
}
