package feature

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"

	"github.com/rollout/rollout/ring"
)

// How a report's figures were obtained.
const (
	// MethodExact: both versions hash users the same way, and the figures
	// are exact arcs of the hash space.
	MethodExact = "exact"
	// MethodExpected: the salt changed, so every user is hashed anew and
	// lands independently of where they were; the figures are the expected
	// fractions (share before × share after).
	MethodExpected = "expected"
)

// Report is the churn of one change: which fraction of users it moves, from
// where to where, and what naive modulo assignment would have moved. Shares
// are of the users the feature serves; no bucket (a disabled feature without
// fallback) has no share.
type Report struct {
	FromVersion  int                `json:"from_version"`
	ToVersion    int                `json:"to_version"`
	Method       string             `json:"method"`
	Churn        float64            `json:"churn"`
	Moves        []Move             `json:"moves"`
	SharesBefore map[string]float64 `json:"shares_before"`
	SharesAfter  map[string]float64 `json:"shares_after"`
	ModuloChurn  float64            `json:"modulo_churn"`
	// RangeChurn is what range bucketing would move for the same change
	// of shares (see RangeChurn): the baseline of LaunchDarkly, Unleash,
	// GrowthBook, Flipt and flagd, which split a 0–100 % hash into
	// contiguous ranges.
	RangeChurn      float64          `json:"range_churn"`
	OverrideChanges []OverrideChange `json:"override_changes,omitempty"`
	// Rules are the populations a change of the rules moves between
	// buckets, in words (see RuleChanges); the figures above are of the
	// ring alone.
	Rules []PopulationChange `json:"rules,omitempty"`
	// Splits are the exact moves within the populations of rules whose
	// split changed (see SplitChanges).
	Splits []SplitChange `json:"splits,omitempty"`
	// Dependants are the features that require this one (prerequisite.go)
	// whose answers the change may change, with what can be reckoned of
	// how many users (previews and versions of a server, which knows
	// them; see DependantChangeOf).
	Dependants []DependantChange `json:"dependants,omitempty"`
}

// BucketShare is a bucket's share of users, in a list that keeps the
// buckets' order.
type BucketShare struct {
	Bucket string
	Share  float64
}

// RangeChurn returns the fraction of users that range bucketing moves when
// the shares change from before to after: each list's buckets, in their
// order, take contiguous ranges of the hash space from 0 (the first bucket
// [0, s1), the next [s1, s1+s2), …), and a user at position h stays when
// the same bucket's ranges hold h before and after. It depends on the
// share lists alone, and is computed exactly from them (rational
// arithmetic on the float64 shares, converted once). A list with no
// bucket serves no one: from or to it everyone moves (0 when both are
// empty). Thirds to quarters (A/B/C → A/B/C/D) moves 1/2.
func RangeChurn(before, after []BucketShare) float64 {
	switch {
	case len(before) == 0 && len(after) == 0:
		return 0
	case len(before) == 0 || len(after) == 0:
		return 1
	}
	type span struct{ lo, hi *big.Rat }
	ranges := func(list []BucketShare) (map[string]span, *big.Rat) {
		out := make(map[string]span, len(list))
		at := new(big.Rat)
		for _, b := range list {
			lo := new(big.Rat).Set(at)
			at.Add(at, new(big.Rat).SetFloat64(b.Share))
			out[b.Bucket] = span{lo, new(big.Rat).Set(at)}
		}
		return out, at
	}
	rb, totalB := ranges(before)
	ra, totalA := ranges(after)
	stay := new(big.Rat)
	for name, a := range ra {
		b, ok := rb[name]
		if !ok {
			continue
		}
		lo, hi := a.lo, a.hi
		if b.lo.Cmp(lo) > 0 {
			lo = b.lo
		}
		if b.hi.Cmp(hi) < 0 {
			hi = b.hi
		}
		if hi.Cmp(lo) > 0 {
			stay.Add(stay, new(big.Rat).Sub(hi, lo))
		}
	}
	// The shares sum to 1 up to rounding: measure against the larger sum.
	whole := totalB
	if totalA.Cmp(whole) > 0 {
		whole = totalA
	}
	moved, _ := new(big.Rat).Quo(new(big.Rat).Sub(whole, stay), whole).Float64()
	return max(0, moved)
}

// orderedShares returns the shares of f's buckets in f's order, as a
// version serves them: shares holds them by name (the served ring's).
func orderedShares(f Feature, shares map[string]float64) []BucketShare {
	out := make([]BucketShare, 0, len(shares))
	for _, b := range f.Buckets {
		if s, ok := shares[b.Name]; ok {
			out = append(out, BucketShare{Bucket: b.Name, Share: s})
		}
	}
	return out
}

