package feature

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rollout/rollout/ring"
)

// Prerequisites: a feature may require other features to serve the user
// (the same user ID and context) one of some buckets. When a prerequisite
// serves none of them, the feature serves its fallback (or no bucket)
// with ReasonPrerequisiteFailed, naming the prerequisite; prerequisites
// are tested in order, after the kill switch and before overrides and
// rules, as LaunchDarkly's are. A prerequisite's own evaluation is a peek:
// it is not counted among the prerequisite's evaluations (the app was not
// served it), while the dependant's evaluation is counted as any other.
//
// A feature has at most MaxPrerequisites of them; chains of prerequisites
// are at most MaxPrerequisiteDepth links long, never loop, and one
// evaluation tests at most MaxPrerequisiteEvaluations prerequisites in
// all (CheckPrerequisites, which the server runs on each change). A
// snapshot evaluates whatever it holds within those bounds: a
// prerequisite past them, or one the snapshot lacks, fails.

// Limits of prerequisites.
const (
	MaxPrerequisites           = 10 // prerequisites of one feature
	MaxPrerequisiteDepth       = 5  // links in a chain of prerequisites
	MaxPrerequisiteEvaluations = 50 // prerequisites one evaluation tests, through chains
)

// ReasonPrerequisiteFailed: a prerequisite served the user none of the
// buckets the feature requires of it; the evaluation's Prerequisite names
// it.
const ReasonPrerequisiteFailed = "prerequisite_failed"

// EPrerequisites is the code of a change whose prerequisites do not fit
// with the other features: one unknown, a bucket it lacks, a loop, a chain
// over MaxPrerequisiteDepth, an evaluation testing more than
// MaxPrerequisiteEvaluations. The API answers it 400.
const EPrerequisites = "invalid_prerequisites"

// Prerequisite is one feature that must serve the user one of Buckets.
type Prerequisite struct {
	Feature string   `json:"feature"`
	Buckets []string `json:"buckets"`
}

// ClonePrerequisites returns a deep copy of ps (nil for none).
func ClonePrerequisites(ps []Prerequisite) []Prerequisite {
	if len(ps) == 0 {
		return nil
	}
	out := make([]Prerequisite, len(ps))
	for i, p := range ps {
		out[i] = Prerequisite{Feature: p.Feature, Buckets: slices.Clone(p.Buckets)}
	}
	return out
}

// SamePrerequisites reports whether a and b are the same prerequisites in
// the same order.
func SamePrerequisites(a, b []Prerequisite) bool {
	return slices.EqualFunc(a, b, func(x, y Prerequisite) bool {
		return x.Feature == y.Feature && slices.Equal(x.Buckets, y.Buckets)
	})
}

// DescribePrerequisites says ps in words: "new-api serves on; beta serves
// a or b".
func DescribePrerequisites(ps []Prerequisite) string {
	if len(ps) == 0 {
		return "no prerequisites"
	}
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.Feature + " serves " + strings.Join(p.Buckets, " or ")
	}
	return strings.Join(parts, "; ")
}

// validatePrerequisites reports what is wrong with the form of f's
// prerequisites (whether they fit the other features is
// CheckPrerequisites').
func validatePrerequisites(f *Feature) error {
	if len(f.Prerequisites) > MaxPrerequisites {
		return invalidAt("prerequisites", "a feature has at most %d prerequisites, got %d", MaxPrerequisites, len(f.Prerequisites))
	}
	seen := make(map[string]bool, len(f.Prerequisites))
	for i, p := range f.Prerequisites {
		at := listField("prerequisites", i)
		switch {
		case !ValidKey(p.Feature):
			return invalidAt(at+".feature", "prerequisite %q is not a feature key", Abbreviate(p.Feature))
		case p.Feature == f.Key:
			return invalidAt(at+".feature", "feature %q cannot require itself", f.Key)
		case seen[p.Feature]:
			return invalidAt(at+".feature", "prerequisite %q appears twice: list its buckets once", p.Feature)
		case len(p.Buckets) == 0:
			return invalidAt(at+".buckets", "prerequisite %q lists no bucket: give the buckets it must serve, e.g. [\"on\"]", p.Feature)
		case len(p.Buckets) > MaxBuckets:
			return invalidAt(at+".buckets", "prerequisite %q lists %d buckets; at most %d", p.Feature, len(p.Buckets), MaxBuckets)
		}
		seen[p.Feature] = true
		names := make(map[string]bool, len(p.Buckets))
		for j, b := range p.Buckets {
			if !ValidBucketName(b) {
				return invalidAt(listField(at+".buckets", j), "bucket name %q is invalid", Abbreviate(b))
			}
			if names[b] {
				return invalidAt(listField(at+".buckets", j), "bucket %q appears twice", b)
			}
			names[b] = true
		}
	}
	return nil
}

