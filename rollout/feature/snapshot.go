package feature

import (
	"maps"
	"slices"
	"sync/atomic"
)

// Snapshot is every feature at one moment, ready for evaluation. It is
// immutable: writers build a new Snapshot and swap it in, so any number of
// readers use one without locking and never see half a change.
type Snapshot struct {
	features map[string]*Compiled
	keys     []string // sorted
	// revision is the store revision the snapshot has caught up with:
	// every commit up to it is in (later ones may be too).
	revision int64
	// targeted counts the features whose evaluation reads the context;
	// costly those that are Costly.
	targeted, costly int
	// segments are every segment, by key, compiled; features compiled
	// with the snapshot use them.
	segments map[string]*CompiledSegment
	// served is shared by every snapshot derived from this one (With,
	// At, WithSegments): see ServedHook.
	served *ServedHook
}

// ServedHook holds a function told of each evaluation a snapshot serves
// (not of peeks), or nil. One ServedHook is shared by a snapshot and every
// snapshot derived from it, so that setting it once reaches those still
// to come. It costs an evaluation one atomic load while nil.
type ServedHook struct {
	fn atomic.Pointer[ServedFunc]
}

// ServedFunc is told that c served user outcome o. It runs on the
// evaluation's goroutine: it must be quick and safe for concurrent use.
type ServedFunc func(c *Compiled, user string, o *Outcome)

// Set makes fn the function told of evaluations (nil: none).
func (h *ServedHook) Set(fn ServedFunc) {
	if fn == nil {
		h.fn.Store(nil)
		return
	}
	h.fn.Store(&fn)
}

// ServedHook returns the hook of s and the snapshots derived from it.
func (s *Snapshot) ServedHook() *ServedHook { return s.served }

// tell tells the hook, if any, that c served user o, and returns o.
func (s *Snapshot) tell(c *Compiled, user string, o *Outcome) *Outcome {
	if s.served == nil {
		return o
	}
	if fn := s.served.fn.Load(); fn != nil {
		(*fn)(c, user, o)
	}
	return o
}

// withSegments returns a copy of s with segments (features unchanged).
func (s *Snapshot) WithSegments(segments map[string]*CompiledSegment) *Snapshot {
	next := *s
	next.segments = segments
	return &next
}

func newSnapshot(features map[string]*Compiled, revision int64) *Snapshot {
	n, costly := 0, 0
	for _, c := range features {
		if c.usesContext() {
			n++
		}
		if c.costly() {
			costly++
		}
	}
	return &Snapshot{features: features, keys: slices.Sorted(maps.Keys(features)), revision: revision, targeted: n, costly: costly, served: &ServedHook{}}
}

// CostlyEvaluation is the cost above which an evaluation is costly: the
// condition checks and pattern instructions of a feature's rules (with
// its segments'), which bound one evaluation's work (MaxConditionChecks,
// MaxFeaturePatternInsts). An ordinary feature's rules come to a few
// dozen; a server may run costly evaluations apart, on fewer cores.
const CostlyEvaluation = 100

// Costly reports whether an evaluation of the feature key may cost more
// than CostlyEvaluation.
func (s *Snapshot) Costly(key string) bool {
	if s.costly == 0 {
		return false
	}
	c, ok := s.features[key]
	return ok && (c.costly() || c.prereqs != nil && s.prereqCostly(c, 0))
}

// AnyCostly reports whether any feature is Costly.
func (s *Snapshot) AnyCostly() bool { return s.costly > 0 }

// UsesContext reports whether evaluating the feature key reads the
// context's attributes (it has rules or a bucket_by): callers may skip
// reading a context that nothing would read.
func (s *Snapshot) UsesContext(key string) bool {
	c, ok := s.features[key]
	return ok && c.usesContext()
}

// usesContext reports whether an evaluation of c may read the context:
// its rules or bucket_by do, or its prerequisites' may.
func (c *Compiled) usesContext() bool { return c.targeting != nil || c.prereqs != nil }

// Static reports whether the feature key serves every user and context
// the same outcome (Outcome.Static): it can be evaluated without a user.
func (s *Snapshot) Static(key string) bool {
	c, ok := s.features[key]
	return ok && c.static
}

// AnyUsesContext reports whether any feature's evaluation reads the
// context's attributes.
func (s *Snapshot) AnyUsesContext() bool { return s.targeted > 0 }

// Revision returns the store revision the snapshot has caught up with.
func (s *Snapshot) Revision() int64 { return s.revision }

// at returns s caught up with revision.
func (s *Snapshot) At(revision int64) *Snapshot {
	next := *s
	next.revision = revision
	return &next
}

// with returns a copy of s in which c replaces the feature of its key, or
// the key is removed when c is nil. The sorted keys are shared with s when
// they stay the same, and otherwise copied with the one change made, not
// sorted again.
func (s *Snapshot) With(key string, c *Compiled) *Snapshot {
	features := maps.Clone(s.features)
	keys := s.keys
	old, had := s.features[key]
	targeted, costly := s.targeted, s.costly
	if had && old.usesContext() {
		targeted--
	}
	if c != nil && c.usesContext() {
		targeted++
	}
	if had && old.costly() {
		costly--
	}
	if c != nil && c.costly() {
		costly++
	}
	i, _ := slices.BinarySearch(keys, key)
	switch {
	case c == nil && had:
		delete(features, key)
		keys = slices.Delete(slices.Clone(keys), i, i+1)
	case c != nil && !had:
		features[key] = c
		keys = slices.Insert(slices.Clip(keys), i, key) // a new array: cap is len
	case c != nil:
		features[key] = c
	}
	return &Snapshot{features: features, keys: keys, revision: s.revision, targeted: targeted, costly: costly, segments: s.segments, served: s.served}
}

