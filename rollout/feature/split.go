package feature

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rollout/rollout/ring"
)

// Splits inside rules.
//
// A rule may serve a split of its own population: {"split":{"control":0.5,
// "treatment":0.5}}, shares of the feature's buckets summing to 1, with an
// optional bucket_by. The split is a fine ring of its own (SplitRing: the
// buckets' replica counts, which the server plans, as it plans a feature's
// fine ring, so that each share is within SplitTolerance of its target,
// and a change of one share is nested: 50 → 10 → 50 returns the same
// users). The split's ring places a user by the hash of the feature's salt
// (or, without one, its key), ":split:" and the user ID (or the bucket_by
// attribute's value): independent of the feature's ring, and of the rule's
// name and place, so that renaming or reordering rules, or editing other
// rules, moves no user within a split. Every split of a feature hashes a
// user alike: a user whom a change of conditions takes from one split rule
// to another with the same ring keeps their bucket.

// Limits of splits.
const (
	// MaxSplitRules bounds the rules of a feature that serve a split.
	MaxSplitRules = 10
	// MaxSplitBuckets bounds the buckets of one split.
	MaxSplitBuckets = 10
	// SplitTolerance is how far a split's exact share may miss its target:
	// 0.05 percentage points, as a fine plan (package plan's
	// FineTolerance).
	SplitTolerance = 0.0005
	// splitSumSlack is how far from 1 a split's shares may sum.
	splitSumSlack = 1e-9
)

// ReasonSplit: a rule served a split of its population; the evaluation's
// Rule names it (OFREP: SPLIT, the rule in its metadata).
const ReasonSplit = "split"

// SplitBucket is a bucket of a split's ring: its name and replicas.
type SplitBucket struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
}

// Clone returns a deep copy of s.
func (s Serve) Clone() Serve {
	if s.Split != nil {
		s.Split = maps.Clone(s.Split)
	}
	s.SplitRing = slices.Clone(s.SplitRing)
	return s
}

// sameServe reports whether a and b serve the same: the same bucket, ring,
// bucket_by, split and split ring.
func sameServe(a, b Serve) bool {
	return a.Bucket == b.Bucket && a.Ring == b.Ring && a.BucketBy == b.BucketBy &&
		(a.Split == nil) == (b.Split == nil) && maps.Equal(a.Split, b.Split) && slices.Equal(a.SplitRing, b.SplitRing)
}

// splitPrefix is what a feature's splits hash the user ID (or bucket_by
// value) after.
func splitPrefix(key, salt string) string { return overridePrefix(key, salt) + "split:" }

// SplitRingBuckets returns s as the ring's buckets.
func SplitRingBuckets(s []SplitBucket) []ring.Bucket {
	out := make([]ring.Bucket, len(s))
	for i, b := range s {
		out[i] = ring.Bucket{Name: b.Name, Replicas: b.Replicas}
	}
	return out
}

// validateSplitShares reports what is wrong with the split of r, the
// feature's rule at at, but for its ring: 1 to MaxSplitBuckets of the
// feature's buckets, shares from 0 to 1 summing to 1.
func validateSplitShares(r Rule, at string, buckets map[string]bool) error {
	s := r.Serve
	switch {
	case s.Bucket != "" || s.Ring:
		return invalidAt(at+".serve", "rule %q serves a split and a bucket or the ring: give one", r.Name)
	case len(s.Split) == 0:
		return invalidAt(at+".serve.split", `rule %q: a split names the shares of buckets, summing to 1: {"split":{"control":0.5,"treatment":0.5}}`, r.Name)
	case len(s.Split) > MaxSplitBuckets:
		return invalidAt(at+".serve.split", "rule %q: a split has at most %d buckets, got %d", r.Name, MaxSplitBuckets, len(s.Split))
	}
	sum := 0.0
	for _, name := range slices.Sorted(maps.Keys(s.Split)) {
		share := s.Split[name]
		if !buckets[name] {
			return invalidAt(at+".serve.split", "rule %q splits into bucket %q, which the feature does not have", r.Name, Abbreviate(name))
		}
		if math.IsNaN(share) || share < 0 || share > 1 {
			return invalidAt(at+".serve.split", "rule %q: the share of bucket %q is %v: a share is from 0 to 1", r.Name, name, share)
		}
		sum += share
	}
	if math.Abs(sum-1) > splitSumSlack {
		return invalidAt(at+".serve.split", "rule %q: the split's shares sum to %v; they must sum to 1", r.Name, sum)
	}
	return nil
}

