package feature

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rollout/rollout/ring"
)

// Reasons of evaluations that targeting adds.
const (
	// ReasonTargetingMatch: a rule's conditions all held; the evaluation's
	// Rule names it.
	ReasonTargetingMatch = "targeting_match"
	// ReasonDefault: the feature (or no rule) buckets by an attribute the
	// context lacks, so the ring cannot place the user: the fallback, or
	// no bucket.
	ReasonDefault = "default"
)

// Limits of a context, so that reading one costs about what an ordinary
// context does, whatever is sent.
const (
	// MaxContextList bounds the entries of a list value of a context
	// attribute.
	MaxContextList = 32
	// MaxContextBytes bounds a context's names, strings and list entries
	// together, in bytes.
	MaxContextBytes = 8192
)

// ruleOp numbers the operators for evaluation.
type ruleOp uint8

const (
	opEq ruleOp = iota + 1
	opNeq
	opIn
	opNotIn
	opStartsWith
	opEndsWith
	opContains
	opMatches
	opLt
	opLte
	opGt
	opGte
	opSemverLt
	opSemverLte
	opSemverEq
	opSemverGte
	opSemverGt
	opBefore
	opAfter
	opPresent
	opAbsent
	opInSegment
	// opNever is a condition past MaxConditionChecks in a configuration
	// stored before that limit, which never holds (see compileTargeting).
	opNever
	// opAny is an any-of condition (anyof.go).
	opAny
)

var opCodes = map[string]ruleOp{
	OpEq: opEq, OpNeq: opNeq, OpIn: opIn, OpNotIn: opNotIn, OpStartsWith: opStartsWith,
	OpEndsWith: opEndsWith, OpContains: opContains, OpMatches: opMatches, OpLt: opLt, OpLte: opLte,
	OpGt: opGt, OpGte: opGte, OpSemverLt: opSemverLt, OpSemverLte: opSemverLte, OpSemverEq: opSemverEq,
	OpSemverGte: opSemverGte, OpSemverGt: opSemverGt, OpBefore: opBefore, OpAfter: opAfter,
	OpPresent: opPresent, OpAbsent: opAbsent, OpInSegment: opInSegment,
}

// valueKind is the JSON type of an eq/neq condition's value.
type valueKind uint8

const (
	kindString valueKind = iota
	kindNumber
	kindBool
)

// compiledCond is a Condition made ready for evaluation: its value parsed,
// its regular expression compiled, its list sorted, once per version.
type compiledCond struct {
	attr  string
	op    ruleOp
	kind  valueKind
	str   string
	bstr  []byte  // str, for a condition that ignores case (fold)
	fold  bool    // ignore_case: str and list are in lower case
	num   float64 // the number of a number value, or of a string value that is one
	isNum bool    // num holds a number
	b     bool
	list  []string            // sorted
	set   map[string]struct{} // list's entries, when it has more than smallList
	nums  []float64           // the entries of list that are numbers, sorted
	re    *regexp.Regexp      // nil for a costly pattern: the condition never holds
	insts int                 // the instructions of re's program
	// costly: the pattern is valid RE2 but over MaxPatternInsts or
	// MaxPatternRepeat (compileCondition refuses it), or, in a compiled
	// feature or segment, past its total: a configuration stored before
	// those limits still loads, the condition never holding.
	costly bool
	ver    semver
	t      time.Time
	// seg is the segment of in_segment; segKey its key (seg is nil in a
	// feature compiled without its segments: the condition never holds).
	// listBy is the feature's bucket_by, which a user list matches by
	// ("": the user ID).
	segKey string
	seg    *CompiledSegment
	listBy string
	// anyOf are the entries of an any-of condition (opAny).
	anyOf []compiledCond
}

// compiledRule is a Rule made ready for evaluation.
type compiledRule struct {
	name     string
	conds    []compiledCond
	bucket   int        // ring order of the bucket served; -1: the ring
	bucketBy string     // the attribute the ring hashes; "": the user ID
	base     int        // index in Compiled.outcomes of its first outcome
	split    *splitRule // the split it serves, or nil
	cost     int        // the most a test of its conditions costs (see targeting.cost)
}

// yieldCost is the cost (see targeting.cost) of the rules an evaluation
// tries between yields of its core: a few hundred microseconds at most.
const yieldCost = 256

// CompiledSegment is a Segment made ready for evaluation, immutable.
type CompiledSegment struct {
	segment Segment
	users   *UserList // a user list's users; nil for a segment of conditions
	conds   []compiledCond
	insts   int // the instructions of its patterns, at most MaxSegmentPatternInsts
	checks  int // the condition checks of one test of it (an any-of's entries each)
}

// holds reports whether every condition of s holds in ctx (user is the
// evaluation's user ID).
func (s *CompiledSegment) holds(ctx Context, user string) bool {
	for i := range s.conds {
		if !s.conds[i].holds(ctx, user) {
			return false
		}
	}
	return true
}

// CompileSegment makes s ready for evaluation; s is valid, or valid but
// for costly patterns (Segment.ValidateStored): a pattern over its limits,
// or past MaxSegmentPatternInsts, never holds.
//
// A user list (s.List) compiles without users: CompileUserList gives it
// its own.
func CompileSegment(s Segment) *CompiledSegment {
	if s.List {
		return CompileUserList(s, nil)
	}
	cs := &CompiledSegment{segment: s, conds: make([]compiledCond, len(s.Conditions))}
	for i, c := range s.Conditions {
		cc, err := compileCondition(c, true)
		if err != nil && !cc.costly {
			panic("rollout: compile a validated segment: " + err.Error())
		}
		if cs.insts+cc.insts > MaxSegmentPatternInsts {
			cc.re, cc.insts, cc.costly = nil, 0, true
		}
		cs.insts += cc.insts
		cs.checks += c.checks()
		cs.conds[i] = cc
	}
	return cs
}

