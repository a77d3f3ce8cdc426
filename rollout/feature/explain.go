package feature

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Answers that explain themselves: Snapshot.Explain says why a feature
// serves a user what it does, step by step as evaluation goes — the kill
// switch, each prerequisite, an override, each rule tried with each of
// its conditions (matched, and why: "plan: attribute absent",
// "email: case differs", "app_version: 4.3 is a number, semver_gte
// needs a string"), then the ring. It is a peek: nothing is counted. It
// costs several times an evaluation and allocates, so servers bound how
// many features one request explains (see the API's MaxExplainFeatures).

// Explanation is why a feature serves a user what it does.
type Explanation struct {
	// Disabled: the kill switch is off, and nothing else was tested.
	Disabled      bool                      `json:"disabled,omitempty"`
	Prerequisites []PrerequisiteExplanation `json:"prerequisites"`
	// Override is the bucket a per-user override serves ("": none).
	Override string            `json:"override,omitempty"`
	Rules    []RuleExplanation `json:"rules"`
	// Ring is how the ring placed the user, when no rule served.
	Ring *RingExplanation `json:"ring,omitempty"`
	// Served is the evaluation explained.
	Bucket *string `json:"bucket"`
	Reason string  `json:"reason"`
}

// PrerequisiteExplanation is one prerequisite tested.
type PrerequisiteExplanation struct {
	Feature string   `json:"feature"`
	Buckets []string `json:"buckets"`
	Served  *string  `json:"served"` // what the prerequisite serves the user
	Passed  bool     `json:"passed"`
	Why     string   `json:"why"`
}

// RuleExplanation is one rule tried, in order, up to the one that served.
type RuleExplanation struct {
	Name       string                 `json:"name"`
	Matched    bool                   `json:"matched"`
	Conditions []ConditionExplanation `json:"conditions"`
	Why        string                 `json:"why,omitempty"`
}

// ConditionExplanation is one condition of a rule tested.
type ConditionExplanation struct {
	Attribute string          `json:"attribute,omitempty"`
	Op        string          `json:"op,omitempty"`
	Value     json.RawMessage `json:"value,omitempty"`
	Matched   bool            `json:"matched"`
	Why       string          `json:"why"`
}

// RingExplanation is how the ring placed the user.
type RingExplanation struct {
	BucketBy string  `json:"bucket_by"` // the attribute hashed; "" for the user ID
	Value    string  `json:"value"`     // what was hashed
	Bucket   *string `json:"bucket"`
	Why      string  `json:"why"`
}

