package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/document"
	"github.com/rollout/rollout/rollout/feature"
)

// Settings are the organisation-wide rules of who may change what: the
// churn limit of editors and the approvals policy. Admins set them (PUT
// /api/settings); each saved change is a new Version and an audit event of
// kind settings.
type Settings struct {
	// MaxChurn is the largest fraction of users an editor's change may
	// move. A change above it, or any reshuffle, needs an admin, or an
	// approval where RequireApproval covers the feature.
	MaxChurn float64 `json:"max_churn"`
	// RequireApproval names the features whose editors' changes are
	// stored as change requests, to be approved by another person.
	RequireApproval ApprovalPolicy `json:"require_approval"`
	// Version counts saved changes of the settings: 0 for the defaults,
	// never saved.
	Version   int        `json:"version"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
	UpdatedBy string     `json:"updated_by,omitempty"`
}

// ApprovalPolicy says which features need approvals: all of them, or those
// listed.
type ApprovalPolicy struct {
	All      bool     `json:"all"`
	Features []string `json:"features"`
}

// DefaultMaxChurn is the editors' churn limit until an admin sets one.
const DefaultMaxChurn = 0.25

// MaxApprovalFeatures bounds the list of features that need approvals.
const MaxApprovalFeatures = 1000

// DefaultSettings are the settings before any is saved: a churn limit of
// 25 %, no approvals.
func DefaultSettings() Settings {
	return Settings{MaxChurn: DefaultMaxChurn, RequireApproval: ApprovalPolicy{Features: []string{}}}
}

// Covers reports whether the policy requires approvals for feature key.
func (p ApprovalPolicy) Covers(key string) bool {
	return p.All || slices.Contains(p.Features, key)
}

// Validate reports what is wrong with s: a churn limit outside 0..1, too
// many features, a feature key that is not one, a key listed twice.
func (s Settings) Validate() error {
	if err := feature.CheckMaxChurn(s.MaxChurn); err != nil {
		return err
	}
	fs := s.RequireApproval.Features
	if len(fs) > MaxApprovalFeatures {
		return feature.Errorf(feature.EInvalid, "require_approval lists %d features: list at most %d, or set \"all\": true", len(fs), MaxApprovalFeatures)
	}
	seen := make(map[string]bool, len(fs))
	for _, k := range fs {
		if !feature.ValidKey(k) {
			return feature.Errorf(feature.EInvalid, "require_approval.features: %q is not a feature key (1 to 64 of a-z, 0-9, '_', '.', '-')", k)
		}
		if seen[k] {
			return feature.Errorf(feature.EInvalid, "require_approval.features lists %q twice: list it once", k)
		}
		seen[k] = true
	}
	return nil
}

// SettingsSummary says what changed from prev to next, in words:
// "editors' churn limit 25 % → 10 %; approvals: none → checkout".
func SettingsSummary(prev, next Settings) string {
	var parts []string
	if prev.MaxChurn != next.MaxChurn {
		parts = append(parts, fmt.Sprintf("editors' churn limit %s → %s", feature.Percent(prev.MaxChurn), feature.Percent(next.MaxChurn)))
	}
	if a, b := prev.RequireApproval.describe(), next.RequireApproval.describe(); a != b {
		parts = append(parts, fmt.Sprintf("approvals required for %s → %s", a, b))
	}
	if len(parts) == 0 {
		return "settings saved unchanged"
	}
	return strings.Join(parts, "; ")
}

func (p ApprovalPolicy) describe() string {
	switch {
	case p.All:
		return "every feature"
	case len(p.Features) == 0:
		return "no feature"
	}
	fs := slices.Sorted(slices.Values(p.Features))
	if len(fs) > 5 {
		return fmt.Sprintf("%s and %d more", strings.Join(fs[:5], ", "), len(fs)-5)
	}
	return strings.Join(fs, ", ")
}

// SettingsStore keeps the settings.
type SettingsStore interface {
	// Settings returns the saved settings, DefaultSettings when none
	// were ever saved.
	Settings(ctx context.Context) (Settings, error)
	// SaveSettings stores s, whose Version must be one more than the
	// stored one (EPrecondition otherwise: they were changed meanwhile),
	// and records e (kind settings) in the same transaction.
	SaveSettings(ctx context.Context, s Settings, e audit.Event) error
}

// Settings returns the organisation's settings.
func (s *Service) Settings(ctx context.Context) (Settings, error) {
	return s.store.Settings(ctx)
}

// UpdateSettings saves next as the settings, made by actor with comment.
// ifVersion, when > 0, must be the version the admin read (EPrecondition
// otherwise). It returns the saved settings. Errors: EInvalid, EPrecondition,
// the store's.
func (s *Service) UpdateSettings(ctx context.Context, next Settings, ifVersion int, actorName, comment string) (Settings, error) {
	if err := s.checkComment(comment, false); err != nil {
		return Settings{}, err
	}
	if next.RequireApproval.Features == nil {
		next.RequireApproval.Features = []string{}
	}
	if err := next.Validate(); err != nil {
		return Settings{}, err
	}
	prev, err := s.store.Settings(ctx)
	if err != nil {
		return Settings{}, err
	}
	if ifVersion > 0 && ifVersion != prev.Version {
		return Settings{}, feature.Errorf(feature.EPrecondition, "the settings are at version %d, not %d: reload them and decide again", prev.Version, ifVersion)
	}
	now := s.now().UTC()
	name := actor(ChangeOptions{Actor: actorName})
	next.Version, next.UpdatedAt, next.UpdatedBy = prev.Version+1, &now, name
	e := audit.Event{Time: now, Actor: name, Kind: audit.Settings, Summary: SettingsSummary(prev, next), Comment: comment}
	if err := s.store.SaveSettings(ctx, next, e); err != nil {
		return Settings{}, err
	}
	return next, nil
}

// gate is what an editor's change must pass: the settings as they were
// when the change began.
type gate struct {
	settings Settings
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
	spec     ChangeSpec
	summary  string
}

func (*needsApproval) Error() string { return "the change needs an approval" }

// approvalOf is the request that change ch of cur, with result res, makes.
func approvalOf(cur *feature.Compiled, ch Change, res Result) *needsApproval {
	return &needsApproval{res: res, ifMatch: cur.Feature().Tag(), base: cur.Feature().Version,
		segments: append(cur.Feature().Segments(), res.Feature.Segments()...), spec: ch.spec, summary: ch.summary}
}

// check decides an editor's change of cur with report rep: nil lets it
// apply; a *needsApproval makes it a request (approvals cover the
// feature); EForbidden refuses it (above the churn limit or a reshuffle,
// without approvals).
func (g *gate) check(cur *feature.Compiled, ch Change, res Result) error {
	key := cur.Feature().Key
	if g.settings.RequireApproval.Covers(key) {
		if ch.spec.Kind == "" {
			return feature.Errorf(feature.EForbidden, "feature %q needs approvals, and this change cannot be submitted as a request: ask an admin to make it", key)
		}
		return approvalOf(cur, ch, res)
	}
	rep := res.Report
	what := "a reshuffle (a new salt)"
	rehashed := ruleRehash(cur.Feature(), res.Feature)
	switch {
	case ch.spec.Kind == SpecReshuffle:
	case cur.Feature().Salt != res.Feature.Salt:
		what = "this change sets another salt (it goes back across a reshuffle), which"
	case cur.Feature().BucketBy != res.Feature.BucketBy:
		what = fmt.Sprintf("this change of bucket_by (%s → %s) hashes another attribute, which", bucketByWords(cur.Feature().BucketBy), bucketByWords(res.Feature.BucketBy))
	case rehashed != "":
		return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
			"%s: the users it matches are placed in feature %q's ring anew, at random, as a reshuffle places them: editors may not make one; it needs an admin, or approvals on for the feature (an admin sets them in the settings) to submit it as a change request; nothing was changed",
			rehashed, key)}
	}
	switch {
	case ch.spec.Kind == SpecReshuffle || cur.Feature().Salt != res.Feature.Salt || cur.Feature().BucketBy != res.Feature.BucketBy:
		return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
			"%s moves about %s of users of feature %q at random: editors may not make one; it needs an admin, or approvals on for the feature (an admin sets them in the settings) to submit it as a change request; nothing was changed",
			what, feature.Percent(rep.Churn), key)}
	case rep.Churn > g.settings.MaxChurn:
		return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
			"the change would move %s of users of feature %q, more than the editors' limit of %s: it needs an admin, or approvals on for the feature (an admin sets them in the settings) to submit it as a change request; nothing was changed",
			feature.Percent(rep.Churn), key, feature.Percent(g.settings.MaxChurn))}
	}
	if c := unmatchedChurn(cur.Feature(), res.Feature, rep); c > g.settings.MaxChurn {
		return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
			"the change of rules would move %s of the users of feature %q whom no rule with conditions matches (those evaluated without a context, at least), more than the editors' limit of %s: it needs an admin, or approvals on for the feature (an admin sets them in the settings) to submit it as a change request; nothing was changed",
			feature.Percent(c), key, feature.Percent(g.settings.MaxChurn))}
	}
	return nil
}

// ruleRehash says which rule of after hashes its users by another
// attribute than before did, in words ("" for none): a rule serving the
// ring whose bucket_by was added, changed or removed (what it hashes, its
// own bucket_by or else the feature's, differs from what the rule of that
// name hashed when it served the ring, or from what the feature's ring
// hashed when it did not exist or served a bucket), and a rule serving
// the ring by an attribute of its own that is gone (its users fall to the
// rules after it or to the feature's ring, which hash what they hash).
// The feature's own bucket_by is judged apart.
func ruleRehash(before, after feature.Feature) string {
	hashes := func(f feature.Feature, r feature.Rule) string {
		if r.Serve.BucketBy != "" {
			return r.Serve.BucketBy
		}
		return f.BucketBy
	}
	old := make(map[string]feature.Rule, len(before.Rules))
	for _, r := range before.Rules {
		old[r.Name] = r
	}
	kept := make(map[string]bool, len(after.Rules))
	for _, r := range after.Rules {
		kept[r.Name] = true
		if !r.Serve.Ring {
			continue
		}
		was := before.BucketBy
		if o, ok := old[r.Name]; ok && o.Serve.Ring {
			was = hashes(before, o)
		}
		if now := hashes(after, r); now != was {
			return fmt.Sprintf("rule %q serves the ring hashing %s, where its users were hashed by %s", r.Name, bucketByWords(now), bucketByWords(was))
		}
	}
	for _, o := range before.Rules {
		if kept[o.Name] || !o.Serve.Ring || hashes(before, o) == before.BucketBy {
			continue
		}
		return fmt.Sprintf("rule %q, which served the ring hashing %s, is removed (its users fall to the rules after it or to the ring, hashing %s)", o.Name, bucketByWords(hashes(before, o)), bucketByWords(after.BucketBy))
	}
	return ""
}

// serving is what a feature serves the users whom no rule with
// conditions matches: the bucket of its first rule without conditions, or
// a ring hashing an attribute (by; "" the user ID).
type serving struct {
	bucket string
	by     string
	// split is the planned ring of a rule's split, encoded ("": none),
	// and splitRule the rule's name.
	split, splitRule string
}

// fallthroughServing is what f serves users whom no rule with conditions
// matches: its first rule without conditions (which matches everyone), or
// its ring.
func fallthroughServing(f feature.Feature) serving {
	for _, r := range f.Rules {
		if len(r.Conditions) > 0 {
			continue
		}
		if r.Serve.Ring || r.Serve.Split != nil {
			by := r.Serve.BucketBy
			if by == "" {
				by = f.BucketBy
			}
			if r.Serve.Split != nil {
				ring, _ := json.Marshal(r.Serve.SplitRing)
				return serving{by: by, split: string(ring), splitRule: r.Name}
			}
			return serving{by: by}
		}
		return serving{bucket: r.Serve.Bucket}
	}
	return serving{by: f.BucketBy}
}

// unmatchedChurn is the share of the users whom no rule with conditions
// matches (every user evaluated without a context, among others) that a
// change from before to after (report rep) moves, beyond what the ring's
// churn counts: a rule without conditions serving one bucket instead of
// the ring (1 - the bucket's share of the ring), the ring instead of such
// a rule, another bucket, or the ring hashing another attribute (users
// placed anew). The users that rules with conditions match are not
// counted: how many they are depends on the contexts apps send. 0 when
// the feature is disabled before or after (rules then serve nobody) or
// nothing of this changes.
func unmatchedChurn(before, after feature.Feature, rep feature.Report) float64 {
	if !before.Enabled || !after.Enabled {
		return 0
	}
	b, a := fallthroughServing(before), fallthroughServing(after)
	switch {
	case b == a:
		return 0 // the ring's churn, if any, is rep.Churn
	case b.split != "" && a.split != "" && b.by == a.by && b.splitRule == a.splitRule:
		for _, sc := range rep.Splits {
			if sc.Rule == a.splitRule {
				return sc.Churn // exact: one split's ring changed
			}
		}
		return 1
	case b.split != "" || a.split != "":
		// A split instead of the ring or a bucket, or of another split:
		// users are placed anew (a split hashes apart from the ring).
		return 1
	case b.bucket != "" && a.bucket != "":
		return 1
	case b.bucket != "":
		return 1 - rep.SharesAfter[b.bucket]
	case a.bucket != "":
		return 1 - rep.SharesBefore[a.bucket]
	}
	c, _ := feature.IndependentChurn(rep.SharesBefore, rep.SharesAfter) // two rings, two attributes
	return c
}

// checkDocument decides an editor's document plan p: each feature it
// updates must be one approvals do not cover (a document cannot be
// submitted as a request), keep its salt and move at most the editors'
// churn limit; features it creates are not held to it (as a create is
// not). A nil gate passes anything. Errors: EForbidden, naming the
// feature, with its report.
func (g *gate) checkDocument(p document.Plan) error {
	if g == nil {
		return nil
	}
	for _, ch := range p.Changes {
		if ch.Action != document.ActionUpdate {
			continue
		}
		rep := ch.Report
		var before, after feature.Feature
		both := ch.Before() != nil && ch.After() != nil
		if both {
			before, after = ch.Before().Feature(), ch.After().Feature()
		}
		switch {
		case g.settings.RequireApproval.Covers(ch.Feature):
			return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
				"feature %q needs approvals, and a document cannot be submitted as a change request: change it through its routes (which make requests), or ask an admin to apply the document; nothing was changed", ch.Feature)}
		case both && before.Salt != after.Salt:
			return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
				"the document gives feature %q another salt, which moves about %s of its users at random: editors may not; it needs an admin; nothing was changed", ch.Feature, feature.Percent(ch.Churn))}
		case both && before.BucketBy != after.BucketBy:
			return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
				"the document gives feature %q another bucket_by (%s → %s), which moves about %s of its users at random, as a reshuffle does: editors may not; it needs an admin; nothing was changed",
				ch.Feature, bucketByWords(before.BucketBy), bucketByWords(after.BucketBy), feature.Percent(ch.Churn))}
		case both && ruleRehash(before, after) != "":
			return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
				"the document changes what a rule of feature %q hashes: %s; its users are placed anew, at random, as a reshuffle places them: editors may not; it needs an admin; nothing was changed",
				ch.Feature, ruleRehash(before, after))}
		case ch.Churn > g.settings.MaxChurn:
			return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
				"the document would move %s of the users of feature %q, more than the editors' limit of %s: it needs an admin; nothing was changed", feature.Percent(ch.Churn), ch.Feature, feature.Percent(g.settings.MaxChurn))}
		case both && unmatchedChurn(before, after, rep) > g.settings.MaxChurn:
			return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
				"the document's rules would move %s of the users of feature %q whom no rule with conditions matches (those evaluated without a context, at least), more than the editors' limit of %s: it needs an admin; nothing was changed",
				feature.Percent(unmatchedChurn(before, after, rep)), ch.Feature, feature.Percent(g.settings.MaxChurn))}
		}
	}
	return nil
}

// bucketByWords names what a ring hashes: "the user ID" or "attribute org".
func bucketByWords(attr string) string {
	if attr == "" {
		return "the user ID"
	}
	return "attribute " + attr
}

// checkSegment decides an editor's change of segment key, which makes a
// new version of each of features (those whose rules use it) and changes
// what each of archived (archived features whose rules use it) would
// serve when restored: it is refused when approvals cover any of them, as
// a segment's change cannot be submitted as a change request (it changes
// several features at once). The churn limit does not apply: a segment's
// change leaves every ring as it is (the reports' churn is 0) and moves
// the users who start or stop matching it, whom no count of the hash
// space measures. A nil gate passes anything. Errors: EForbidden, naming
// the features.
func (g *gate) checkSegment(key string, features, archived []string) error {
	if g == nil {
		return nil
	}
	var covered, coveredArchived []string
	for _, fk := range features {
		if g.settings.RequireApproval.Covers(fk) {
			covered = append(covered, fk)
		}
	}
	for _, fk := range archived {
		if g.settings.RequireApproval.Covers(fk) {
			coveredArchived = append(coveredArchived, fk)
		}
	}
	switch {
	case len(covered) > 0:
		return feature.Errorf(feature.EForbidden, "changing segment %q makes a new version of feature(s) %s, which need approvals, and a segment's change cannot be submitted as a change request: ask an admin to make it (or an admin turns approvals off for those features); nothing was changed",
			key, strings.Join(covered, ", "))
	case len(coveredArchived) > 0:
		return feature.Errorf(feature.EForbidden, "segment %q is used by archived feature(s) %s, which need approvals: a restore would serve them with the changed segment, and a segment's change cannot be submitted as a change request: ask an admin to make it (or an admin turns approvals off for those features); nothing was changed",
			key, strings.Join(coveredArchived, ", "))
	}
	return nil
}
