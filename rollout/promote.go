package rollout

import (
	"context"
	"fmt"

	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/environment"
	"github.com/rollout/rollout/rollout/feature"
)

// PromoteOptions are a promotion's: from where to where, what, and the
// guards of the change in the target (Change: dry run, max_churn, If-Match
// of the target, comment, actor and role).
type PromoteOptions struct {
	From, To string
	Include  []string
	// FromVersion, when not 0, pins the source: the promotion is refused
	// with EPrecondition if the source's feature is at another version.
	FromVersion int
	// Versions, in a batch (PromoteMany), pins features: each named is
	// refused with EPrecondition, and the batch with it, if its source or
	// its target is at another version than the pin's (0: not pinned).
	Versions map[string]environment.Pin
	Change   ChangeOptions
}

// Promote makes the feature key in the environment p.To as it is in
// p.From, for the parts p.Include names, through the target's pipeline:
// its report is the churn in the target, exactly what a preview of the
// same configuration there reports; editors are held to the target's
// settings, and a protected target makes their promotion a request.
func (e *Environments) Promote(ctx context.Context, key string, p PromoteOptions) (Result, error) {
	if p.From == p.To {
		return Result{}, &feature.Error{Code: feature.EInvalid, Field: "to", Message: "a promotion goes from one environment to another: from and to are both " + p.From}
	}
	src, err := e.Lookup(p.From)
	if err != nil {
		return Result{}, err
	}
	dst, err := e.Lookup(p.To)
	if err != nil {
		return Result{}, err
	}
	source, err := src.Feature(ctx, key)
	if err != nil {
		return Result{}, err
	}
	if p.FromVersion != 0 && source.Version != p.FromVersion {
		return Result{}, feature.Errorf(feature.EPrecondition, "feature %q is at version %d in %s, not %d: review the promotion again", key, source.Version, p.From, p.FromVersion)
	}
	ch, err := change.Promotion(p.From, source, p.Include)
	if err != nil {
		return Result{}, err
	}
	if res, alike, err := dst.alreadyPromoted(key, ch, p.Change); alike || err != nil {
		return res, err
	}
	return dst.Change(ctx, key, ch, p.Change)
}

// alreadyPromoted answers a promotion ch of the feature key that would
// change nothing in the environment of s, with Result.Unchanged and no new
// version, once If-Match holds; alike is false when it would change
// something (or the snapshot lacks the feature), for the pipeline to make.
func (s *Service) alreadyPromoted(key string, ch change.Change, opts ChangeOptions) (res Result, alike bool, err error) {
	cur := s.Snapshot().Compiled(key)
	if cur == nil {
		return Result{}, false, nil
	}
	next := cur.Feature().Clone()
	if err := ch.Apply(&next); err != nil || len(environment.Differs(cur.Feature(), next)) > 0 {
		return Result{}, false, nil
	}
	if opts.IfMatch != "" && opts.IfMatch != "*" && opts.IfMatch != cur.Feature().Tag() {
		return Result{}, true, feature.Errorf(feature.EPrecondition, "feature %q is %s in %s, not %s: reload it and decide again", key, cur.Feature().Tag(), s.env, opts.IfMatch)
	}
	f, shares := cur.Feature(), cur.Shares()
	rep := feature.Report{FromVersion: f.Version, ToVersion: f.Version, Method: "exact", Moves: []feature.Move{}, SharesBefore: shares, SharesAfter: shares}
	return Result{Feature: f, Report: rep, Shares: shares, DryRun: opts.DryRun, Unchanged: true}, true, nil
}

// Feature returns the current configuration of the feature key, asking
// the store when the snapshot lacks it (made elsewhere a moment ago).
func (s *Service) Feature(ctx context.Context, key string) (feature.Feature, error) {
	if c := s.Snapshot().Compiled(key); c != nil {
		return c.Feature(), nil
	}
	if err := s.mu.lock(ctx); err != nil {
		return feature.Feature{}, err
	}
	defer s.mu.Unlock()
	c, err := s.reload(ctx, key)
	if err != nil {
		return feature.Feature{}, err
	}
	if c == nil {
		return feature.Feature{}, feature.Errorf(feature.ENotFound, "feature %q does not exist in environment %s", key, s.env)
	}
	return c.Feature(), nil
}

// Placements returns the configuration of the feature key in every
// environment that serves it, by the environments' positions.
func (e *Environments) Placements(key string) ([]environment.Placement, error) {
	var out []environment.Placement
	for _, svc := range e.Services() {
		c := svc.Snapshot().Compiled(key)
		if c == nil {
			continue
		}
		out = append(out, environment.PlacementOf(svc.env, c))
	}
	if len(out) == 0 {
		return nil, feature.NotFound(key)
	}
	return out, nil
}

// Compare returns every feature whose configuration differs between the
// environments from and to, by key.
func (e *Environments) Compare(from, to string) ([]environment.Difference, error) {
	a, err := e.Lookup(from)
	if err != nil {
		return nil, err
	}
	b, err := e.Lookup(to)
	if err != nil {
		return nil, err
	}
	return environment.Compare(from, to, a.Snapshot(), b.Snapshot()), nil
}