// Explain says why the feature key serves user what it does in ctx (see
// Explanation), or an ENotFound error. Nothing is counted.
func (s *Snapshot) Explain(key, user string, ctx Context) (Explanation, error) {
	c, ok := s.features[key]
	if !ok {
		return Explanation{}, NotFound(key)
	}
	ev := s.peek(c, user, ctx)
	x := Explanation{Prerequisites: []PrerequisiteExplanation{}, Rules: []RuleExplanation{}, Reason: ev.Reason}
	if ev.Bucket != "" {
		x.Bucket = &ev.Bucket
	}
	f := &c.feature
	if !f.Enabled {
		x.Disabled = true
		return x, nil
	}
	budget := MaxPrerequisiteEvaluations
	for _, p := range c.prereqs {
		pe := PrerequisiteExplanation{Feature: p.key, Buckets: slices.Clone(p.buckets)}
		pc := s.features[p.key]
		if pc == nil {
			pe.Why = "feature " + p.key + " does not exist here: the prerequisite fails"
			x.Prerequisites = append(x.Prerequisites, pe)
			return x, nil
		}
		budget--
		got := pc.outcomes[s.assign(pc, user, ctx, 1, &budget)].Bucket
		pe.Passed = got != "" && slices.Contains(p.buckets, got)
		if got != "" {
			pe.Served = &got
		}
		switch {
		case got == "":
			pe.Why = p.key + " serves no bucket; it must serve " + strings.Join(p.buckets, " or ")
		case pe.Passed:
			pe.Why = p.key + " serves " + got
		default:
			pe.Why = p.key + " serves " + got + ", not " + strings.Join(p.buckets, " or ")
		}
		x.Prerequisites = append(x.Prerequisites, pe)
		if !pe.Passed {
			return x, nil
		}
	}
	if ev.Reason == ReasonOverride {
		x.Override = ev.Bucket
		return x, nil
	}
	if t := c.targeting; t != nil {
		for i := range t.rules {
			r := &t.rules[i]
			re := RuleExplanation{Name: r.name, Matched: true, Conditions: make([]ConditionExplanation, len(r.conds))}
			for j := range r.conds {
				src := f.Rules[i].Conditions[j]
				ok, why := r.conds[j].explain(ctx, user)
				re.Conditions[j] = ConditionExplanation{Attribute: src.Attribute, Op: src.Op, Value: src.Value, Matched: ok, Why: why}
				if src.Any != nil {
					re.Conditions[j].Op = "any"
				}
				re.Matched = re.Matched && ok
			}
			if re.Matched && ev.Rule != r.name {
				// The rule serves the ring by an attribute the context lacks.
				re.Matched, re.Why = false, "its conditions hold, but "+r.bucketBy+" is absent: the rule hashes it"
			}
			x.Rules = append(x.Rules, re)
			if re.Matched {
				return x, nil
			}
		}
	}
	by := ""
	if c.targeting != nil {
		by = c.targeting.bucketBy
	}
	rx := &RingExplanation{BucketBy: by, Bucket: x.Bucket}
	switch {
	case by == "":
		rx.Value, rx.Why = user, "the ring places the user ID"
	case ev.Reason == ReasonDefault:
		rx.Why = by + ": attribute absent: the ring cannot place the user, and the feature serves its fallback"
		if x.Bucket == nil {
			rx.Why = by + ": attribute absent: the ring cannot place the user, and the feature serves no bucket"
		}
	default:
		rx.Value, rx.Why = showValue(ctx[by]), "the ring places "+by
	}
	x.Ring = rx
	return x, nil
}

// explain is holds, with why it holds or not, in words.
func (c *compiledCond) explain(ctx Context, user string) (bool, string) {
	switch c.op {
	case opNever:
		return false, "never holds: past the feature's limits on conditions or patterns"
	case opInSegment:
		if c.seg == nil {
			return false, "segment " + c.segKey + " does not exist"
		}
		if c.seg.users != nil {
			if c.holds(ctx, user) {
				return true, "in user list " + c.segKey
			}
			return false, "not in user list " + c.segKey
		}
		for i := range c.seg.conds {
			if ok, why := c.seg.conds[i].explain(ctx, user); !ok {
				return false, "not in segment " + c.segKey + ": " + why
			}
		}
		return true, "in segment " + c.segKey
	case opAny:
		whys := make([]string, 0, len(c.anyOf))
		for i := range c.anyOf {
			ok, why := c.anyOf[i].explain(ctx, user)
			if ok {
				return true, "holds: " + why
			}
			whys = append(whys, why)
		}
		return false, "no entry holds: " + strings.Join(whys, "; ")
	}
	holds := c.holds(ctx, user)
	name := opName(c.op)
	v, present := ctx[c.attr]
	switch {
	case !present:
		return holds, c.attr + ": attribute absent"
	case v == nil:
		return holds, c.attr + ": attribute has no value"
	case c.op == opPresent || c.op == opAbsent:
		return holds, c.attr + ": attribute present"
	}
	if !holds {
		if why := c.mismatch(v, name); why != "" {
			return false, c.attr + ": " + why
		}
		if s, ok := v.(string); ok && !c.fold && c.caseDiffers(s) {
			return false, c.attr + ": case differs"
		}
	}
	verb := name
	if !holds {
		verb = "not " + name
	}
	return holds, fmt.Sprintf("%s: %s %s %s", c.attr, showValue(v), verb, c.shown())
}

