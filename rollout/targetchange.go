package rollout

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// SetRules replaces the feature's rules with rules, as one version (an
// empty list removes them all).
func SetRules(rules []Rule) Change {
	rules = cloneRules(rules)
	spec := ChangeSpec{Kind: SpecSetRules, Rules: cloneRules(rules)}
	if spec.Rules == nil {
		spec.Rules = []Rule{}
	}
	var summary string
	if len(rules) == 0 {
		summary = "removed the rules"
	} else {
		parts := make([]string, len(rules))
		for i, r := range rules {
			parts[i] = DescribeRule(r)
		}
		summary = abbreviateSummary("set rules: " + strings.Join(parts, "; "))
	}
	return Change{
		spec:    spec,
		summary: summary,
		apply: func(f *Feature) error {
			f.Rules = cloneRules(rules)
			if len(f.Rules) == 0 {
				f.Rules = nil
			}
			return nil
		},
	}
}

// SetBucketBy makes the feature's ring hash the context attribute attr
// instead of the user ID ("": the user ID again). Every user is placed
// anew, as by a reshuffle.
func SetBucketBy(attr string) Change {
	summary := "bucket by " + attr
	if attr == "" {
		summary = "bucket by the user ID"
	}
	return Change{
		spec:    ChangeSpec{Kind: SpecPatch, BucketBy: &attr},
		summary: summary,
		apply: func(f *Feature) error {
			if attr == f.BucketBy {
				return Errorf(EInvalid, "the feature already buckets by %q", attr)
			}
			f.BucketBy = attr
			return nil
		},
	}
}

// PatchBucketBy is Patch and SetBucketBy as one version (see Patch for
// the fields left nil); a change request can store it.
func PatchBucketBy(description *string, enabled *bool, fallback *string, bucketBy string) Change {
	by := SetBucketBy(bucketBy)
	if description == nil && enabled == nil && fallback == nil {
		return by
	}
	ch := Combine(Patch(description, enabled, fallback), by)
	ch.spec = ChangeSpec{Kind: SpecPatch, Description: description, Enabled: enabled, Fallback: fallback, BucketBy: &bucketBy}
	return ch
}

// maxSummary bounds the summary of a rules change.
const maxSummary = 1000

func abbreviateSummary(s string) string {
	if len(s) <= maxSummary {
		return s
	}
	return strings.ToValidUTF8(s[:maxSummary], "") + "…"
}

func cloneRules(rules []Rule) []Rule {
	if rules == nil {
		return nil
	}
	out := make([]Rule, len(rules))
	for i, r := range rules {
		r.Conditions = slices.Clone(r.Conditions)
		for j := range r.Conditions {
			r.Conditions[j].Value = compactJSON(slices.Clone(r.Conditions[j].Value))
		}
		if r.Conditions == nil {
			r.Conditions = []Condition{}
		}
		out[i] = r
	}
	return out
}

// PopulationChange is one population of users whose bucket a change of
// rules can change: those matching When (and no earlier rule), served
// From before and To after. It is a description, not a count: which users
// match depends on the contexts apps send.
type PopulationChange struct {
	When string `json:"when"`
	From string `json:"from"`
	To   string `json:"to"`
	Text string `json:"text"`
	// Estimate bounds how many evaluations a day this population gets
	// (previews only; see PopulationEstimate).
	Estimate *PopulationEstimate `json:"estimate,omitempty"`

	// sources are the outcomes of the rules before the change that served
	// this population: rule names, "" for the ring (and overrides and the
	// default).
	sources []string
}

// PopulationEstimate is an upper bound on the evaluations a day of a
// population that a change of rules moves: the evaluations of the last 24
// hours that the outcomes the population came from served (the removed
// rule's own, the ring's, the rules' that it may take users from). Those
// outcomes served other users too, so the population gets at most that
// many; it counts evaluations, not distinct users.
type PopulationEstimate struct {
	// UpTo is the bound: evaluations in the last 24 hours.
	UpTo int64 `json:"up_to"`
	// From names what was counted: rule names, "" for the ring (with
	// overrides and the default).
	From []string `json:"from"`
	// Text says it in words: "up to 12,400 evaluations a day".
	Text string `json:"text"`
}