// CheckPrerequisites reports, as an EPrerequisites *Error, whether f's
// prerequisites fit the other features, which lookup finds by key (f's
// own key finds f): each exists and has the buckets required of it, no
// chain of prerequisites through f loops or is longer than
// MaxPrerequisiteDepth links, and no evaluation of f, or of a feature
// that requires it, tests more than MaxPrerequisiteEvaluations
// prerequisites. keys are every feature's key, for the chains above f.
func CheckPrerequisites(f Feature, keys []string, lookup func(string) (Feature, bool)) error {
	get := func(k string) (Feature, bool) {
		if k == f.Key {
			return f, true
		}
		return lookup(k)
	}
	for i, p := range f.Prerequisites {
		at := listField("prerequisites", i)
		pf, ok := get(p.Feature)
		if !ok {
			return prereqErr(at+".feature", "feature %q does not exist: a prerequisite must be a feature of this environment", p.Feature)
		}
		for j, b := range p.Buckets {
			if _, ok := pf.Bucket(b); !ok {
				return prereqErr(listField(at+".buckets", j), "feature %q has no bucket %q", p.Feature, b)
			}
		}
	}
	// Below f: loops and the longest chain down, by a depth-first walk.
	const (
		visiting = -1
		unknown  = 0
	)
	depth := map[string]int{} // links below a feature, +1; visiting while walked
	tests := map[string]int{} // prerequisites one evaluation of it tests
	var walk func(k string, path []string) error
	walk = func(k string, path []string) error {
		switch depth[k] {
		case visiting:
			loop := append(path[slices.Index(path, k):], k)
			return prereqErr("prerequisites", "the prerequisites loop: %s; a feature cannot require itself, even through others", strings.Join(loop, " → "))
		case unknown:
		default:
			return nil
		}
		depth[k] = visiting
		kf, _ := get(k)
		d, n := 0, 0
		for _, p := range kf.Prerequisites {
			if _, ok := get(p.Feature); !ok {
				n++
				continue // fails at evaluation: a chain ends there
			}
			if err := walk(p.Feature, append(path, k)); err != nil {
				return err
			}
			d = max(d, depth[p.Feature])
			n = min(n+1+tests[p.Feature], MaxPrerequisiteEvaluations+1)
		}
		depth[k], tests[k] = d+1, n
		return nil
	}
	if err := walk(f.Key, nil); err != nil {
		return err
	}
	// Above f: the features that require it, through chains; each chain
	// through f is those above plus those below.
	requires := map[string][]string{} // prerequisite → the features requiring it
	for _, k := range keys {
		if k == f.Key {
			continue
		}
		if kf, ok := lookup(k); ok {
			for _, p := range kf.Prerequisites {
				requires[p.Feature] = append(requires[p.Feature], k)
			}
		}
	}
	// up is the longest chain of links from a feature above down to f.
	up := map[string]int{}
	var climb func(k string) int
	climb = func(k string) int {
		if n, ok := up[k]; ok {
			return max(n, 0)
		}
		up[k] = -1 // being climbed: a loop stored before this check ends here
		n := 0
		for _, r := range requires[k] {
			if r != f.Key {
				n = max(n, climb(r)+1)
			}
		}
		up[k] = n
		return n
	}
	longest, top := depth[f.Key]-1+climb(f.Key), f.Key
	for i := 0; up[top] > 0 && i <= len(up); i++ { // the top of the longest chain above f
		for _, r := range requires[top] {
			if r != f.Key && up[r]+1 == up[top] {
				top = r
				break
			}
		}
	}
	if longest > MaxPrerequisiteDepth {
		return prereqErr("prerequisites", "a chain of prerequisites from %q through %q is %d links long; at most %d: require features directly rather than through chains", top, f.Key, longest, MaxPrerequisiteDepth)
	}
	for k := range up {
		if k == f.Key {
			continue
		}
		// An evaluation of a feature above f tests f's prerequisites
		// again: count its tests with f's new ones.
		if n := countTests(k, get, 0); n > MaxPrerequisiteEvaluations {
			return prereqErr("prerequisites", "an evaluation of feature %q would test %d prerequisites through its chains; at most %d", k, n, MaxPrerequisiteEvaluations)
		}
	}
	if n := tests[f.Key]; n > MaxPrerequisiteEvaluations {
		return prereqErr("prerequisites", "an evaluation of feature %q would test more than %d prerequisites through its chains", f.Key, MaxPrerequisiteEvaluations)
	}
	return nil
}

