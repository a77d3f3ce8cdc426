package settings

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/rollout/rollout/rollout/document"
	"github.com/rollout/rollout/rollout/feature"
)

// What the settings make of an editor's change. Admins, the command line
// and an open API are not bound by them; package rollout decides who is,
// and where approvals cover a feature it files the editor's change as a
// change request instead.

// CheckChange decides an editor's change of the feature key from before
// to after, with report rep (reshuffle: the change is a reshuffle, a new
// salt asked for), where approvals do not cover the feature: nil lets it
// apply; EForbidden, with the report, refuses a change that places users
// anew at random (a new salt, another bucket_by, a rule hashing another
// attribute), one that moves more than MaxChurn of the users, and one
// that moves more than MaxChurn of the users no rule with conditions
// matches.
func (s Settings) CheckChange(key string, before, after feature.Feature, rep feature.Report, reshuffle bool) error {
	what := "a reshuffle (a new salt)"
	rehashed := ruleRehash(before, after)
	switch {
	case reshuffle:
	case before.Salt != after.Salt:
		what = "this change sets another salt (it goes back across a reshuffle), which"
	case before.BucketBy != after.BucketBy:
		what = fmt.Sprintf("this change of bucket_by (%s → %s) hashes another attribute, which", bucketByWords(before.BucketBy), bucketByWords(after.BucketBy))
	case rehashed != "":
		return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
			"%s: the users it matches are placed in feature %q's ring anew, at random, as a reshuffle places them: editors may not make one; it needs an admin, or approvals on for the feature (an admin sets them in the settings) to submit it as a change request; nothing was changed",
			rehashed, key)}
	}
	switch {
	case reshuffle || before.Salt != after.Salt || before.BucketBy != after.BucketBy:
		return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
			"%s moves about %s of users of feature %q at random: editors may not make one; it needs an admin, or approvals on for the feature (an admin sets them in the settings) to submit it as a change request; nothing was changed",
			what, feature.Percent(rep.Churn), key)}
	case rep.Churn > s.MaxChurn:
		return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
			"the change would move %s of users of feature %q, more than the editors' limit of %s: it needs an admin, or approvals on for the feature (an admin sets them in the settings) to submit it as a change request; nothing was changed",
			feature.Percent(rep.Churn), key, feature.Percent(s.MaxChurn))}
	}
	if c := unmatchedChurn(before, after, rep); c > s.MaxChurn {
		return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
			"the change of rules would move %s of the users of feature %q whom no rule with conditions matches (those evaluated without a context, at least), more than the editors' limit of %s: it needs an admin, or approvals on for the feature (an admin sets them in the settings) to submit it as a change request; nothing was changed",
			feature.Percent(c), key, feature.Percent(s.MaxChurn))}
	}
	return nil
}

// CheckDocument decides an editor's document plan p: each feature it
// updates must be one approvals do not cover (a document cannot be
// submitted as a request), keep its salt and move at most the editors'
// churn limit; features it creates are not held to it (as a create is
// not). Errors: EForbidden, naming the
// feature, with its report.
func (s Settings) CheckDocument(p document.Plan) error {
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
		case s.RequireApproval.Covers(ch.Feature):
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
		case ch.Churn > s.MaxChurn:
			return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
				"the document would move %s of the users of feature %q, more than the editors' limit of %s: it needs an admin; nothing was changed", feature.Percent(ch.Churn), ch.Feature, feature.Percent(s.MaxChurn))}
		case both && unmatchedChurn(before, after, rep) > s.MaxChurn:
			return &feature.Error{Code: feature.EForbidden, Report: &rep, Message: fmt.Sprintf(
				"the document's rules would move %s of the users of feature %q whom no rule with conditions matches (those evaluated without a context, at least), more than the editors' limit of %s: it needs an admin; nothing was changed",
				feature.Percent(unmatchedChurn(before, after, rep)), ch.Feature, feature.Percent(s.MaxChurn))}
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

// CheckSegment decides an editor's change of segment key, which makes a
// new version of each of features (those whose rules use it) and changes
// what each of archived (archived features whose rules use it) would
// serve when restored: it is refused when approvals cover any of them, as
// a segment's change cannot be submitted as a change request (it changes
// several features at once). The churn limit does not apply: a segment's
// change leaves every ring as it is (the reports' churn is 0) and moves
// the users who start or stop matching it, whom no count of the hash
// space measures. Errors: EForbidden, naming
// the features.
func (s Settings) CheckSegment(key string, features, archived []string) error {
	var covered, coveredArchived []string
	for _, fk := range features {
		if s.RequireApproval.Covers(fk) {
			covered = append(covered, fk)
		}
	}
	for _, fk := range archived {
		if s.RequireApproval.Covers(fk) {
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