// compileCondition parses c. inSegment says c belongs to a segment, which
// cannot use in_segment (so that segments never loop).
func compileCondition(c Condition, inSegment bool) (compiledCond, error) {
	if c.Any != nil {
		return compileAny(c, inSegment)
	}
	op, ok := opCodes[c.Op]
	if !ok {
		return compiledCond{}, invalidAt("op", "unknown operator %q: use one of %s", Abbreviate(c.Op), strings.Join(Operators, ", "))
	}
	cc := compiledCond{attr: c.Attribute, op: op}
	if op == opInSegment {
		if inSegment {
			return cc, invalidAt("op", "a segment cannot use in_segment: segments do not refer to segments, so that none can loop")
		}
		if c.Attribute != "" {
			return cc, invalidAt("attribute", "in_segment takes no attribute: its value is the segment's key")
		}
	} else if !validAttribute(c.Attribute) {
		return cc, invalidAt("attribute", "condition attribute %q is invalid: use 1 to %d characters of A-Z, a-z, 0-9, '_', '.', ':', '-', starting with a letter or '_'", Abbreviate(c.Attribute), MaxAttributeBytes)
	}
	raw := c.Value
	if op == opPresent || op == opAbsent {
		if len(raw) > 0 && string(raw) != "null" {
			return cc, invalidAt("value", "operator %s takes no value", c.Op)
		}
		return cc, nil
	}
	if len(raw) == 0 || string(raw) == "null" {
		return cc, invalidAt("value", "operator %s needs a value on attribute %q", c.Op, c.Attribute)
	}
	if !json.Valid(raw) {
		return cc, invalidAt("value", "the value of a %s condition is not valid JSON", c.Op)
	}
	str := func() (string, error) {
		var s string
		if raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
			return "", invalidAt("value", "operator %s on attribute %q takes a string value", c.Op, c.Attribute)
		}
		if len(s) > MaxConditionString || !utf8.ValidString(s) {
			return "", invalidAt("value", "a string of a condition is at most %d bytes of UTF-8", MaxConditionString)
		}
		return s, nil
	}
	var err error
	switch op {
	case opEq, opNeq:
		switch {
		case raw[0] == '"':
			cc.kind = kindString
			if cc.str, err = str(); err != nil {
				return cc, err
			}
			if n, err := strconv.ParseFloat(cc.str, 64); err == nil && !math.IsNaN(n) {
				cc.num, cc.isNum = n, true
			}
		case string(raw) == "true" || string(raw) == "false":
			cc.kind, cc.b = kindBool, string(raw) == "true"
			cc.str = string(raw)
		default:
			n, err := strconv.ParseFloat(string(raw), 64)
			if err != nil {
				return cc, invalidAt("value", "operator %s on attribute %q takes a string, a number or a boolean", c.Op, c.Attribute)
			}
			cc.kind, cc.num, cc.isNum = kindNumber, n, true
			cc.str = strconv.FormatFloat(n, 'g', -1, 64)
		}
	case opIn, opNotIn:
		if raw[0] != '[' {
			return cc, invalidAt("value", "operator %s on attribute %q takes a list of strings", c.Op, c.Attribute)
		}
		var list []string
		if err := json.Unmarshal(raw, &list); err != nil {
			return cc, invalidAt("value", "operator %s on attribute %q takes a list of strings", c.Op, c.Attribute)
		}
		if len(list) > MaxListValues {
			return cc, invalidAt("value", "the list of a %s condition has %d entries; at most %d (use a segment per group, or a shorter list)", c.Op, len(list), MaxListValues)
		}
		for _, s := range list {
			if len(s) > MaxConditionString || !utf8.ValidString(s) {
				return cc, invalidAt("value", "a string of a condition is at most %d bytes of UTF-8", MaxConditionString)
			}
			if n, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(n) {
				cc.nums = append(cc.nums, n)
			}
		}
		slices.Sort(list)
		cc.list = slices.Compact(list)
		if len(cc.list) > smallList {
			// A look-up in a set reads a string about twice, whatever the
			// list's length; a binary search reads it up to log2(n) times.
			cc.set = make(map[string]struct{}, len(cc.list))
			for _, s := range cc.list {
				cc.set[s] = struct{}{}
			}
		}
		slices.Sort(cc.nums)
	case opStartsWith, opEndsWith, opContains:
		if cc.str, err = str(); err != nil {
			return cc, err
		}
	case opMatches:
		if cc.str, err = str(); err != nil {
			return cc, err
		}
		if len(cc.str) > MaxPatternBytes {
			return cc, invalidAt("value", "a matches pattern is at most %d bytes", MaxPatternBytes)
		}
		if cc.re, cc.insts, cc.costly, err = compilePattern(c.Attribute, cc.str); err != nil {
			return cc, err
		}
	case opLt, opLte, opGt, opGte:
		n, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || raw[0] == '"' {
			return cc, invalidAt("value", "operator %s on attribute %q takes a number", c.Op, c.Attribute)
		}
		cc.num, cc.isNum = n, true
	case opSemverLt, opSemverLte, opSemverEq, opSemverGte, opSemverGt:
		if cc.str, err = str(); err != nil {
			return cc, err
		}
		var ok bool
		if cc.ver, ok = parseSemver(cc.str); !ok {
			return cc, invalidAt("value", "%q is not a semantic version (MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD])", cc.str)
		}
		cc.ver.pre = strings.Clone(cc.ver.pre)
	case opBefore, opAfter:
		if cc.str, err = str(); err != nil {
			return cc, err
		}
		if cc.t, err = time.Parse(time.RFC3339, cc.str); err != nil {
			return cc, invalidAt("value", "%q is not an RFC 3339 time (like 2026-12-01T00:00:00Z)", cc.str)
		}
	case opInSegment:
		if cc.segKey, err = str(); err != nil {
			return cc, err
		}
		if !ValidKey(cc.segKey) {
			return cc, invalidAt("value", "segment key %q is invalid", cc.segKey)
		}
	}
	if c.IgnoreCase {
		if err := compileFold(c, &cc); err != nil {
			return cc, err
		}
	}
	return cc, nil
}