// countTests counts the prerequisites an evaluation of k tests, up to
// MaxPrerequisiteEvaluations+1, the chains being known not to loop.
func countTests(k string, get func(string) (Feature, bool), depth int) int {
	kf, ok := get(k)
	if !ok || depth > MaxPrerequisiteDepth {
		return 0
	}
	n := 0
	for _, p := range kf.Prerequisites {
		n += 1 + countTests(p.Feature, get, depth+1)
		if n > MaxPrerequisiteEvaluations {
			break
		}
	}
	return n
}

func prereqErr(field, format string, args ...any) *Error {
	return (&Error{Code: EPrerequisites, Message: fmt.Sprintf(format, args...)}).Within(field)
}

// compiledPrereq is a Prerequisite ready for evaluation.
type compiledPrereq struct {
	key     string
	buckets []string
}

// compilePrerequisites adds to c, after its targeting, an outcome per
// prerequisite: what c serves when that prerequisite fails.
func (c *Compiled) compilePrerequisites() {
	ps := c.feature.Prerequisites
	if len(ps) == 0 {
		return
	}
	c.prereqs = make([]compiledPrereq, len(ps))
	c.prereqBase = len(c.outcomes)
	all := make([]Outcome, len(c.outcomes)+len(ps))
	for i := range c.outcomes {
		copyOutcome(&all[i], &c.outcomes[i])
	}
	n := len(c.names)
	for i, p := range ps {
		c.prereqs[i] = compiledPrereq{key: p.Feature, buckets: p.Buckets}
		o := &all[c.prereqBase+i]
		o.Feature, o.Version, o.Reason, o.Prerequisite, o.bucket = c.feature.Key, c.feature.Version, ReasonPrerequisiteFailed, p.Feature, n
		if c.fallback >= 0 {
			o.bucket, o.Bucket, o.Value = c.fallback, c.names[c.fallback], c.values[c.fallback]
		}
	}
	c.outcomes = all
	if c.feature.Enabled {
		c.static = false
	}
}

// Prerequisites returns the keys of the features c requires, in order.
func (c *Compiled) Prerequisites() []string {
	out := make([]string, len(c.prereqs))
	for i, p := range c.prereqs {
		out[i] = p.key
	}
	return out
}

// assign returns the index in c's outcomes of what c serves user in ctx,
// its prerequisites evaluated in s: depth is how many links above c the
// evaluation began, budget how many more prerequisites it may test.
func (s *Snapshot) assign(c *Compiled, user string, ctx Context, depth int, budget *int) int {
	if c.prereqs != nil && c.feature.Enabled {
		if i := s.failedPrerequisite(c, user, ctx, depth, budget); i >= 0 {
			return i
		}
	}
	return c.assignContext(user, ctx)
}

// failedPrerequisite returns the outcome of c's first prerequisite that
// serves user none of its buckets, or -1 when all of them do. A
// prerequisite the snapshot lacks, or past the limits of depth and
// budget, fails.
func (s *Snapshot) failedPrerequisite(c *Compiled, user string, ctx Context, depth int, budget *int) int {
	for i := range c.prereqs {
		p := &c.prereqs[i]
		*budget--
		pc := s.features[p.key]
		if pc == nil || depth >= MaxPrerequisiteDepth || *budget < 0 {
			return c.prereqBase + i
		}
		got := pc.outcomes[s.assign(pc, user, ctx, depth+1, budget)].Bucket
		if got == "" || !slices.Contains(p.buckets, got) {
			return c.prereqBase + i
		}
	}
	return -1
}

// serve returns the outcome c serves user in ctx, its prerequisites
// evaluated in s, and counts it. A feature without prerequisites costs
// what Compiled.serveContext does.
func (s *Snapshot) serve(c *Compiled, user string, ctx Context) *Outcome {
	if c.prereqs == nil {
		return c.serveContext(user, ctx)
	}
	budget := MaxPrerequisiteEvaluations
	i := s.assign(c, user, ctx, 0, &budget)
	c.count(i, user)
	return &c.outcomes[i]
}

// peek is serve, not counted.
func (s *Snapshot) peek(c *Compiled, user string, ctx Context) Evaluation {
	budget := MaxPrerequisiteEvaluations
	return c.outcomes[s.assign(c, user, ctx, 0, &budget)].Evaluation(user)
}

