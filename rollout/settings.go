package rollout

import (
	"context"
	"fmt"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/document"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/request"
	"github.com/rollout/rollout/rollout/settings"
)

// SettingsStore keeps the settings.
type SettingsStore interface {
	// Settings returns the saved settings, settings.Default when none
	// were ever saved.
	Settings(ctx context.Context) (settings.Settings, error)
	// SaveSettings stores s, whose Version must be one more than the
	// stored one (EPrecondition otherwise: they were changed meanwhile),
	// and records e (kind settings) in the same transaction.
	SaveSettings(ctx context.Context, s settings.Settings, e audit.Event) error
}

// Settings returns the organisation's settings.
func (s *Service) Settings(ctx context.Context) (settings.Settings, error) {
	return s.store.Settings(ctx)
}

// UpdateSettings saves next as the settings, made by actor with comment.
// ifVersion, when > 0, must be the version the admin read (EPrecondition
// otherwise). It returns the saved settings. Errors: EInvalid, EPrecondition,
// the store's.
func (s *Service) UpdateSettings(ctx context.Context, next settings.Settings, ifVersion int, actorName, comment string) (settings.Settings, error) {
	if err := s.checkComment(comment, false); err != nil {
		return settings.Settings{}, err
	}
	if next.RequireApproval.Features == nil {
		next.RequireApproval.Features = []string{}
	}
	if err := next.Validate(); err != nil {
		return settings.Settings{}, err
	}
	prev, err := s.store.Settings(ctx)
	if err != nil {
		return settings.Settings{}, err
	}
	if ifVersion > 0 && ifVersion != prev.Version {
		return settings.Settings{}, feature.Errorf(feature.EPrecondition, "the settings are at version %d, not %d: reload them and decide again", prev.Version, ifVersion)
	}
	now := s.now().UTC()
	name := actor(ChangeOptions{Actor: actorName})
	next.Version, next.UpdatedAt, next.UpdatedBy = prev.Version+1, &now, name
	e := audit.Event{Time: now, Actor: name, Kind: audit.Settings, Summary: settings.Summary(prev, next), Comment: comment}
	if err := s.store.SaveSettings(ctx, next, e); err != nil {
		return settings.Settings{}, err
	}
	return next, nil
}

// gate is what an editor's change must pass: the settings as they were
// when the change began.
type gate struct {
	settings settings.Settings
}

// gateFor returns the gate of a change made with opts: nil for those not
// bound by the settings (admins, the command line, an open API, applied
// approvals).
func (s *Service) gateFor(ctx context.Context, opts ChangeOptions) (*gate, error) {
	if opts.Role != auth.RoleEditor || opts.request != nil {
		return nil, nil
	}
	st, err := s.store.Settings(ctx)
	if err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	if s.envs.protected(s.env) {
		// A protected environment: every editor's change is a request.
		st.RequireApproval.All = true
	}
	return &gate{settings: st}, nil
}

// covers reports whether approvals cover the feature key for the change
// g gates: false for a nil gate (a change not bound by the settings).
func (g *gate) covers(key string) bool {
	return g != nil && g.settings.RequireApproval.Covers(key)
}

// needsApproval is returned by check when the change is to become a
// change request rather than apply: its preview res, made at version
// base (tag ifMatch) with the segments named.
type needsApproval struct {
	res      Result
	ifMatch  string
	base     int
	segments []string
	spec     request.Spec
	summary  string
}

func (*needsApproval) Error() string { return "the change needs an approval" }

// approvalOf is the request that change ch of cur, with result res, makes.
func approvalOf(cur *feature.Compiled, ch change.Change, res Result) *needsApproval {
	return &needsApproval{res: res, ifMatch: cur.Feature().Tag(), base: cur.Feature().Version,
		segments: append(cur.Feature().Segments(), res.Feature.Segments()...), spec: ch.Spec(), summary: ch.Summary()}
}

// check decides an editor's change ch of cur, with result res: nil lets
// it apply; a *needsApproval makes it a request (approvals cover the
// feature); EForbidden refuses it (see settings.Settings.CheckChange).
func (g *gate) check(cur *feature.Compiled, ch change.Change, res Result) error {
	key := cur.Feature().Key
	if g.settings.RequireApproval.Covers(key) {
		if ch.Spec().Kind == "" {
			return feature.Errorf(feature.EForbidden, "feature %q needs approvals, and this change cannot be submitted as a request: ask an admin to make it", key)
		}
		return approvalOf(cur, ch, res)
	}
	return g.settings.CheckChange(key, cur.Feature(), res.Feature, res.Report, ch.Spec().Kind == request.SpecReshuffle)
}

// checkDocument decides an editor's document plan p
// (settings.Settings.CheckDocument); a nil gate passes anything.
func (g *gate) checkDocument(p document.Plan) error {
	if g == nil {
		return nil
	}
	return g.settings.CheckDocument(p)
}

// checkSegment decides an editor's change of segment key, used by
// features and by archived ones (settings.Settings.CheckSegment); a nil
// gate passes anything.
func (g *gate) checkSegment(key string, features, archived []string) error {
	if g == nil {
		return nil
	}
	return g.settings.CheckSegment(key, features, archived)
}
