package feature

import (
	"encoding/json"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/rollout/rollout/ring"
	"github.com/rollout/rollout/rollout/feature/hll"
)

// Reasons for an evaluation's result.
const (
	ReasonRing     = "ring"     // the user's position on the feature's ring
	ReasonOverride = "override" // a per-user override
	ReasonDisabled = "disabled" // the kill switch is off: the fallback, or no bucket
)

// Evaluation is the bucket a feature serves one user. Bucket is "" and Value
// nil when the feature serves no bucket (disabled without a fallback).
type Evaluation struct {
	Feature string
	User    string
	Bucket  string
	Value   json.RawMessage
	Version int
	Reason  string
	// Rule names the rule that served (Reason ReasonTargetingMatch).
	Rule string
	// Prerequisite names the prerequisite that failed (Reason
	// ReasonPrerequisiteFailed).
	Prerequisite string
	// Static: the feature's answer cannot depend on the user or context
	// (one bucket and no rules or overrides, or disabled).
	Static bool
	// Single: served by a ring of one serving bucket, in a feature whose
	// rules or overrides serve others what it does not: the feature's
	// default answer (OFREP's DEFAULT, as flagd's default variant).
	Single bool
}

// OpenFeatureReason is the reason of e as OpenFeature and its remote
// evaluation protocol (OFREP) name it, the one mapping that the server's
// OFREP API and the OpenFeature provider share:
//
//   - STATIC: the feature's answer cannot depend on the user or context
//     (enabled, one bucket with all of the ring, no rules, no overrides);
//   - TARGETING_MATCH: a rule served (Rule names it), or an override;
//   - SPLIT: the user's place on a ring of several buckets, or in a
//     rule's split (Rule names it);
//   - DEFAULT: the ring's one serving bucket, behind rules or overrides that
//     did not apply (OpenFeature's default variant; Single), or what the
//     feature serves when the context lacks its bucket_by attribute, or
//     when a prerequisite fails (the fallback);
//   - DISABLED: the kill switch is off;
//   - UNKNOWN: a Reason it does not know.
func (e Evaluation) OpenFeatureReason() string {
	switch e.Reason {
	case ReasonRing:
		switch {
		case e.Static:
			return "STATIC"
		case e.Single:
			return "DEFAULT"
		}
		return "SPLIT"
	case ReasonOverride, ReasonTargetingMatch:
		return "TARGETING_MATCH"
	case ReasonSplit:
		return "SPLIT"
	case ReasonDefault, ReasonPrerequisiteFailed:
		return "DEFAULT"
	case ReasonDisabled:
		return "DISABLED"
	}
	return "UNKNOWN"
}

// Outcome is what one configuration of a feature serves a user, but for
// the user ID: its bucket, value, version and why. A configuration has few
// outcomes (each bucket by the ring, each by an override, and what it
// serves when disabled), all made when it is compiled, and every
// evaluation with the same bucket and reason has the same one.
type Outcome struct {
	Feature string
	Bucket  string // "" when the feature serves no bucket; Value is nil then
	Value   json.RawMessage
	Version int
	Reason  string
	Rule    string // the rule that served, for ReasonTargetingMatch
	// Prerequisite is the prerequisite that failed, for
	// ReasonPrerequisiteFailed.
	Prerequisite string
	// Static: every user and context gets this outcome of the
	// configuration (OFREP's STATIC; see Evaluation.Static).
	Static bool
	Single bool // see Evaluation.Single
	// Memo is the caller's, to keep what it derives from the outcome (the
	// API keeps the outcome's encoded answers there). It lasts as long as
	// the configuration: a change of the feature makes new outcomes.
	Memo atomic.Value

	bucket int // ring order of Bucket, or the number of buckets for none
}

// Evaluation returns the evaluation of o for user.
func (o *Outcome) Evaluation(user string) Evaluation {
	return Evaluation{Feature: o.Feature, User: user, Bucket: o.Bucket, Value: o.Value, Version: o.Version, Reason: o.Reason, Rule: o.Rule, Prerequisite: o.Prerequisite, Static: o.Static, Single: o.Single}
}