// prereqCostly reports whether an evaluation of c's prerequisites may be
// costly: one of them, through chains, is.
func (s *Snapshot) prereqCostly(c *Compiled, depth int) bool {
	if depth > MaxPrerequisiteDepth {
		return false
	}
	for _, p := range c.prereqs {
		if pc := s.features[p.key]; pc != nil && (pc.costly() || s.prereqCostly(pc, depth+1)) {
			return true
		}
	}
	return false
}

// Dependants returns the keys of the features whose prerequisites name
// key, sorted.
func (s *Snapshot) Dependants(key string) []string {
	var out []string
	for _, k := range s.keys {
		for _, p := range s.features[k].prereqs {
			if p.key == key {
				out = append(out, k)
				break
			}
		}
	}
	return out
}

// DependantChange is what a change of a feature does to one feature that
// requires it (a dependant): the users whose prerequisite result flips,
// passing where it failed or failing where it passed, get another answer
// from the dependant unless it serves them its fallback either way.
type DependantChange struct {
	Feature string `json:"feature"`
	// Through names the feature the dependant requires directly, for a
	// dependant through a chain ("": it requires the changed feature).
	Through string   `json:"through,omitempty"`
	Buckets []string `json:"buckets,omitempty"` // what it requires of the changed feature
	// Share is the fraction of users whose prerequisite result flips,
	// when it can be reckoned: exactly (Exact) on the changed feature's
	// ring when neither version has rules or bucket_by and the salt
	// stays; as the expected fraction when the salt changes; nil when
	// rules decide (which users match depends on the contexts apps send).
	Share *float64 `json:"share,omitempty"`
	Exact bool     `json:"exact"`
	// Overridden counts the overridden users whose result flips (apart
	// from Share's fractions).
	Overridden int    `json:"overridden_users,omitempty"`
	Text       string `json:"text"`
}

// DependantChangeOf reckons what the change of a feature from before to
// after does to dependant, which requires it in p: ok is false when no
// user's result of p can flip.
func DependantChangeOf(dependant string, p Prerequisite, before, after *Compiled) (DependantChange, bool) {
	in := func(b string) bool { return b != "" && slices.Contains(p.Buckets, b) }
	d := DependantChange{Feature: dependant, Buckets: slices.Clone(p.Buckets)}
	bf, af := before.feature, after.feature
	ringOnly := len(bf.Rules) == 0 && len(af.Rules) == 0 && bf.BucketBy == "" && af.BucketBy == ""
	var share float64
	var moves []Move
	if bf.Salt == af.Salt {
		for _, m := range ring.ChurnBetween(before.ServedRing(), after.ServedRing()).Moves {
			moves = append(moves, Move(m))
		}
	} else {
		_, moves = IndependentChurn(before.ServedRing().Shares(), after.ServedRing().Shares())
	}
	for _, m := range moves {
		if in(m.From) != in(m.To) {
			share += m.Share
		}
	}
	users := map[string]bool{}
	for u := range bf.Overrides {
		users[u] = true
	}
	for u := range af.Overrides {
		users[u] = true
	}
	for u := range users {
		if in(before.peek(u).Bucket) != in(after.peek(u).Bucket) {
			d.Overridden++
		}
	}
	rulesChange := !ringOnly && (!slices.EqualFunc(bf.Rules, af.Rules, SameRule) || bf.BucketBy != af.BucketBy || bf.Enabled != af.Enabled)
	prereqsChange := !SamePrerequisites(bf.Prerequisites, af.Prerequisites)
	if share == 0 && d.Overridden == 0 && !rulesChange && !prereqsChange {
		return d, false
	}
	switch {
	case ringOnly && !prereqsChange:
		d.Share, d.Exact = &share, bf.Salt == af.Salt
		how := "exactly, on " + af.Key + "'s ring"
		if !d.Exact {
			how = "expected: the salt changes and every user is placed anew"
		}
		d.Text = fmt.Sprintf("%s requires %s to serve %s: %s of users (%s) pass or fail it anew and may get another answer", dependant, af.Key, strings.Join(p.Buckets, " or "), Percent(share), how)
	default:
		d.Text = fmt.Sprintf("%s requires %s to serve %s: the users whose answer from %s changes (its rules or prerequisites decide which, from the contexts apps send) may get another answer", dependant, af.Key, strings.Join(p.Buckets, " or "), af.Key)
		if share > 0 {
			d.Text += fmt.Sprintf("; on the ring alone %s of users pass or fail it anew", Percent(share))
		}
	}
	if d.Overridden > 0 {
		d.Text += fmt.Sprintf(", and %d overridden users", d.Overridden)
	}
	return d, true
}