// mismatch says why v's type cannot satisfy c (op named name), or "".
func (c *compiledCond) mismatch(v any, name string) string {
	_, isString := v.(string)
	_, isBool := v.(bool)
	_, isList := v.([]string)
	n, isNumber := number(v)
	kind := "a string"
	switch {
	case isNumber:
		kind = "a number"
	case isBool:
		kind = "a boolean"
	case isList:
		kind = "a list"
	case !isString:
		kind = fmt.Sprintf("a %T", v)
	}
	switch c.op {
	case opStartsWith, opEndsWith, opContains, opMatches, opSemverLt, opSemverLte, opSemverEq, opSemverGte, opSemverGt:
		if !isString && !isList {
			return fmt.Sprintf("%s is %s, %s needs a string", showValue(v), kind, name)
		}
	case opLt, opLte, opGt, opGte:
		if isBool || isList {
			return fmt.Sprintf("%s is %s, %s needs a number", showValue(v), kind, name)
		}
		if s, ok := v.(string); ok {
			if _, err := strconv.ParseFloat(s, 64); err != nil {
				return fmt.Sprintf("%s is not a number, %s needs one", showValue(v), name)
			}
		}
	case opBefore, opAfter:
		if isBool || isList {
			return fmt.Sprintf("%s is %s, %s needs an RFC 3339 time or seconds since 1970", showValue(v), kind, name)
		}
	case opEq, opNeq:
		switch {
		case c.kind == kindNumber && isString:
			if _, err := strconv.ParseFloat(v.(string), 64); err != nil {
				return fmt.Sprintf("%s is a string, not a number, and %s compares the number %s", showValue(v), name, c.str)
			}
		case c.kind == kindBool && isNumber:
			return fmt.Sprintf("%v is a number, %s compares a boolean", n, name)
		}
	}
	if s, ok := v.(string); ok {
		switch c.op {
		case opSemverLt, opSemverLte, opSemverEq, opSemverGte, opSemverGt:
			if _, ok := parseSemver(s); !ok {
				return fmt.Sprintf("%s is not a semantic version", showValue(v))
			}
		case opBefore, opAfter:
			if _, err := time.Parse(time.RFC3339, s); err != nil {
				return fmt.Sprintf("%s is not an RFC 3339 time", showValue(v))
			}
		}
	}
	return ""
}

// caseDiffers reports whether s would satisfy c, which does not ignore
// case, if it did.
func (c *compiledCond) caseDiffers(s string) bool {
	ls, lc := strings.ToLower(s), strings.ToLower(c.str)
	switch c.op {
	case opEq:
		return c.kind == kindString && ls == lc
	case opIn:
		return slices.ContainsFunc(c.list, func(e string) bool { return strings.EqualFold(e, s) })
	case opStartsWith:
		return strings.HasPrefix(ls, lc)
	case opEndsWith:
		return strings.HasSuffix(ls, lc)
	case opContains:
		return strings.Contains(ls, lc)
	}
	return false
}

// shown is c's value in words.
func (c *compiledCond) shown() string {
	switch {
	case c.list != nil || c.op == opIn || c.op == opNotIn:
		return "[" + Abbreviate(strings.Join(c.list, ", ")) + "]"
	case c.op == opLt || c.op == opLte || c.op == opGt || c.op == opGte || c.kind == kindNumber && (c.op == opEq || c.op == opNeq):
		return strconv.FormatFloat(c.num, 'g', -1, 64)
	case c.kind == kindBool && (c.op == opEq || c.op == opNeq):
		return c.str
	}
	return strconv.Quote(Abbreviate(c.str))
}

// showValue is a context value in words: strings quoted, numbers in
// their shortest form, lists in brackets.
func showValue(v any) string {
	switch x := v.(type) {
	case string:
		return strconv.Quote(Abbreviate(x))
	case bool:
		return strconv.FormatBool(x)
	case []string:
		return "[" + Abbreviate(strings.Join(x, ", ")) + "]"
	case nil:
		return "nothing"
	}
	if n, ok := number(v); ok {
		return strconv.FormatFloat(n, 'g', -1, 64)
	}
	return fmt.Sprintf("a %T", v)
}

// opName is the name of op as rules give it.
func opName(op ruleOp) string {
	for name, code := range opCodes {
		if code == op {
			return name
		}
	}
	return "?"
}