// validateSplitRing reports what is wrong with the planned ring of r's
// split (see validateSplitShares for at).
func validateSplitRing(r Rule, at string) error {
	s := r.Serve
	if len(s.SplitRing) == 0 {
		return invalidAt(at+".serve.split_ring", "rule %q: the split has no planned ring: the server plans it when the rules are saved", r.Name)
	}
	points := 0
	seen := make(map[string]bool, len(s.SplitRing))
	for _, b := range s.SplitRing {
		if _, ok := s.Split[b.Name]; !ok || seen[b.Name] || b.Replicas < 0 || b.Replicas > MaxReplicas {
			return invalidAt(at+".serve.split_ring", "rule %q: the split's ring does not match its split (bucket %q): leave split_ring out, and the server plans it", r.Name, Abbreviate(b.Name))
		}
		seen[b.Name] = true
		points += b.Replicas
	}
	if points == 0 || points > MaxPoints {
		return invalidAt(at+".serve.split_ring", "rule %q: the split's ring has %d points: from 1 to %d", r.Name, points, MaxPoints)
	}
	if !SplitRingFits(s.SplitRing, s.Split) {
		return invalidAt(at+".serve.split_ring", "rule %q: the split's ring misses its shares by more than %v points: leave split_ring out, and the server plans it", r.Name, SplitTolerance*100)
	}
	return nil
}

// SplitRingFits reports whether the exact shares of ring come within
// SplitTolerance of split's.
func SplitRingFits(rb []SplitBucket, split map[string]float64) bool {
	r, err := ring.New(SplitRingBuckets(rb)...)
	if err != nil {
		return false
	}
	shares := r.Shares()
	for name, want := range split {
		if math.Abs(shares[name]-want) > SplitTolerance+1e-12 {
			return false
		}
	}
	for name, got := range shares {
		if _, ok := split[name]; !ok && got > 0 {
			return false
		}
	}
	return true
}

// ValidateSplits reports what is wrong with the splits of f's rules, but
// for their planned rings: what a server checks before it plans them.
func (f Feature) ValidateSplits() error {
	buckets := make(map[string]bool, len(f.Buckets))
	for _, b := range f.Buckets {
		buckets[b.Name] = true
	}
	n := 0
	for i, r := range f.Rules {
		if r.Serve.Split == nil {
			continue
		}
		if n++; n > MaxSplitRules {
			return invalidAt(listField("rules", i)+".serve.split", "a feature has at most %d rules that serve a split", MaxSplitRules)
		}
		if err := validateSplitShares(r, listField("rules", i), buckets); err != nil {
			return err
		}
	}
	return nil
}

// splitRule is the compiled split of a rule.
type splitRule struct {
	ring  *ring.Ring
	index []int // the feature's ring order of each of the split ring's buckets
}

// compileSplit builds the split ring of s, a validated split, for c.
func (c *Compiled) compileSplit(s Serve) *splitRule {
	r, err := ring.New(SplitRingBuckets(s.SplitRing)...)
	if err != nil {
		panic("rollout: ring of a validated split: " + err.Error())
	}
	sr := &splitRule{ring: r}
	for _, b := range r.Buckets() {
		sr.index = append(sr.index, c.index[b.Name])
	}
	return sr
}

