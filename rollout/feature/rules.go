package feature

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// Targeting: a feature's rules decide, from the attributes of an
// evaluation's context, which users a feature serves one bucket or its ring;
// a segment is a named set of conditions that rules of any feature use
// ("in_segment"). Evaluation order: overrides by user ID, then the first
// rule whose conditions all hold, then the ring, hashing the feature's
// BucketBy attribute (or the user ID when it is empty).

// Operators of a Condition.
const (
	OpEq         = "eq"
	OpNeq        = "neq"
	OpIn         = "in"
	OpNotIn      = "not_in"
	OpStartsWith = "starts_with"
	OpEndsWith   = "ends_with"
	OpContains   = "contains"
	OpMatches    = "matches" // RE2, at most MaxPatternBytes and MaxPatternInsts (pattern.go)
	OpLt         = "lt"      // numbers
	OpLte        = "lte"
	OpGt         = "gt"
	OpGte        = "gte"
	OpSemverLt   = "semver_lt"
	OpSemverLte  = "semver_lte"
	OpSemverEq   = "semver_eq"
	OpSemverGte  = "semver_gte"
	OpSemverGt   = "semver_gt"
	OpBefore     = "before" // RFC 3339
	OpAfter      = "after"
	OpPresent    = "present" // no value
	OpAbsent     = "absent"  // no value
	OpInSegment  = "in_segment"
)

// Operators lists every operator, in the order the documentation gives them.
var Operators = []string{
	OpEq, OpNeq, OpIn, OpNotIn, OpStartsWith, OpEndsWith, OpContains, OpMatches,
	OpLt, OpLte, OpGt, OpGte, OpSemverLt, OpSemverLte, OpSemverEq, OpSemverGte, OpSemverGt,
	OpBefore, OpAfter, OpPresent, OpAbsent, OpInSegment,
}

// Limits of targeting, so that no rule can cost unbounded memory or time.
const (
	MaxRules           = 100   // rules of one feature
	MaxConditions      = 20    // conditions of one rule or segment
	MaxListValues      = 1000  // entries of an "in"/"not_in" list
	MaxConditionString = 256   // one string of a condition's value
	MaxPatternBytes    = 256   // a "matches" regular expression
	MaxAttributeBytes  = 64    // an attribute's name
	MaxSegments        = 1000  // segments in all
	MaxTargetingBytes  = 65536 // a feature's rules (or a segment's conditions) as JSON
	MaxContextAttrs    = 64    // attributes of one evaluation's context
	MaxContextValueLen = 1024  // one string value of a context attribute
)

var (
	attributePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.:-]{0,63}$`)
	ruleNamePattern  = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
)

// Condition is one test of a context attribute. Value is JSON whose shape
// the operator decides: a string for eq, neq, starts_with, ends_with,
// contains, matches, before, after, the semver operators and in_segment
// (the segment's key); a string, number or boolean for eq and neq; a list
// of strings for in and not_in; a number for lt, lte, gt, gte; none for
// present and absent.
//
// IgnoreCase compares strings in lower case (eq, neq, in, not_in,
// starts_with, ends_with and contains, on string values): "bob@Example.COM"
// ends with "@example.com". A condition that holds Any alone is an any-of
// condition (anyof.go): it holds when one of its entries does; its entries
// are conditions of the other kinds (any-of does not nest).
type Condition struct {
	Attribute  string          `json:"attribute,omitempty"` // none for in_segment
	Op         string          `json:"op,omitempty"`        // none for an any-of condition
	Value      json.RawMessage `json:"value,omitempty"`
	IgnoreCase bool            `json:"ignore_case,omitempty"`
	Any        []Condition     `json:"any,omitempty"`
}

// Serve is what a matching rule serves: one bucket, the feature's ring, or
// a split of the rule's population (split.go), the last two hashing
// BucketBy when it is set, else the feature's BucketBy, else the user ID.
// SplitRing is the split's planned ring, which the server sets.
type Serve struct {
	Bucket    string             `json:"bucket,omitempty"`
	Ring      bool               `json:"ring,omitempty"`
	Split     map[string]float64 `json:"split,omitempty"`
	BucketBy  string             `json:"bucket_by,omitempty"`
	SplitRing []SplitBucket      `json:"split_ring,omitempty"`
}

// Rule is one entry of a feature's ordered rules: when every condition
// holds, the rule serves what Serve says. Name identifies the rule within
// the feature (unique; the evaluation's metadata names it).
type Rule struct {
	Name       string      `json:"name"`
	Conditions []Condition `json:"conditions"`
	Serve      Serve       `json:"serve"`
}

// Segment is a named, reusable set of conditions, all of which must hold,
// or, when List is set, a list of users (userlist.go): its Size users,
// whose IDs the store keeps apart from the configuration, and no
// conditions. A Segment value is a configuration at one version.
type Segment struct {
	Key         string      `json:"key"`
	Description string      `json:"description"`
	Conditions  []Condition `json:"conditions"`
	List        bool        `json:"list,omitempty"`
	Size        int         `json:"size,omitempty"`
	Version     int         `json:"version"`
	CreatedAt   time.Time   `json:"created_at"`
	UpdatedAt   time.Time   `json:"updated_at"`
}

// SegmentVersion is one entry of a segment's history.
type SegmentVersion struct {
	Version int       `json:"version"`
	Actor   string    `json:"actor"`
	Time    time.Time `json:"time"`
	Summary string    `json:"summary"`
	Comment string    `json:"comment,omitempty"`
	Config  Segment   `json:"config"`
}

// Context is the attributes of one evaluation besides the user ID: each
// value a string, a float64 (or another Go number), a bool or a []string.
type Context map[string]any

// validAttribute reports whether name can be a condition's attribute or a
// bucket_by.
func validAttribute(name string) bool {
	return len(name) <= MaxAttributeBytes && attributePattern.MatchString(name)
}

// ValidRuleName reports whether name can name a rule.
func ValidRuleName(name string) bool {
	return ruleNamePattern.MatchString(name) && utf8.ValidString(name)
}

// Tag names a segment's configuration at one version, for If-Match.
func (s Segment) Tag() string { return "segment-" + strconv.Itoa(s.Version) }

// CloneRules returns a deep copy of rules (nil for nil), each rule's
// conditions a list (not nil) and their values compact (CompactJSON).
func CloneRules(rules []Rule) []Rule {
	if rules == nil {
		return nil
	}
	out := make([]Rule, len(rules))
	for i, r := range rules {
		r.Conditions = CompactConditions(r.Conditions)
		r.Serve = r.Serve.Clone()
		if r.Conditions == nil {
			r.Conditions = []Condition{}
		}
		out[i] = r
	}
	return out
}

// Clone returns a deep copy of s, its conditions a list (not nil) even when
// it has none.
func (s Segment) Clone() Segment {
	s.Conditions = cloneConditions(s.Conditions)
	if s.Conditions == nil {
		s.Conditions = []Condition{}
	}
	return s
}

// cloneConditions returns a deep copy of cs: their values and any-of
// entries.
func cloneConditions(cs []Condition) []Condition {
	cs = slices.Clone(cs)
	for i := range cs {
		cs[i].Value = slices.Clone(cs[i].Value)
		if cs[i].Any != nil {
			cs[i].Any = cloneConditions(cs[i].Any)
		}
	}
	return cs
}
