package feature

import (
	"regexp"
	"regexp/syntax"
	"sync/atomic"
)

// The cost of matches patterns and of conditions. Go's regular expressions run in time
// proportional to the instructions of their compiled program times the
// bytes they scan, and hold memory proportional to the instructions: a
// pattern is bounded by the instructions it compiles to (a short pattern
// can compile to many: (?:\w?){1000} is 13 bytes and 2,002 instructions),
// a feature and a segment by the instructions of all their patterns, and
// an evaluation by the bytes one condition scans (MaxMatchBytes,
// MaxListBytes) and by the conditions it tests, segments' expanded at
// each use (MaxConditionChecks).
const (
	// MaxPatternInsts bounds the instructions one pattern compiles to.
	MaxPatternInsts = 1000
	// MaxPatternRepeat bounds a pattern's repetition: the count of a
	// {n,m} (m, or n when unbounded), the counts of nested ones
	// multiplied.
	MaxPatternRepeat = 256
	// MaxSegmentPatternInsts bounds the instructions of a segment's
	// patterns together.
	MaxSegmentPatternInsts = 1000
	// MaxFeaturePatternInsts bounds the instructions of a feature's
	// patterns together, a segment's counted at every in_segment that uses
	// it (an evaluation may run them at each).
	MaxFeaturePatternInsts = 1000
	// MaxMatchBytes bounds what a matches condition scans of an
	// attribute: a longer string does not match; of a list, only the
	// entries within its first MaxMatchBytes bytes are tried.
	MaxMatchBytes = 256
	// MaxListBytes bounds what any other condition reads of a list: only
	// the entries within its first MaxListBytes bytes are tried.
	MaxListBytes = 4096
	// MaxConditionChecks bounds the conditions one evaluation of a feature
	// may test: each of its rules' conditions counts 1, an in_segment its
	// segment's conditions (at least 1), at every in_segment that uses it.
	MaxConditionChecks = 1000
)

// compilePattern compiles the pattern of a matches condition on attribute
// attr and returns it with the instructions of its program. A pattern
// that is not RE2, or is over MaxPatternRepeat or MaxPatternInsts, is an
// EInvalid *Error; costly says it is the second kind (valid RE2, which a
// store may hold from before the limits: see compiledCond.costly).
func compilePattern(attr, pattern string) (re *regexp.Regexp, insts int, costly bool, err error) {
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, 0, false, invalidAt("value", "the pattern of a matches condition on attribute %q is not a valid RE2 regular expression: %v", attr, err)
	}
	if n := repeats(parsed); n > MaxPatternRepeat {
		return nil, 0, true, invalidAt("value", "the pattern of a matches condition on attribute %q repeats more than %d times ({n,m} counts, nested ones multiplied): use smaller counts, or + and * in their place", attr, MaxPatternRepeat)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, 0, false, invalidAt("value", "the pattern of a matches condition on attribute %q is not a valid RE2 regular expression: %v", attr, err)
	}
	if n := len(prog.Inst); n > MaxPatternInsts {
		return nil, 0, true, invalidAt("value", "the pattern of a matches condition on attribute %q compiles to %d instructions; at most %d: use smaller {n,m} counts, or + and * in their place", attr, n, MaxPatternInsts)
	}
	if re, err = regexp.Compile(pattern); err != nil {
		return nil, 0, false, invalidAt("value", "the pattern of a matches condition on attribute %q is not a valid RE2 regular expression: %v", attr, err)
	}
	return re, len(prog.Inst), false, nil
}

// repeats returns the largest repetition count in re, nested counts
// multiplied (capped beyond MaxPatternRepeat).
func repeats(re *syntax.Regexp) int {
	inner := 1
	for _, sub := range re.Sub {
		inner = max(inner, repeats(sub))
	}
	if re.Op == syntax.OpRepeat {
		n := max(re.Min, re.Max)
		inner = min(inner*n, MaxPatternRepeat+1)
	}
	return inner
}

// matchHook, when set (by tests), is told the length of every string a
// pattern scans; checkHook of every condition an evaluation tests.
var (
	matchHook atomic.Pointer[func(n int)]
	checkHook atomic.Pointer[func()]
)

// patternExcess is where a feature's rules pass a limit: the condition
// Cond of the rule Rule (their indexes) at which the instructions of its
// matches patterns pass MaxFeaturePatternInsts (Insts counted up to it, a
// segment's patterns at each in_segment that uses it), or, Checks set, its
// condition checks pass MaxConditionChecks.
type patternExcess struct {
	Rule, Cond int
	Insts      int // the instructions counted up to that condition
	Checks     int // the condition checks counted up to it; 0: Insts passed
}

// err is the EInvalid *Error of x, in the rule named rule, at its
// condition.
func (x *patternExcess) err(rule string) error {
	at := listField(listField("rules", x.Rule)+".conditions", x.Cond)
	if x.Checks > 0 {
		return invalidAt(at, "rule %q: the feature's conditions come to %d checks up to this condition (an in_segment counts its segment's conditions, at each use); at most %d: use fewer rules or conditions", rule, x.Checks, MaxConditionChecks)
	}
	return invalidAt(at, "rule %q: the feature's matches patterns (a segment's counted at each in_segment that uses it) compile to %d instructions up to this condition; at most %d: use fewer or simpler patterns", rule, x.Insts, MaxFeaturePatternInsts)
}

// CheckPatterns refuses c, a feature compiled with its segments, when its
// patterns pass MaxFeaturePatternInsts or its conditions
// MaxConditionChecks, with an EInvalid *Error at the condition where they
// do ("rules[2].conditions[10]"). Conditions past the limit never hold: a
// configuration stored before it still loads, but a change must not make
// one.
func (c *Compiled) CheckPatterns() error {
	if c.targeting == nil || c.targeting.excess == nil {
		return nil
	}
	x := c.targeting.excess
	return x.err(c.feature.Rules[x.Rule].Name)
}