// smallList is the length up to which an in or not_in list is searched
// entry by entry.
const smallList = 8

// holds reports whether c holds in ctx, for the user ID user. An
// attribute the context lacks (or holds as null) makes every condition but
// absent false, neq and not_in included; present is its opposite.
func (c *compiledCond) holds(ctx Context, user string) bool {
	if c.op >= opInSegment { // in_segment, never or any-of
		switch c.op {
		case opInSegment:
			if c.seg == nil {
				return false
			}
			if l := c.seg.users; l != nil {
				// The feature's bucketing key, hashed as the list is.
				pos, ok := bucketingPosition(l.prefix, user, ctx, c.listBy)
				return ok && l.holdsAt(pos)
			}
			return c.seg.holds(ctx, user)
		case opAny:
			return c.holdsAny(ctx, user)
		}
		return false
	}
	if hook := checkHook.Load(); hook != nil {
		(*hook)()
	}
	v, ok := ctx[c.attr]
	if ok && v == nil {
		ok = false
	}
	switch c.op {
	case opPresent:
		return ok
	case opAbsent:
		return !ok
	}
	if !ok {
		return false
	}
	neg := c.op == opNeq || c.op == opNotIn
	if s, ok := v.(string); ok { // the common case, without positive's switch
		return c.holdsString(s) != neg
	}
	holds, whole := c.positive(v)
	if neg {
		return !holds && whole
	}
	return holds
}

// positive is whether v satisfies c, the negations (neq, not_in) taken
// as their positive (eq, in). A list satisfies c when one entry does; of
// a list only the entries within its first MaxListBytes bytes are tried
// (MaxMatchBytes for matches), so that a list costs a condition about
// what one string does: whole says whether every entry was tried (a
// negation holds only then).
func (c *compiledCond) positive(v any) (holds, whole bool) {
	switch x := v.(type) {
	case string:
		return c.holdsString(x), true
	case bool:
		return c.holdsBool(x), true
	case []string:
		budget := c.listBytes()
		for _, s := range x {
			if budget -= len(s); budget < 0 {
				return false, false
			}
			if c.holdsString(s) {
				return true, true
			}
		}
		return false, true
	case []any:
		budget := c.listBytes()
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				continue
			}
			if budget -= len(s); budget < 0 {
				return false, false
			}
			if c.holdsString(s) {
				return true, true
			}
		}
		return false, true
	}
	if n, ok := number(v); ok {
		return c.holdsNumber(n), true
	}
	return false, true
}

// listBytes is how many bytes of a list's entries c tries.
func (c *compiledCond) listBytes() int {
	if c.op == opMatches {
		return MaxMatchBytes
	}
	return MaxListBytes
}

// number returns v as a float64 when it is a Go number.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint64:
		return float64(x), true
	case uint32:
		return float64(x), true
	case json.Number:
		n, err := x.Float64()
		return n, err == nil
	}
	return 0, false
}

func (c *compiledCond) holdsString(s string) bool {
	if c.fold {
		return c.holdsFolded(s)
	}
	switch c.op {
	case opEq, opNeq:
		switch c.kind {
		case kindString:
			return s == c.str
		case kindBool:
			return s == c.str
		default:
			n, err := strconv.ParseFloat(s, 64)
			return err == nil && n == c.num
		}
	case opIn, opNotIn:
		if c.set == nil {
			return slices.Contains(c.list, s)
		}
		_, found := c.set[s]
		return found
	case opStartsWith:
		return strings.HasPrefix(s, c.str)
	case opEndsWith:
		return strings.HasSuffix(s, c.str)
	case opContains:
		return strings.Contains(s, c.str)
	case opMatches:
		if len(s) > MaxMatchBytes || c.re == nil {
			return false
		}
		if hook := matchHook.Load(); hook != nil {
			(*hook)(len(s))
		}
		return c.re.MatchString(s)
	case opLt, opLte, opGt, opGte:
		n, err := strconv.ParseFloat(s, 64)
		return err == nil && c.compareNumber(n)
	case opSemverLt, opSemverLte, opSemverEq, opSemverGte, opSemverGt:
		v, ok := parseSemver(s)
		if !ok {
			return false
		}
		d := v.compare(c.ver)
		switch c.op {
		case opSemverLt:
			return d < 0
		case opSemverLte:
			return d <= 0
		case opSemverEq:
			return d == 0
		case opSemverGte:
			return d >= 0
		}
		return d > 0
	case opBefore, opAfter:
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return false
		}
		if c.op == opBefore {
			return t.Before(c.t)
		}
		return t.After(c.t)
	}
	return false
}

