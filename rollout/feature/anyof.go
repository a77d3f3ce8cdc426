package feature

import (
	"bytes"
	"slices"
	"strings"
	"unicode/utf8"
)

// Any-of conditions and conditions that ignore case.
//
// An any-of condition ({"any":[{"attribute","op","value"},…]}) holds when
// one of its entries holds; a rule's (or a segment's) list of conditions
// stays "all of", so a rule says "plan is enterprise, or email ends with
// @example.com" with one any-of condition. Any-of does not nest: its
// entries are conditions of the other kinds, at most MaxConditions of
// them, each counted among the feature's condition checks
// (MaxConditionChecks) as a condition of the rule would be.
//
// IgnoreCase ("ignore_case": true) on eq, neq, in, not_in, starts_with,
// ends_with and contains with string values compares the lower case of
// both sides (strings.ToLower): the condition's value is lowered once,
// when compiled, and a context's string at each test, without allocating
// for ASCII strings of up to MaxContextValueLen bytes.

// foldOps are the operators that take ignore_case.
var foldOps = map[string]bool{OpEq: true, OpNeq: true, OpIn: true, OpNotIn: true, OpStartsWith: true, OpEndsWith: true, OpContains: true}

// compileAny compiles an any-of condition c (c.Any is not nil).
// inSegment is as for compileCondition. An entry whose pattern is over
// its limits (valid RE2, see compiledCond.costly) never holds: the
// condition is returned with costly set and the entry's error, so that a
// configuration stored before those limits still compiles.
func compileAny(c Condition, inSegment bool) (compiledCond, error) {
	cc := compiledCond{op: opAny}
	if c.Attribute != "" || c.Op != "" || len(c.Value) > 0 || c.IgnoreCase {
		return cc, invalidAt("any", `an any-of condition holds "any" alone: give each entry its attribute, op and value ({"any":[{"attribute":"plan","op":"eq","value":"enterprise"},…]})`)
	}
	if len(c.Any) == 0 {
		return cc, invalidAt("any", "an any-of condition needs at least one entry")
	}
	if len(c.Any) > MaxConditions {
		return cc, invalidAt("any", "an any-of condition has %d entries; at most %d", len(c.Any), MaxConditions)
	}
	var costly error
	cc.anyOf = make([]compiledCond, 0, len(c.Any))
	for j, sub := range c.Any {
		at := listField("any", j)
		if sub.Any != nil {
			return cc, invalidAt(at+".any", "any-of conditions do not nest: an entry of an any-of condition is a condition with an attribute, op and value (rules' conditions are all of, any-of one level within them)")
		}
		sc, err := compileCondition(sub, inSegment)
		if err != nil {
			if !sc.costly {
				return compiledCond{op: opAny}, within(err, at)
			}
			if costly == nil {
				costly = within(err, at)
			}
		}
		cc.insts += sc.insts
		cc.anyOf = append(cc.anyOf, sc)
	}
	if costly != nil {
		cc.costly = true
	}
	return cc, costly
}

// checks is how many condition checks c counts toward MaxConditionChecks
// before its segments are known: an any-of condition its entries, any
// other 1.
func (c Condition) checks() int { return max(1, len(c.Any)) }

// holdsAny reports whether one entry of the any-of condition c holds.
func (c *compiledCond) holdsAny(ctx Context, user string) bool {
	for i := range c.anyOf {
		if c.anyOf[i].holds(ctx, user) {
			return true
		}
	}
	return false
}

// compileFold prepares cc, compiled from c, to ignore case: it refuses
// ignore_case on an operator or value that does not take it, and lowers
// cc's string (or list) once.
func compileFold(c Condition, cc *compiledCond) error {
	if !foldOps[c.Op] {
		return invalidAt("ignore_case", "ignore_case applies to eq, neq, in, not_in, starts_with, ends_with and contains, not to %s", c.Op)
	}
	if (cc.op == opEq || cc.op == opNeq) && cc.kind != kindString {
		return invalidAt("ignore_case", "ignore_case applies to string values: %s on attribute %q compares a %s", c.Op, c.Attribute, map[valueKind]string{kindNumber: "number", kindBool: "boolean"}[cc.kind])
	}
	cc.fold = true
	cc.str = strings.ToLower(cc.str)
	cc.bstr = []byte(cc.str)
	if cc.list != nil {
		for i, s := range cc.list {
			cc.list[i] = strings.ToLower(s)
		}
		slices.Sort(cc.list)
		cc.list = slices.Compact(cc.list)
		if cc.set != nil {
			cc.set = make(map[string]struct{}, len(cc.list))
			for _, s := range cc.list {
				cc.set[s] = struct{}{}
			}
		}
	}
	return nil
}

// holdsFolded is holdsString for a condition that ignores case: s is
// lowered into a buffer on the stack when it is ASCII (its own bytes when
// it has no upper case letter), else by strings.ToLower.
func (c *compiledCond) holdsFolded(s string) bool {
	var buf [MaxContextValueLen]byte
	var b []byte
	if lower, ok := lowerASCII(buf[:0], s); ok {
		b = lower
	} else {
		b = []byte(strings.ToLower(s))
	}
	switch c.op {
	case opEq, opNeq:
		return string(b) == c.str
	case opIn, opNotIn:
		if c.set == nil {
			for _, e := range c.list {
				if string(b) == e {
					return true
				}
			}
			return false
		}
		_, found := c.set[string(b)]
		return found
	case opStartsWith:
		return bytes.HasPrefix(b, c.bstr)
	case opEndsWith:
		return bytes.HasSuffix(b, c.bstr)
	case opContains:
		return bytes.Contains(b, c.bstr)
	}
	return false
}

// lowerASCII appends s in lower case to dst when s is ASCII and fits in
// dst's capacity; else false.
func lowerASCII(dst []byte, s string) ([]byte, bool) {
	if len(s) > cap(dst) {
		return nil, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return nil, false
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst, true
}

// CompactConditions returns a deep copy of cs whose values (and any-of
// entries' values) are compact JSON (see CompactJSON): the form in which
// conditions are stored.
func CompactConditions(cs []Condition) []Condition {
	cs = cloneConditions(cs)
	for i := range cs {
		cs[i].Value = CompactJSON(cs[i].Value)
		if cs[i].Any != nil {
			cs[i].Any = CompactConditions(cs[i].Any)
		}
	}
	return cs
}