// Move is a fraction of users that change bucket. From or To is "" for no
// bucket, which JSON shows as null.
type Move struct {
	From  string  `json:"-"`
	To    string  `json:"-"`
	Share float64 `json:"-"`
}

type moveJSON struct {
	From  *string `json:"from"`
	To    *string `json:"to"`
	Share float64 `json:"share"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// MarshalJSON shows no bucket as null.
func (m Move) MarshalJSON() ([]byte, error) {
	return json.Marshal(moveJSON{From: nullable(m.From), To: nullable(m.To), Share: m.Share})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (m *Move) UnmarshalJSON(data []byte) error {
	var j moveJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*m = Move{Share: j.Share}
	if j.From != nil {
		m.From = *j.From
	}
	if j.To != nil {
		m.To = *j.To
	}
	return nil
}

// OverrideChange is one overridden user whose bucket a change moves. These
// users are a countable few, outside the fractions of the hash space.
type OverrideChange struct {
	User string  `json:"user"`
	From *string `json:"from"`
	To   *string `json:"to"`
}

// newReport returns the churn report of the change from before (nil: the
// feature's creation, every user moving from no bucket) to after, over
// compiled features, whose rings are built already.
func newReport(before, after *Compiled) Report {
	rb, ra := &ring.Ring{}, after.ServedRing()
	rep := Report{ToVersion: after.feature.Version, Moves: []Move{}}
	if before != nil {
		rb, rep.FromVersion = before.ServedRing(), before.feature.Version
	}
	rep.SharesBefore, rep.SharesAfter = rb.Shares(), ra.Shares()
	if before == nil || before.feature.Salt == after.feature.Salt {
		rep.Method = MethodExact
		c := ring.ChurnBetween(rb, ra)
		rep.Churn = c.Total
		for _, m := range c.Moves {
			rep.Moves = append(rep.Moves, Move(m))
		}
		rep.ModuloChurn = ring.ModuloChurn(rb, ra)
		var sharesBefore []BucketShare
		if before != nil {
			sharesBefore = orderedShares(before.feature, rep.SharesBefore)
		}
		rep.RangeChurn = RangeChurn(sharesBefore, orderedShares(after.feature, rep.SharesAfter))
	} else {
		rep.Method = MethodExpected
		rep.Churn, rep.Moves = IndependentChurn(rep.SharesBefore, rep.SharesAfter)
		rep.ModuloChurn, _ = IndependentChurn(uniform(rb), uniform(ra))
		rep.RangeChurn = rep.Churn // a new salt hashes every user anew, ranges or not
	}
	rep.OverrideChanges = overrideChanges(before, after)
	targetingReport(&rep, before, after)
	return rep
}

// IndependentChurn is the expected churn, and its moves, when each user
// lands in after independently of where they were in before (a new salt,
// or a ring by another attribute): shares before × shares after.
func IndependentChurn(before, after map[string]float64) (float64, []Move) {
	withNone := func(m map[string]float64) map[string]float64 {
		if len(m) == 0 {
			return map[string]float64{"": 1}
		}
		return m
	}
	before, after = withNone(before), withNone(after)
	var total float64
	moves := []Move{}
	for _, from := range slices.Sorted(maps.Keys(before)) {
		for _, to := range slices.Sorted(maps.Keys(after)) {
			if share := before[from] * after[to]; from != to && share > 0 {
				total += share
				moves = append(moves, Move{From: from, To: to, Share: share})
			}
		}
	}
	slices.SortStableFunc(moves, func(x, y Move) int { return cmp.Compare(y.Share, x.Share) })
	return total, moves
}

// uniform gives each bucket of r an equal share, as modulo assignment does.
func uniform(r *ring.Ring) map[string]float64 {
	out := map[string]float64{}
	for _, b := range r.Buckets() {
		out[b.Name] = 1 / float64(len(r.Buckets()))
	}
	return out
}

func overrideChanges(before, after *Compiled) []OverrideChange {
	var prior map[string]string
	if before != nil {
		prior = before.feature.Overrides
	}
	users := slices.Sorted(maps.Keys(prior))
	for u := range after.feature.Overrides {
		if _, ok := prior[u]; !ok {
			users = append(users, u)
		}
	}
	if len(users) == 0 {
		return nil
	}
	slices.Sort(users)
	var out []OverrideChange
	for _, u := range users {
		from, to := "", after.peek(u).Bucket
		if before != nil {
			from = before.peek(u).Bucket
		}
		if from != to {
			out = append(out, OverrideChange{User: u, From: nullable(from), To: nullable(to)})
		}
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
	// Added and Removed, for a change of a user list the rules use, count
	// the users that enter and leave the list: exactly the users whose
	// in_segment changes.
	Added   int `json:"added,omitempty"`
	Removed int `json:"removed,omitempty"`

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
//
// A rule renamed, its conditions and serve the same, is the rule it was:
// a rename, or a rename and a move, changes nobody (see renamed).
func RuleChanges(before, after []Rule) []PopulationChange {
	after = renamed(before, after)
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
		if same && i < len(before) && SameRule(before[i], r) {
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
		case had && SameConditions(o.Conditions, r.Conditions):
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
		when := DescribeConditions(r.Conditions)
		out = append(out, PopulationChange{When: when, From: from, To: to, Text: fmt.Sprintf("users matching %s: %s → %s", when, from, to), sources: sources})
	}
	for _, r := range before {
		if kept[r.Name] {
			continue
		}
		when := DescribeConditions(r.Conditions)
		from, to := describeServe(r.Serve), "the next matching rule, or the ring"
		out = append(out, PopulationChange{When: when, From: from, To: to, Text: fmt.Sprintf("users matching %s: %s → %s", when, from, to), sources: []string{r.Name}})
	}
	return out
}

// renamed returns after with each rule whose name before lacks, and whose
// conditions and serve are those of a rule of before whose name after
// lacks, under that rule's name: the same rule renamed matches the same
// users and serves them the same. after is not modified.
func renamed(before, after []Rule) []Rule {
	inBefore := make(map[string]bool, len(before))
	for _, r := range before {
		inBefore[r.Name] = true
	}
	inAfter := make(map[string]bool, len(after))
	for _, r := range after {
		inAfter[r.Name] = true
	}
	var out []Rule
	used := make(map[int]bool)
	for i, r := range after {
		if inBefore[r.Name] {
			continue
		}
		for j, b := range before {
			if used[j] || inAfter[b.Name] || !sameServe(b.Serve, r.Serve) || !SameConditions(b.Conditions, r.Conditions) {
				continue
			}
			if out == nil {
				out = slices.Clone(after)
			}
			out[i].Name, used[j] = b.Name, true
			break
		}
	}
	if out == nil {
		return after
	}
	return out
}

// SameRule reports whether a and b are the same rule: the same name,
// conditions (see SameConditions) and serve.
func SameRule(a, b Rule) bool {
	return a.Name == b.Name && sameServe(a.Serve, b.Serve) && SameConditions(a.Conditions, b.Conditions)
}

// SameConditions reports whether a and b are the same conditions in the
// same order, their values compared as compact JSON.
func SameConditions(a, b []Condition) bool {
	return slices.EqualFunc(a, b, func(x, y Condition) bool {
		return x.Attribute == y.Attribute && x.Op == y.Op && string(CompactJSON(x.Value)) == string(CompactJSON(y.Value)) &&
			x.IgnoreCase == y.IgnoreCase && (x.Any == nil) == (y.Any == nil) && SameConditions(x.Any, y.Any)
	})
}

// targetingReport completes rep with what a change of rules or bucket_by
// does: the populations whose bucket changes, and, when bucket_by
// changes, the figures of a reshuffle (every user placed anew).
func targetingReport(rep *Report, before, after *Compiled) {
	if before == nil {
		return
	}
	rc := RuleChanges(before.feature.Rules, after.feature.Rules)
	if len(rc) > 0 {
		rep.Rules = rc
	}
	rep.Splits = SplitChanges(before.feature.Rules, after.feature.Rules)
	if before.feature.BucketBy != after.feature.BucketBy && rep.Method == MethodExact {
		rep.Method = MethodExpected
		rep.Churn, rep.Moves = IndependentChurn(rep.SharesBefore, rep.SharesAfter)
		rep.ModuloChurn, _ = IndependentChurn(uniform(before.ServedRing()), uniform(after.ServedRing()))
		rep.RangeChurn = rep.Churn
	}
}

// Sources names the outcomes of the rules before the change that served
// p: rule names, "" for the ring (with overrides and the default). The
// slice is the caller's.
func (p PopulationChange) Sources() []string { return slices.Clone(p.sources) }

// Percent writes a fraction of users as a percentage with up to two
// decimals: 0.25 as "25 %", 1/3 as "33.33 %".
func Percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*10000)/100, 'f', -1, 64) + " %"
}