func (c *compiledCond) holdsNumber(n float64) bool {
	switch c.op {
	case opEq, opNeq:
		return c.isNum && n == c.num
	case opIn, opNotIn:
		_, found := slices.BinarySearch(c.nums, n)
		return found
	case opLt, opLte, opGt, opGte:
		return c.compareNumber(n)
	case opBefore, opAfter: // a number is seconds since 1970 (Unix time)
		t := c.t.Unix()
		if c.op == opBefore {
			return n < float64(t)
		}
		return n > float64(t)
	}
	return false
}

func (c *compiledCond) holdsBool(b bool) bool {
	if c.op != opEq && c.op != opNeq {
		return false
	}
	switch c.kind {
	case kindBool:
		return b == c.b
	case kindString:
		return c.str == strconv.FormatBool(b)
	}
	return false
}

func (c *compiledCond) compareNumber(n float64) bool {
	switch c.op {
	case opLt:
		return n < c.num
	case opLte:
		return n <= c.num
	case opGt:
		return n > c.num
	}
	return n >= c.num && (c.op == opGte)
}

// semver is a parsed semantic version; build metadata is ignored.
type semver struct {
	major, minor, patch uint64
	pre                 string // the pre-release, "" for none
}

// parseSemver parses MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD], with an
// optional leading "v"; missing parts are 0. It does not allocate.
func parseSemver(s string) (semver, bool) {
	var v semver
	if len(s) > 0 && s[0] == 'v' {
		s = s[1:]
	}
	if i := strings.IndexByte(s, '+'); i >= 0 {
		s = s[:i]
	}
	if i := strings.IndexByte(s, '-'); i >= 0 {
		s, v.pre = s[:i], s[i+1:]
		if v.pre == "" {
			return v, false
		}
	}
	part, digits := 0, 0
	var n uint64
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if digits == 0 || part > 2 {
				return v, false
			}
			switch part {
			case 0:
				v.major = n
			case 1:
				v.minor = n
			default:
				v.patch = n
			}
			part, digits, n = part+1, 0, 0
			continue
		}
		c := s[i]
		if c < '0' || c > '9' || digits == 19 {
			return v, false
		}
		n = n*10 + uint64(c-'0')
		digits++
	}
	return v, true
}

// compare orders v and w as semantic versioning does: a pre-release comes
// before its release; pre-release identifiers compare numerically when
// both are numbers, else as text, numbers first.
func (v semver) compare(w semver) int {
	for _, d := range [3][2]uint64{{v.major, w.major}, {v.minor, w.minor}, {v.patch, w.patch}} {
		if d[0] != d[1] {
			if d[0] < d[1] {
				return -1
			}
			return 1
		}
	}
	switch {
	case v.pre == w.pre:
		return 0
	case v.pre == "":
		return 1
	case w.pre == "":
		return -1
	}
	a, b := v.pre, w.pre
	for a != "" && b != "" {
		var x, y string
		x, a, _ = strings.Cut(a, ".")
		y, b, _ = strings.Cut(b, ".")
		if x == y {
			continue
		}
		nx, ex := strconv.ParseUint(x, 10, 64)
		ny, ey := strconv.ParseUint(y, 10, 64)
		switch {
		case ex == nil && ey == nil:
			if nx < ny {
				return -1
			}
			return 1
		case ex == nil:
			return -1
		case ey == nil:
			return 1
		case x < y:
			return -1
		default:
			return 1
		}
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	}
	return 1
}

// validateTargeting reports what is wrong with f's rules and bucket_by.
// buckets are the names of f's buckets. stored lets through patterns over
// their limits (which a configuration stored before them may hold, and
// which compile as conditions that never hold).
func validateTargeting(f *Feature, buckets map[string]bool, stored bool) error {
	if f.BucketBy != "" && !validAttribute(f.BucketBy) {
		return invalidAt("bucket_by", "bucket_by %q is not a valid attribute name: use 1 to %d characters of A-Z, a-z, 0-9, '_', '.', ':', '-', starting with a letter or '_'", Abbreviate(f.BucketBy), MaxAttributeBytes)
	}
	if len(f.Rules) == 0 {
		return nil
	}
	if len(f.Rules) > MaxRules {
		return invalidAt("rules", "a feature has at most %d rules, got %d", MaxRules, len(f.Rules))
	}
	for i, r := range f.Rules {
		if len(r.Conditions) > MaxConditions {
			return invalidAt(listField("rules", i)+".conditions", "rule %q has %d conditions; at most %d", Abbreviate(r.Name), len(r.Conditions), MaxConditions)
		}
	}
	if b, err := json.Marshal(f.Rules); err != nil || len(b) > MaxTargetingBytes {
		return invalidAt("rules", "the rules are %d bytes as JSON; at most %d (use segments for long lists)", len(b), MaxTargetingBytes)
	}
	names := make(map[string]int, len(f.Rules))
	insts, checks := 0, 0
	if err := f.ValidateSplits(); err != nil {
		return err
	}
	for i, r := range f.Rules {
		if err := validateRule(r, i, buckets, stored, &insts); err != nil {
			return err
		}
		// Each condition counts 1 here (an any-of its entries), an
		// in_segment too: with its segment's, compileTargeting counts
		// them (Compiled.CheckPatterns).
		for j, c := range r.Conditions {
			if checks += c.checks(); checks > MaxConditionChecks && !stored {
				return (&patternExcess{Rule: i, Cond: j, Checks: checks}).err(r.Name)
			}
		}
		if first, ok := names[r.Name]; ok {
			return invalidAt(listField("rules", i)+".name", "rule name %q appears twice (rules[%d] too): rule names must be unique", r.Name, first)
		}
		names[r.Name] = i
	}
	return nil
}