// RuleChanges says which populations change bucket when a feature's rules
// go from before to after: a rule added, removed, changed, or moved
// before another. Rules that stay the same behind an unchanged prefix
// change nobody. An empty list: the rules change nobody's bucket.
func RuleChanges(before, after []Rule) []PopulationChange {
	out := []PopulationChange{}
	old := make(map[string]Rule, len(before))
	for _, r := range before {
		old[r.Name] = r
	}
	kept := make(map[string]bool, len(after))
	same := true         // the rules so far are the same, in the same order
	var changed []string // what the rules from the first change on served
	for i, r := range after {
		kept[r.Name] = true
		o, had := old[r.Name]
		if same && i < len(before) && sameRule(before[i], r) {
			continue
		}
		if same {
			for _, b := range before[min(i, len(before)):] {
				changed = append(changed, b.Name)
			}
			changed = append(changed, "")
		}
		same = false
		from, sources := "the ring", []string{""}
		switch {
		case had && sameConditions(o.Conditions, r.Conditions):
			from, sources = describeServe(o.Serve), []string{o.Name}
			if sameServe(o.Serve, r.Serve) {
				if i < len(before) && before[i].Name == r.Name {
					continue // the same rule, after changed rules: see those
				}
				// Moved: users it matches that an earlier rule now takes,
				// or took before, change; said by those rules.
				continue
			}
		case len(before) > 0:
			from, sources = "what the rules before the change served them (or the ring)", changed
		}
		to := describeServe(r.Serve)
		when := describeConditions(r.Conditions)
		out = append(out, PopulationChange{When: when, From: from, To: to, Text: fmt.Sprintf("users matching %s: %s → %s", when, from, to), sources: sources})
	}
	for _, r := range before {
		if kept[r.Name] {
			continue
		}
		when := describeConditions(r.Conditions)
		from, to := describeServe(r.Serve), "the next matching rule, or the ring"
		out = append(out, PopulationChange{When: when, From: from, To: to, Text: fmt.Sprintf("users matching %s: %s → %s", when, from, to), sources: []string{r.Name}})
	}
	return out
}

func sameRule(a, b Rule) bool {
	return a.Name == b.Name && sameServe(a.Serve, b.Serve) && sameConditions(a.Conditions, b.Conditions)
}

func sameServe(a, b Serve) bool { return a == b }

func sameConditions(a, b []Condition) bool {
	return slices.EqualFunc(a, b, func(x, y Condition) bool {
		return x.Attribute == y.Attribute && x.Op == y.Op && string(compactJSON(x.Value)) == string(compactJSON(y.Value))
	})
}

// targetingReport completes rep with what a change of rules or bucket_by
// does: the populations whose bucket changes, and, when bucket_by
// changes, the figures of a reshuffle (every user placed anew).
func targetingReport(rep *Report, before, after *compiled) {
	if before == nil {
		return
	}
	rc := RuleChanges(before.feature.Rules, after.feature.Rules)
	if len(rc) > 0 {
		rep.Rules = rc
	}
	if before.feature.BucketBy != after.feature.BucketBy && rep.Method == MethodExact {
		rep.Method = MethodExpected
		rep.Churn, rep.Moves = independentChurn(rep.SharesBefore, rep.SharesAfter)
		rep.ModuloChurn, _ = independentChurn(uniform(before.servedRing()), uniform(after.servedRing()))
		rep.RangeChurn = rep.Churn
	}
}

// Combine makes one change of several, applied in order, as one version.
func Combine(changes ...Change) Change {
	parts := make([]string, 0, len(changes))
	for _, ch := range changes {
		if ch.summary != "" {
			parts = append(parts, ch.summary)
		}
	}
	return Change{
		summary: strings.Join(parts, ", "),
		apply: func(f *Feature) error {
			for _, ch := range changes {
				if err := ch.apply(f); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

// estimateRules sets the Estimate of each population of rep.Rules, from the
// evaluations of feature cur in the last 24 hours per rule: those stored
// for the hours that began in them (of every version) and those still in
// memory.
func (s *Service) estimateRules(ctx context.Context, key string, rep *Report) error {
	if len(rep.Rules) == 0 {
		return nil
	}
	cur, err := s.known(ctx, key)
	if err != nil {
		return err
	}
	stored, err := s.store.RuleExposures(ctx, cur.feature.Key, s.now().UTC().Add(-24*time.Hour).Truncate(time.Hour).Add(time.Hour))
	if err != nil {
		return err
	}
	byRule := map[string]int64{}
	for _, e := range stored {
		if e.FeatureID == cur.feature.ID && e.Rule != nil {
			byRule[*e.Rule] = AddCounts(byRule[*e.Rule], e.Count)
		}
	}
	for _, c := range s.inMemory(cur) {
		for i := range c.served {
			if n := c.served[i].Load(); n > 0 {
				r := c.outcomes[i].Rule
				byRule[r] = AddCounts(byRule[r], n)
			}
		}
	}
	for i := range rep.Rules {
		p := &rep.Rules[i]
		var n int64
		for _, r := range p.sources {
			n = AddCounts(n, byRule[r])
		}
		p.Estimate = &PopulationEstimate{UpTo: n, From: slices.Clone(p.sources), Text: fmt.Sprintf("up to %s evaluations a day", thousands(n))}
	}
	return nil
}

// thousands writes n with commas between groups of three digits.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}