// Compiled is a feature at one version made ready for evaluation: its ring
// built, its values encoded, its rules and segments compiled, and a counter
// of the evaluations served per outcome. Everything but the counters is
// immutable once built; it is safe for concurrent use.
type Compiled struct {
	feature Feature
	ring    *ring.Ring
	// prefix is what the user ID is hashed after: the salt and ":", or
	// nothing when the salt is empty.
	prefix string
	// overridePrefix is what the user ID is hashed after to find its
	// override: prefix, or the key and ":" when the salt is empty, so that
	// an override's hash is salted even then (see OverrideHash).
	overridePrefix string
	// splitPrefix is what the user ID is hashed after in a rule's split
	// (see split.go).
	splitPrefix string
	// overrides are the per-user overrides by the hash of the user (see
	// OverrideHash): bucket ring order. Built from the feature's
	// overrides on a server; a client gets the hashes only.
	overrides map[ring.Position]int
	fallback  int               // ring order of the fallback bucket; -1: none
	names     []string          // bucket names in ring order (sorted)
	values    []json.RawMessage // by ring order
	index     map[string]int    // bucket name → ring order
	shares    map[string]float64
	// served counts evaluations per outcome, by their index in outcomes:
	// each outcome has one bucket and one rule ("" for the ring, an
	// override or the default), so the counts per bucket and per rule are
	// sums of these (see take).
	served []atomic.Int64
	// users are the distinct users each outcome served since the last
	// take, sketched (see count and users.go).
	users []userSketch
	// outcomes are the outcomes by the ring in ring order, then by an
	// override in ring order, then the one served when disabled (see
	// assign).
	outcomes []Outcome
	// targeting is the compiled rules and bucket_by; nil for a feature
	// without either, which evaluates by the user ID alone (assign).
	targeting *targeting
	// static: every evaluation gets the same outcome (Outcome.Static).
	static bool
	// prereqs are the feature's prerequisites (nil: none), whose outcomes
	// start at prereqBase in outcomes, one each (see prerequisite.go).
	prereqs    []compiledPrereq
	prereqBase int

	// sync is the feature's sync form, encoded once (see syncForm).
	sync     sync.Once
	syncJSON []byte
	syncSum  [syncSumSize]byte
}

// compile makes f ready for evaluation, its overrides keyed by the hash of
// their user.
func compile(f Feature) *Compiled { return Compile(f, nil) }

// Compile makes f, a valid configuration (or one valid as stored, see
// Feature.ValidateStored), ready for evaluation, its overrides keyed by the
// hash of their user, the segments of its in_segment conditions looked up
// in segments (a segment not there never holds; nil: none).
func Compile(f Feature, segments map[string]*CompiledSegment) *Compiled {
	c := compileRing(f)
	if len(f.Overrides) > 0 {
		c.overrides = make(map[ring.Position]int, len(f.Overrides))
		for user, bucket := range f.Overrides {
			c.overrides[userPosition(c.overridePrefix, user)] = c.index[bucket]
		}
	}
	c.finish(segments)
	return c
}

// finish compiles c's targeting, once its ring and overrides are made, and
// marks its outcomes static when they are.
func (c *Compiled) finish(segments map[string]*CompiledSegment) {
	c.compileTargeting(segments)
	c.compilePrerequisites()
	c.served = make([]atomic.Int64, len(c.outcomes))
	c.users = make([]userSketch, len(c.outcomes))
	if c.static {
		for i := range c.outcomes {
			c.outcomes[i].Static = true
		}
		return
	}
	served := 0
	for _, share := range c.shares {
		if share > 0 {
			served++
		}
	}
	if served == 1 {
		for i := range c.names { // the ring's outcomes come first
			c.outcomes[i].Single = true
		}
	}
}

// compileRing is compile without the overrides.
func compileRing(f Feature) *Compiled {
	c := &Compiled{feature: f, ring: f.Ring(), fallback: -1}
	if f.Salt != "" {
		c.prefix = f.Salt + ":"
	}
	c.overridePrefix = overridePrefix(f.Key, f.Salt)
	c.splitPrefix = splitPrefix(f.Key, f.Salt)
	buckets := c.ring.Buckets()
	c.names = make([]string, len(buckets))
	c.values = make([]json.RawMessage, len(buckets))
	c.index = make(map[string]int, len(buckets))
	for i, b := range buckets {
		c.names[i] = b.Name
		c.index[b.Name] = i
		fb, _ := f.Bucket(b.Name)
		c.values[i] = fb.ServedValue()
	}
	if f.Fallback != "" {
		c.fallback = c.index[f.Fallback]
	}
	c.shares = c.ring.Shares()
	n := len(buckets)
	c.outcomes = make([]Outcome, 2*n+1)
	for i := range c.outcomes {
		o := &c.outcomes[i]
		o.Feature, o.Version = f.Key, f.Version
		switch {
		case i < n:
			o.Reason, o.bucket = ReasonRing, i
		case i < 2*n:
			o.Reason, o.bucket = ReasonOverride, i-n
		case c.fallback >= 0:
			o.Reason, o.bucket = ReasonDisabled, c.fallback
		default:
			o.Reason, o.bucket = ReasonDisabled, n
		}
		if o.bucket < n {
			o.Bucket, o.Value = c.names[o.bucket], c.values[o.bucket]
		}
	}
	return c
}