// validateRule reports what is wrong with r, the feature's rules[i], but
// for the count of its conditions (see validateTargeting); insts counts
// the instructions of the feature's patterns, which must stay within
// MaxFeaturePatternInsts (but when stored: see validateTargeting).
func validateRule(r Rule, i int, buckets map[string]bool, stored bool, insts *int) error {
	at := listField("rules", i)
	if !ValidRuleName(r.Name) {
		return invalidAt(at+".name", "rule name %q is invalid: use 1 to 64 characters of A-Z, a-z, 0-9, '_', '.', '-'", Abbreviate(r.Name))
	}
	for j, c := range r.Conditions {
		cc, err := compileCondition(c, false)
		if err != nil && !(stored && cc.costly) {
			return about(err, fmt.Sprintf("rule %q", r.Name), listField(at+".conditions", j))
		}
		if *insts += cc.insts; *insts > MaxFeaturePatternInsts && !stored {
			return (&patternExcess{Rule: i, Cond: j, Insts: *insts}).err(r.Name)
		}
	}
	if r.Serve.Split != nil {
		if err := validateSplitRing(r, at); err != nil {
			return err
		}
		if s := r.Serve; s.BucketBy != "" && !validAttribute(s.BucketBy) {
			return invalidAt(at+".serve.bucket_by", "rule %q: bucket_by %q is not a valid attribute name", r.Name, Abbreviate(s.BucketBy))
		}
		return nil
	}
	switch s := r.Serve; {
	case len(s.SplitRing) > 0:
		return invalidAt(at+".serve.split_ring", "rule %q has a split ring but no split", r.Name)
	case s.Ring && s.Bucket != "":
		return invalidAt(at+".serve", "rule %q serves both a bucket and the ring: give one", r.Name)
	case !s.Ring && s.Bucket == "":
		return invalidAt(at+".serve", "rule %q serves nothing: give serve.bucket, serve.ring or serve.split", r.Name)
	case s.Bucket != "" && !buckets[s.Bucket]:
		return invalidAt(at+".serve.bucket", "rule %q serves bucket %q, which the feature does not have", r.Name, s.Bucket)
	case s.BucketBy != "" && !s.Ring:
		return invalidAt(at+".serve.bucket_by", "rule %q: bucket_by applies only to a rule that serves the ring", r.Name)
	case s.BucketBy != "" && !validAttribute(s.BucketBy):
		return invalidAt(at+".serve.bucket_by", "rule %q: bucket_by %q is not a valid attribute name", r.Name, Abbreviate(s.BucketBy))
	}
	return nil
}

// Validate reports the first thing wrong with s as an EInvalid *Error
// whose Field says where (key, description, conditions[1].value, …).
func (s Segment) Validate() error { return s.validate(false) }

// ValidateStored is Validate for a segment read from a store (or a sync
// form): it lets through matches patterns over their limits, which
// compile as conditions that never hold (see Feature.ValidateStored).
func (s Segment) ValidateStored() error { return s.validate(true) }

// validate is Validate; stored lets through patterns over their limits,
// as validateTargeting does.
func (s Segment) validate(stored bool) error {
	if !ValidKey(s.Key) {
		return invalidAt("key", "segment key %q is invalid: use 1 to 64 characters of a-z, 0-9, '_', '.', '-', starting with a letter or digit", Abbreviate(s.Key))
	}
	if err := validateDescription(s.Description); err != nil {
		return err
	}
	if s.List {
		switch {
		case len(s.Conditions) > 0:
			return invalidAt("conditions", "segment %q is a user list: it has users, not conditions", s.Key)
		case s.Size < 0 || s.Size > MaxListUsers:
			return invalidAt("size", "segment %q has %d users; a user list has at most %d", s.Key, s.Size, MaxListUsers)
		}
		return nil
	}
	if s.Size != 0 {
		return invalidAt("size", "segment %q is a segment of conditions: only a user list has a size", s.Key)
	}
	if len(s.Conditions) > MaxConditions {
		return invalidAt("conditions", "segment %q has %d conditions; at most %d", s.Key, len(s.Conditions), MaxConditions)
	}
	if b, err := json.Marshal(s.Conditions); err != nil || len(b) > MaxTargetingBytes {
		return invalidAt("conditions", "the conditions are %d bytes as JSON; at most %d", len(b), MaxTargetingBytes)
	}
	insts := 0
	for j, c := range s.Conditions {
		cc, err := compileCondition(c, true)
		if err != nil && !(stored && cc.costly) {
			return about(err, fmt.Sprintf("segment %q", s.Key), listField("conditions", j))
		}
		if insts += cc.insts; insts > MaxSegmentPatternInsts && !stored {
			return invalidAt(listField("conditions", j), "segment %q: the segment's matches patterns compile to %d instructions up to this condition; at most %d: use fewer or simpler patterns", s.Key, insts, MaxSegmentPatternInsts)
		}
	}
	return nil
}