// describeSplit says a split in words: "split control 50% / treatment
// 50%", its buckets by name.
func describeSplit(s map[string]float64) string {
	parts := make([]string, 0, len(s))
	for _, name := range slices.Sorted(maps.Keys(s)) {
		parts = append(parts, name+" "+strconv.FormatFloat(s[name]*100, 'g', 6, 64)+"%")
	}
	return "split " + strings.Join(parts, " / ")
}

// SplitChange is what a change does within one rule's split: the exact
// share of the rule's population that moves (Churn) and between which
// buckets (Moves), from the split ring before to the one after.
type SplitChange struct {
	Rule         string             `json:"rule"`
	Churn        float64            `json:"churn"`
	Moves        []Move             `json:"moves"`
	SharesBefore map[string]float64 `json:"shares_before"`
	SharesAfter  map[string]float64 `json:"shares_after"`
	Text         string             `json:"text"`
}

// SplitChanges returns the changes of the splits of the rules from before
// to after: for each rule of after that serves a split, and whose split
// (by the rule's name, or, for a rule renamed, the same split ring) served
// a split before with another ring, the exact moves within the rule's
// population. A split new to the rules, or one whose bucket_by changed,
// places its users anew and is among the populations RuleChanges says.
func SplitChanges(before, after []Rule) []SplitChange {
	var out []SplitChange
	for _, r := range after {
		if r.Serve.Split == nil {
			continue
		}
		i := slices.IndexFunc(before, func(b Rule) bool { return b.Name == r.Name && b.Serve.Split != nil })
		if i < 0 {
			continue // new, or renamed with its ring (then it moves no one)
		}
		o := before[i].Serve
		if slices.Equal(o.SplitRing, r.Serve.SplitRing) || o.BucketBy != r.Serve.BucketBy {
			continue
		}
		rb, err1 := ring.New(SplitRingBuckets(o.SplitRing)...)
		ra, err2 := ring.New(SplitRingBuckets(r.Serve.SplitRing)...)
		if err1 != nil || err2 != nil {
			continue
		}
		c := ring.ChurnBetween(rb, ra)
		sc := SplitChange{Rule: r.Name, Churn: c.Total, Moves: []Move{}, SharesBefore: rb.Shares(), SharesAfter: ra.Shares()}
		var words []string
		for _, m := range c.Moves {
			sc.Moves = append(sc.Moves, Move(m))
			words = append(words, fmt.Sprintf("%s of them %s → %s", percentWords(m.Share), m.From, m.To))
		}
		sc.Text = fmt.Sprintf("rule %s: %s of the users it matches change bucket", r.Name, percentWords(c.Total))
		if len(words) > 0 {
			sc.Text += " (" + strings.Join(words, ", ") + ")"
		}
		out = append(out, sc)
	}
	return out
}

// percentWords says a share as a percentage to 4 decimals: "40.0125%".
func percentWords(share float64) string {
	return strconv.FormatFloat(share*100, 'f', 4, 64) + "%"
}

// ValidateUnplanned is Validate for a configuration whose splits the
// server has yet to plan (a document's, before it is applied): a split
// without its ring is checked but for the ring.
func (f Feature) ValidateUnplanned() error {
	if err := f.ValidateSplits(); err != nil {
		return err
	}
	if slices.ContainsFunc(f.Rules, func(r Rule) bool { return r.Serve.Split != nil && r.Serve.SplitRing == nil }) {
		rules := slices.Clone(f.Rules)
		for i, r := range rules {
			if r.Serve.Split != nil && r.Serve.SplitRing == nil {
				// Checked above; in its place, what validates alike.
				rules[i].Serve = Serve{Bucket: slices.Sorted(maps.Keys(r.Serve.Split))[0], BucketBy: ""}
				if r.Serve.BucketBy != "" && !validAttribute(r.Serve.BucketBy) {
					return invalidAt(listField("rules", i)+".serve.bucket_by", "rule %q: bucket_by %q is not a valid attribute name", r.Name, Abbreviate(r.Serve.BucketBy))
				}
			}
		}
		f.Rules = rules
	}
	return f.Validate()
}