// PromoteMany promotes the features keys from p.From to p.To as one batch:
// every one or none. p.Change's MaxChurn bounds each feature's churn and
// maxTotal, when not nil, their sum; an editor's batch is held to the
// target's settings and refused where one of its changes would need an
// approval (a batch is not a change request: promote such a feature
// alone). p.FromVersion is not used: each feature is promoted as its
// source is now, unless p.Versions pins it.
func (e *Environments) PromoteMany(ctx context.Context, keys []string, p PromoteOptions, maxTotal *float64) (environment.BatchPromotion, error) {
	out := environment.BatchPromotion{From: p.From, To: p.To, DryRun: p.Change.DryRun, Features: []environment.PromotedChange{}}
	switch {
	case len(keys) == 0:
		return out, &feature.Error{Code: feature.EInvalid, Field: "features", Message: "name the features to promote"}
	case len(keys) > environment.MaxBatchPromotion:
		return out, &feature.Error{Code: feature.EInvalid, Field: "features", Message: fmt.Sprintf("%d features: a batch promotes at most %d", len(keys), environment.MaxBatchPromotion)}
	case p.From == p.To:
		return out, &feature.Error{Code: feature.EInvalid, Field: "to", Message: "a promotion goes from one environment to another: from and to are both " + p.From}
	}
	if err := validateComment(p.Change.Comment); err != nil {
		return out, err
	}
	if dst, ok := e.Service(p.To); ok {
		if err := dst.checkComment(p.Change.Comment, p.Change.DryRun); err != nil {
			return out, err
		}
	}
	src, err := e.Lookup(p.From)
	if err != nil {
		return out, err
	}
	dst, err := e.Lookup(p.To)
	if err != nil {
		return out, err
	}
	opts := p.Change
	if opts.gate, err = dst.gateFor(ctx, opts); err != nil {
		return out, err
	}
	// The sources first, before the target's lock: a service's lock is
	// never taken while another's is held.
	sources := make([]feature.Feature, len(keys))
	seen := map[string]bool{}
	for i, key := range keys {
		if seen[key] {
			return out, &feature.Error{Code: feature.EInvalid, Field: "features", Message: fmt.Sprintf("feature %q is named twice", key)}
		}
		seen[key] = true
		if sources[i], err = src.Feature(ctx, key); err != nil {
			return out, err
		}
		if pin := p.Versions[key]; pin.From != 0 && sources[i].Version != pin.From {
			return out, feature.Errorf(feature.EPrecondition, "feature %q is at version %d in %s, not %d: review the promotion again; nothing was changed", key, sources[i].Version, p.From, pin.From)
		}
	}
	if err := dst.mu.lock(ctx); err != nil {
		return out, err
	}
	defer dst.mu.Unlock()
	var (
		ws    []BatchWrite
		nexts []*feature.Compiled
	)
	for i, key := range keys {
		ch, err := change.Promotion(p.From, sources[i], p.Include)
		if err != nil {
			return out, err
		}
		cur, err := dst.current(ctx, key, ChangeOptions{})
		if err != nil {
			return out, err
		}
		if pin := p.Versions[key]; pin.To != 0 && cur.Feature().Version != pin.To {
			return out, feature.Errorf(feature.EPrecondition, "feature %q is at version %d in %s, not %d: review the promotion again; nothing was changed", key, cur.Feature().Version, p.To, pin.To)
		}
		res, v, cc, err := dst.prepare(cur, ch, opts)
		if _, approval := err.(*needsApproval); approval || res.Needs == "approval" {
			return out, feature.Errorf(feature.EForbidden, "feature %q needs an approval in %s: a batch is not a change request; promote it alone (POST /api/features/%s/promote), which makes one, or ask an admin; nothing was changed", key, p.To, key)
		}
		if err != nil {
			return out, err
		}
		if len(environment.Differs(cur.Feature(), res.Feature)) == 0 {
			// Alike already: nothing to write.
			out.Features = append(out.Features, environment.PromotedChange{Feature: key, FromVersion: cur.Feature().Version, ToVersion: cur.Feature().Version})
			continue
		}
		out.Features = append(out.Features, environment.PromotedChange{Feature: key, FromVersion: cur.Feature().Version, ToVersion: v.Version, Churn: res.Report.Churn, Report: res.Report})
		out.TotalChurn += res.Report.Churn
		ws = append(ws, BatchWrite{Feature: res.Feature, Version: v})
		nexts = append(nexts, cc)
	}
	if maxTotal != nil && out.TotalChurn > *maxTotal {
		return out, feature.Errorf(feature.EChurn, "the promotion would move %.4f%% of users in all (the sum over its features), more than max_total_churn %.4f%%: nothing was changed", 100*out.TotalChurn, 100**maxTotal)
	}
	if opts.DryRun || len(ws) == 0 {
		return out, nil
	}
	out.Applied = true
	settles, err := opts.Idempotency.Settle(out, dst.now().UTC())
	if err != nil {
		return out, err
	}
	if err := dst.store.ApplyBatch(context.WithoutCancel(ctx), Batch{Features: ws, Settles: settles}); err != nil {
		return environment.BatchPromotion{}, err
	}
	next := dst.Snapshot()
	for i, w := range ws {
		dst.retire(next.Compiled(w.Feature.Key))
		next = next.With(w.Feature.Key, nexts[i])
	}
	dst.snap.Store(next)
	dst.committed()
	return out, nil
}