// Evaluate returns the bucket the feature key serves user, or an ENotFound
// error. It reads only memory.
func (s *Snapshot) Evaluate(key, user string) (Evaluation, error) {
	c, ok := s.features[key]
	if !ok {
		return Evaluation{}, NotFound(key)
	}
	return s.tell(c, user, s.serve(c, user, nil)).Evaluation(user), nil
}

// EvaluateContext is Evaluate with the attributes of an evaluation's
// context, which the feature's rules and bucket_by read: overrides by user
// ID, then the first rule whose conditions hold, then the ring. A feature
// without rules or bucket_by ignores ctx and costs what Evaluate costs.
// ctx is only read, never kept.
func (s *Snapshot) EvaluateContext(key, user string, ctx Context) (Evaluation, error) {
	c, ok := s.features[key]
	if !ok {
		return Evaluation{}, NotFound(key)
	}
	return s.tell(c, user, s.serve(c, user, ctx)).Evaluation(user), nil
}

// EvaluateOutcomeContext is EvaluateOutcome with the attributes of a
// context (see EvaluateContext).
func (s *Snapshot) EvaluateOutcomeContext(key, user string, ctx Context) (*Outcome, error) {
	c, ok := s.features[key]
	if !ok {
		return nil, NotFound(key)
	}
	return s.tell(c, user, s.serve(c, user, ctx)), nil
}

// PeekContext is Peek with the attributes of a context.
func (s *Snapshot) PeekContext(key, user string, ctx Context) (Evaluation, error) {
	c, ok := s.features[key]
	if !ok {
		return Evaluation{}, NotFound(key)
	}
	return s.peek(c, user, ctx), nil
}

// EvaluateOutcome is Evaluate for callers that keep what they derive from
// an evaluation with its outcome (see Outcome.Memo): the outcome the feature
// key serves user, counted as Evaluate counts it, or an ENotFound error.
func (s *Snapshot) EvaluateOutcome(key, user string) (*Outcome, error) {
	c, ok := s.features[key]
	if !ok {
		return nil, NotFound(key)
	}
	return s.tell(c, user, s.serve(c, user, nil)), nil
}

// Peek is Evaluate for looking, not serving: the evaluation is not counted
// among the feature's exposures. The dashboard's samples and user look-ups
// use it, so that they never skew what apps were observed to get.
func (s *Snapshot) Peek(key, user string) (Evaluation, error) {
	c, ok := s.features[key]
	if !ok {
		return Evaluation{}, NotFound(key)
	}
	return s.peek(c, user, nil), nil
}

// Keys returns the keys of all features, sorted. The slice is shared: do not
// modify it.
func (s *Snapshot) Keys() []string { return s.keys }

// Len returns the number of features.
func (s *Snapshot) Len() int { return len(s.keys) }

// Feature returns the current configuration of the feature key. In a
// snapshot decoded from a sync document (DecodeSync, ApplySync) it has no
// description, timestamps or overrides: the sync form carries overrides by
// the hash of their user only.
func (s *Snapshot) Feature(key string) (Feature, bool) {
	c, ok := s.features[key]
	if !ok {
		return Feature{}, false
	}
	return c.feature.Clone(), true
}

// Shares returns the exact share of users each bucket of the feature's ring
// gets, whether or not the feature is enabled.
func (s *Snapshot) Shares(key string) (map[string]float64, bool) {
	c, ok := s.features[key]
	if !ok {
		return nil, false
	}
	return maps.Clone(c.shares), true
}

// Segments returns every segment of the snapshot, ordered by key.
func (s *Snapshot) Segments() []Segment {
	out := make([]Segment, 0, len(s.segments))
	for _, key := range slices.Sorted(maps.Keys(s.segments)) {
		out = append(out, s.segments[key].segment.Clone())
	}
	return out
}

// Segment returns the segment key.
func (s *Snapshot) Segment(key string) (Segment, bool) {
	c, ok := s.segments[key]
	if !ok {
		return Segment{}, false
	}
	return c.segment.Clone(), true
}

// SegmentUsers returns the keys of the features whose rules use the
// segment key, sorted.
func (s *Snapshot) SegmentUsers(key string) []string {
	var out []string
	for _, k := range s.keys {
		if slices.Contains(s.features[k].feature.Segments(), key) {
			out = append(out, k)
		}
	}
	return out
}

// NotFound is the ENotFound *Error of the feature key, which does not exist.
func NotFound(key string) error {
	return Errorf(ENotFound, "feature %q does not exist", key)
}

// Compiled returns the compiled feature key, or nil when s has none.
func (s *Snapshot) Compiled(key string) *Compiled { return s.features[key] }

// CompiledSegments returns every segment of s, compiled, by key. The map
// is shared: do not modify it (copy it, then WithSegments).
func (s *Snapshot) CompiledSegments() map[string]*CompiledSegment { return s.segments }

// NewSnapshotOf returns a snapshot at a store revision of features,
// compiled with segments (see Compile), one per key.
func NewSnapshotOf(features []*Compiled, segments map[string]*CompiledSegment, revision int64) *Snapshot {
	all := make(map[string]*Compiled, len(features))
	for _, c := range features {
		all[c.feature.Key] = c
	}
	snap := newSnapshot(all, revision)
	snap.segments = segments
	return snap
}