// Segments returns the keys of the segments f's rules use, sorted, once
// each.
func (f Feature) Segments() []string {
	var out []string
	var add func(cs []Condition)
	add = func(cs []Condition) {
		for _, c := range cs {
			add(c.Any)
			if c.Op == OpInSegment {
				var key string
				if json.Unmarshal(c.Value, &key) == nil {
					out = append(out, key)
				}
			}
		}
	}
	for _, r := range f.Rules {
		add(r.Conditions)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// targeting is the compiled form of a feature's rules and bucket_by.
type targeting struct {
	rules    []compiledRule
	bucketBy string
	// excess, when set, is where the feature's patterns first passed
	// MaxFeaturePatternInsts, or its conditions MaxConditionChecks:
	// conditions from there on that would pass it never hold (see
	// Compiled.CheckPatterns, which refuses a change so).
	excess *patternExcess
	// defaultOutcome is the index in Compiled.outcomes of what the
	// feature serves when the ring cannot place the user.
	defaultOutcome int
	// cost is the most one evaluation can cost: its condition checks and
	// its patterns' instructions (see CostlyEvaluation).
	cost int
}

// costly reports whether an evaluation of c may cost more than
// CostlyEvaluation.
func (c *Compiled) costly() bool {
	return c.targeting != nil && c.targeting.cost > CostlyEvaluation
}

// compileTargeting compiles f's rules into c, after c's ring and outcomes
// (compileRing): it appends the outcomes of the rules. segments resolves
// in_segment (nil: no segment is known, and in_segment never holds).
func (c *Compiled) compileTargeting(segments map[string]*CompiledSegment) {
	f := &c.feature
	if len(f.Rules) == 0 && f.BucketBy == "" {
		served := 0
		for _, share := range c.shares {
			if share > 0 {
				served++
			}
		}
		c.static = !f.Enabled || (len(c.overrides) == 0 && served == 1)
		return
	}
	n := len(c.names)
	t := &targeting{bucketBy: f.BucketBy, defaultOutcome: len(c.outcomes)}
	def := Outcome{Feature: f.Key, Version: f.Version, Reason: ReasonDefault, bucket: n}
	if c.fallback >= 0 {
		def.bucket, def.Bucket, def.Value = c.fallback, c.names[c.fallback], c.values[c.fallback]
	}
	outcomes := []Outcome{def}
	insts := 0  // of the patterns so far, a segment's at each use
	checks := 0 // of the conditions so far, a segment's at each use
	for i, r := range f.Rules {
		cr := compiledRule{name: r.Name, bucket: -1, bucketBy: r.Serve.BucketBy, base: t.defaultOutcome + len(outcomes)}
		if cr.bucketBy == "" {
			cr.bucketBy = f.BucketBy
		}
		for j, cond := range r.Conditions {
			cc, err := compileCondition(cond, false)
			if err != nil && !cc.costly {
				panic("rollout: compile a validated rule: " + err.Error())
			}
			cost, check := cc.resolve(segments, f.BucketBy)
			switch {
			case cost > 0 && insts+cost > MaxFeaturePatternInsts:
				// Past the feature's total (stored before the limit, or a
				// segment grown since): the condition never holds.
				if t.excess == nil {
					t.excess = &patternExcess{Rule: i, Cond: j, Insts: insts + cost}
				}
				if cc.op == opAny {
					cc = compiledCond{op: opNever}
				}
				cc.re, cc.seg, cc.costly, cost = nil, nil, true, 0
			case checks+check > MaxConditionChecks:
				// As for patterns: the condition never holds, and tests
				// nothing.
				if t.excess == nil {
					t.excess = &patternExcess{Rule: i, Cond: j, Checks: checks + check}
				}
				cc = compiledCond{op: opNever, segKey: cc.segKey, costly: true}
				cost, check = 0, 0
			}
			insts += cost
			checks += check
			cr.cost += cost + check
			cr.conds = append(cr.conds, cc)
		}
		reason := ReasonTargetingMatch
		if r.Serve.Split != nil {
			reason = ReasonSplit
			cr.split = c.compileSplit(r.Serve)
		}
		add := func(b int) {
			outcomes = append(outcomes, Outcome{Feature: f.Key, Version: f.Version, Reason: reason, Rule: r.Name, bucket: b, Bucket: c.names[b], Value: c.values[b]})
		}
		if r.Serve.Bucket != "" {
			cr.bucket = c.index[r.Serve.Bucket]
			add(cr.bucket)
		} else {
			for b := range n {
				add(b)
			}
		}
		t.rules = append(t.rules, cr)
	}
	t.cost = checks + insts
	// The outcomes move: copy them into a new slice (Outcome holds an
	// atomic.Value, which must not be copied once used; none is yet).
	all := make([]Outcome, len(c.outcomes)+len(outcomes))
	for i := range c.outcomes {
		copyOutcome(&all[i], &c.outcomes[i])
	}
	for i := range outcomes {
		copyOutcome(&all[len(c.outcomes)+i], &outcomes[i])
	}
	c.outcomes = all
	c.targeting = t
	c.static = !f.Enabled
}

// resolve looks up the segment of an in_segment condition (an any-of's
// entries' too) in segments, and returns what one test of cc costs: the
// instructions of its patterns and its condition checks, a segment's at
// each use (at least 1; a user list's 1). bucketBy is the feature's, by
// which a user list matches.
func (cc *compiledCond) resolve(segments map[string]*CompiledSegment, bucketBy string) (insts, checks int) {
	switch cc.op {
	case opInSegment:
		cc.seg, cc.listBy = segments[cc.segKey], bucketBy
		if cc.seg == nil {
			return 0, 1
		}
		return cc.seg.insts, max(1, cc.seg.checks)
	case opAny:
		for i := range cc.anyOf {
			a, b := cc.anyOf[i].resolve(segments, bucketBy)
			insts, checks = insts+a, checks+b
		}
		return insts, checks
	}
	return cc.insts, 1
}

func copyOutcome(dst, src *Outcome) {
	dst.Feature, dst.Bucket, dst.Value, dst.Version, dst.Reason, dst.Rule, dst.Prerequisite, dst.Static, dst.Single, dst.bucket =
		src.Feature, src.Bucket, src.Value, src.Version, src.Reason, src.Rule, src.Prerequisite, src.Static, src.Single, src.bucket
}

// assignContext is assign for a feature with targeting: overrides by user
// ID, then the first rule whose conditions hold, then the ring, hashing
// the bucket_by attribute when one is set. A rule that serves the ring by
// an attribute the context lacks does not match; the ring by such an
// attribute serves the default outcome.
func (c *Compiled) assignContext(user string, ctx Context) int {
	t := c.targeting
	if t == nil || !c.feature.Enabled {
		return c.assign(user)
	}
	n := len(c.names)
	if c.overrides != nil {
		if b, ok := c.overrides[userPosition(c.overridePrefix, user)]; ok {
			return n + b
		}
	}
	spent := 0 // the cost of the rules tried since the last yield
rules:
	for i := range t.rules {
		r := &t.rules[i]
		if spent += r.cost; spent > yieldCost {
			// A costly evaluation lets the evaluations queued behind it
			// on its core run.
			runtime.Gosched()
			spent = r.cost
		}
		for j := range r.conds {
			if !r.conds[j].holds(ctx, user) {
				continue rules
			}
		}
		if r.bucket >= 0 {
			return r.base
		}
		if r.split != nil {
			pos, ok := c.positionAfter(c.splitPrefix, user, ctx, r.bucketBy)
			if !ok {
				continue
			}
			b, _ := r.split.ring.LookupIndex(pos)
			return r.base + r.split.index[b]
		}
		pos, ok := c.position(user, ctx, r.bucketBy)
		if !ok {
			continue
		}
		b, _ := c.ring.LookupIndex(pos)
		return r.base + b
	}
	pos, ok := c.position(user, ctx, t.bucketBy)
	if !ok {
		return t.defaultOutcome
	}
	b, _ := c.ring.LookupIndex(pos)
	return b
}

// position is where the ring places user, or, when attr is set, the value
// of the context's attribute attr: a string, a number (its shortest
// decimal form) or a boolean ("true", "false"). Without such a value,
// false.
func (c *Compiled) position(user string, ctx Context, attr string) (ring.Position, bool) {
	return c.positionAfter(c.prefix, user, ctx, attr)
}

// positionAfter is position, hashing after prefix (c.prefix, or
// c.splitPrefix for a split).
func (c *Compiled) positionAfter(prefix, user string, ctx Context, attr string) (ring.Position, bool) {
	return bucketingPosition(prefix, user, ctx, attr)
}

// bucketingPosition is the hash, after prefix, of the bucketing key: user,
// or, when attr is set, the context's value of attr as position takes it.
func bucketingPosition(prefix, user string, ctx Context, attr string) (ring.Position, bool) {
	if attr == "" {
		return userPosition(prefix, user), true
	}
	switch v := ctx[attr].(type) {
	case string:
		if v == "" {
			return ring.Position{}, false
		}
		return userPosition(prefix, v), true
	case bool:
		return userPosition(prefix, strconv.FormatBool(v)), true
	case nil:
		return ring.Position{}, false
	default:
		n, ok := number(v)
		if !ok {
			return ring.Position{}, false
		}
		var buf [192]byte
		b := append(buf[:0], prefix...)
		b = strconv.AppendFloat(b, n, 'g', -1, 64)
		return ring.HashBytes(b), true
	}
}

// ValidateContext refuses a context that is too big to evaluate: more than
// MaxContextAttrs attributes, a name longer than MaxAttributeBytes×4, a
// string longer than MaxContextValueLen, a list longer than MaxContextList,
// names, strings and list entries of more than MaxContextBytes together
// (ContextTooLarge), or a value of another type than string, number, bool,
// list of strings or nil (an attribute without a value, which no condition
// but absent holds). It is the one check of a context: of the server's
// query, body and OFREP contexts alike, and of the in-app client's.
func ValidateContext(ctx Context) error {
	if len(ctx) > MaxContextAttrs {
		return tooManyAttributes()
	}
	size := 0
	for k, v := range ctx {
		if len(k) > 4*MaxAttributeBytes {
			return Errorf(EInvalid, "a context attribute's name is at most %d bytes", 4*MaxAttributeBytes)
		}
		size += len(k)
		switch x := v.(type) {
		case string:
			if len(x) > MaxContextValueLen {
				return Errorf(EInvalid, "context attribute %q is %d bytes; at most %d", Abbreviate(k), len(x), MaxContextValueLen)
			}
			size += len(x)
		case []string:
			if len(x) > MaxContextList {
				return Errorf(EInvalid, "context attribute %q is a list of %d; at most %d", Abbreviate(k), len(x), MaxContextList)
			}
			for _, s := range x {
				if len(s) > MaxContextValueLen {
					return Errorf(EInvalid, "an entry of context attribute %q is %d bytes; at most %d", Abbreviate(k), len(s), MaxContextValueLen)
				}
				size += len(s)
			}
		case bool, nil:
		default:
			if _, ok := number(v); !ok {
				return Errorf(EInvalid, "context attribute %q is a %T: use a string, a number, a boolean or a list of strings", Abbreviate(k), v)
			}
		}
		if size > MaxContextBytes {
			return ContextTooLarge()
		}
	}
	return nil
}

// tooManyAttributes is the EInvalid *Error of a context of more than
// MaxContextAttrs attributes.
func tooManyAttributes() error {
	return Errorf(EInvalid, "the context has more than %d attributes: send only the attributes the rules read", MaxContextAttrs)
}

// ContextTooLarge is the EInvalid *Error of a context over
// MaxContextBytes, which every reader of a context answers.
func ContextTooLarge() error {
	return Errorf(EInvalid, "the context is more than %d bytes (its names, strings and list entries together): send only the attributes the rules read", MaxContextBytes)
}

// ContextFromJSON converts attributes decoded from JSON (encoding/json's
// any: string, float64, bool, []any, map, nil) into a Context: lists of
// strings become []string; objects, null and lists holding anything but
// strings hold no value (nil: no rule can test them), but count as
// attributes, their names among the context's bytes. It refuses what
// ValidateContext refuses.
func ContextFromJSON(m map[string]any) (Context, error) {
	if len(m) > MaxContextAttrs {
		return nil, tooManyAttributes()
	}
	ctx := make(Context, len(m))
	for k, v := range m {
		switch x := v.(type) {
		case string, float64, bool:
			ctx[k] = x
		case []any:
			if len(x) > MaxContextList {
				return nil, Errorf(EInvalid, "context attribute %q is a list of %d; at most %d", Abbreviate(k), len(x), MaxContextList)
			}
			if list, ok := StringList(x); ok {
				ctx[k] = list
			} else {
				ctx[k] = nil
			}
		default:
			ctx[k] = nil
		}
	}
	return ctx, ValidateContext(ctx)
}

// StringList returns the strings of a JSON list decoded as []any, and
// false when it holds anything but strings: a list a rule can test.
func StringList(xs []any) ([]string, bool) {
	list := make([]string, 0, len(xs))
	for _, e := range xs {
		s, ok := e.(string)
		if !ok {
			return nil, false
		}
		list = append(list, s)
	}
	return list, true
}

// describeCondition says c in words: "email ends with "@example.com"",
// "email ends with @example.com (any case)", "(plan = enterprise or
// seats ≥ 100)".
func describeCondition(c Condition) string {
	if c.Any != nil {
		parts := make([]string, len(c.Any))
		for i, a := range c.Any {
			parts[i] = describeCondition(a)
		}
		return "(" + strings.Join(parts, " or ") + ")"
	}
	if c.IgnoreCase {
		c.IgnoreCase = false
		return describeCondition(c) + " (any case)"
	}
	v := Abbreviate(string(CompactJSON(c.Value)))
	words := map[string]string{
		OpEq: "=", OpNeq: "≠", OpIn: "is one of", OpNotIn: "is none of", OpStartsWith: "starts with",
		OpEndsWith: "ends with", OpContains: "contains", OpMatches: "matches", OpLt: "<", OpLte: "≤",
		OpGt: ">", OpGte: "≥", OpSemverLt: "< version", OpSemverLte: "≤ version", OpSemverEq: "= version",
		OpSemverGte: "≥ version", OpSemverGt: "> version", OpBefore: "is before", OpAfter: "is after",
	}
	switch c.Op {
	case OpPresent:
		return c.Attribute + " is present"
	case OpAbsent:
		return c.Attribute + " is absent"
	case OpInSegment:
		return "in segment " + strings.Trim(v, `"`)
	}
	w, ok := words[c.Op]
	if !ok {
		w = c.Op
	}
	if c.Op == OpEq || c.Op == OpNeq || c.Op == OpIn || c.Op == OpNotIn {
		v = strings.ReplaceAll(v, `"`, "")
	}
	return fmt.Sprintf("%s %s %s", c.Attribute, w, v)
}

// DescribeConditions says a rule's conditions in words, joined by "and";
// "everyone" when there are none.
func DescribeConditions(cs []Condition) string {
	if len(cs) == 0 {
		return "everyone"
	}
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = describeCondition(c)
	}
	return strings.Join(parts, " and ")
}

// describeServe says what s serves: "on", or "ring" ("ring by org").
func describeServe(s Serve) string {
	switch {
	case s.Bucket != "":
		return s.Bucket
	case s.Split != nil && s.BucketBy != "":
		return describeSplit(s.Split) + " by " + s.BucketBy
	case s.Split != nil:
		return describeSplit(s.Split)
	case s.BucketBy != "":
		return "ring by " + s.BucketBy
	}
	return "ring"
}

// DescribeRule says r in words: "staff: if email ends with @example.com →
// serve on".
func DescribeRule(r Rule) string {
	return fmt.Sprintf("%s: if %s → serve %s", r.Name, DescribeConditions(r.Conditions), describeServe(r.Serve))
}

// ValidateTargeting reports what is wrong with f's rules and bucket_by
// alone (Validate checks them too, among the rest): callers that answer
// targeting's mistakes apart use it first.
func (f Feature) ValidateTargeting() error {
	buckets := make(map[string]bool, len(f.Buckets))
	for _, b := range f.Buckets {
		buckets[b.Name] = true
	}
	return validateTargeting(&f, buckets, false)
}

// Segment returns the configuration s was compiled from. It shares its
// conditions with s: do not modify them.
func (s *CompiledSegment) Segment() Segment { return s.segment }