// evaluateInto writes into e the bucket c serves user, and counts it. It
// does not allocate for user IDs that fit, with the salt, in 192 bytes (see
// userPosition).
func (c *Compiled) evaluateInto(e *Evaluation, user string) {
	*e = c.serve(user).Evaluation(user)
}

// serve returns the outcome c serves user, and counts it.
func (c *Compiled) serve(user string) *Outcome {
	var i int
	if c.targeting == nil { // today's path, untouched by targeting
		i = c.assign(user)
	} else {
		i = c.assignContext(user, nil)
	}
	c.count(i, user)
	return &c.outcomes[i]
}

// count counts one evaluation of outcome i for user: the evaluations and
// the distinct users each outcome served. It is the one place evaluations
// are counted: every path that serves a user (not a peek) calls it once
// per feature it evaluates. It does not allocate, but for a user sketch's
// first use after a take (see users.go).
func (c *Compiled) count(i int, user string) {
	c.served[i].Add(1)
	c.users[i].insert(hll.Hash(user))
}

// serveContext is serve with the attributes of a context.
func (c *Compiled) serveContext(user string, ctx Context) *Outcome {
	var i int
	if c.targeting == nil {
		i = c.assign(user)
	} else {
		i = c.assignContext(user, ctx)
	}
	c.count(i, user)
	return &c.outcomes[i]
}

// peek is what c serves user, not counted.
func (c *Compiled) peek(user string) Evaluation {
	return c.outcomes[c.assignContext(user, nil)].Evaluation(user)
}

// peekContext is peek with the attributes of a context.
func (c *Compiled) peekContext(user string, ctx Context) Evaluation {
	return c.outcomes[c.assignContext(user, ctx)].Evaluation(user)
}

// ServedRing is the ring of what c serves: its own when enabled, else see
// Feature.ServedRing.
func (c *Compiled) ServedRing() *ring.Ring {
	if c.feature.Enabled {
		return c.ring
	}
	return c.feature.ServedRing()
}

// assign returns the index in c.outcomes of what c serves user. An
// override is found by the hash of the user, which is the user's position
// on the ring when the feature has a salt: then a look-up hashes once,
// overridden or not.
func (c *Compiled) assign(user string) int {
	n := len(c.names)
	if !c.feature.Enabled {
		return 2 * n
	}
	pos := userPosition(c.prefix, user)
	if c.overrides != nil {
		h := pos
		if len(c.overridePrefix) != len(c.prefix) { // no salt: the key salts the hash
			h = userPosition(c.overridePrefix, user)
		}
		if b, ok := c.overrides[h]; ok {
			return n + b
		}
	}
	i, _ := c.ring.LookupIndex(pos)
	return i
}

// overridePrefix is what a feature's overrides hash the user ID after: the
// salt and ":", or, for a feature without a salt, its key and ":".
func overridePrefix(key, salt string) string {
	if salt == "" {
		return key + ":"
	}
	return salt + ":"
}

// OverrideHash returns the hash under which the sync API keys an override
// of user on a feature with that key and salt: the MD5 of the salt, ":"
// and the user ID (the user's position on the feature's ring), or, when
// the salt is empty, of the key, ":" and the user ID, as 32 hex digits.
func OverrideHash(key, salt, user string) string {
	return positionHex(userPosition(overridePrefix(key, salt), user))
}

// userPosition is the position of user on a ring whose salt makes prefix
// (see Compiled.prefix): the hash of salt + ":" + user, or of the bare user
// ID when the salt is empty, as the reference ring hashes keys. It does not
// allocate for IDs that fit, with the prefix, in 192 bytes.
func userPosition(prefix, user string) ring.Position {
	return ring.HashPrefixed(prefix, user)
}

// Feature returns the configuration c was compiled from. It shares its
// buckets, overrides and rules with c: Clone it to change it.
func (c *Compiled) Feature() Feature { return c.feature }

// Shares returns the exact share of users each bucket of c's ring gets,
// whether or not the feature is enabled. The map is the caller's.
func (c *Compiled) Shares() map[string]float64 { return maps.Clone(c.shares) }

// ReportFrom returns the churn report of the change from before (nil: the
// feature's creation, every user moving from no bucket) to c.
func (c *Compiled) ReportFrom(before *Compiled) Report { return newReport(before, c) }
