package document

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"slices"
	"strconv"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// keepSlack is how close a document's share must be to the bucket's exact
// share for the bucket to keep its replicas: an exported share is the
// exact one, which float64 text round-trips.
const keepSlack = 1e-12

// Plan actions of a feature (FeatureChange.Action).
const (
	ActionCreate = "create"
	ActionUpdate = "update"
	ActionNone   = "none"
)

// Plan is what a document would change: a FeatureChange for every
// feature it lists, in its order.
type Plan struct {
	Changes []FeatureChange `json:"changes"`
	// TotalChurn is the sum of the features' churns, each a fraction of
	// that feature's users (a new feature's is 1).
	TotalChurn float64 `json:"total_churn"`
	// Changed counts the features and segments that change (create or
	// update).
	Changed int `json:"changed"`
	// Revision is the revision of the snapshot the plan read.
	Revision int64 `json:"revision"`
	// Versions are the versions the plan read, by feature (0: the
	// feature does not exist): what POST /api/apply checks.
	Versions map[string]int `json:"versions"`
	// Unlisted are the server's features the document does not list,
	// which it leaves alone.
	Unlisted []string `json:"unlisted"`
	// Document is the document with every bucket's replicas as planned:
	// applying it makes exactly this plan's changes.
	Document Document `json:"document"`
	// Applied reports that the changes were stored (ApplyDocument).
	Applied bool `json:"applied"`
	// Segments are what the document changes in each segment it lists,
	// in its order.
	Segments []SegmentChange `json:"segments"`
	// SegmentVersions are the versions of the document's segments the
	// plan read (0: the segment does not exist): what POST /api/apply
	// checks, as Versions for features.
	SegmentVersions map[string]int `json:"segment_versions"`
}

// SegmentChange is what a document changes in one segment.
type SegmentChange struct {
	Segment     string `json:"segment"`
	Action      string `json:"action"` // ActionCreate, ActionUpdate or ActionNone
	FromVersion int    `json:"from_version"`
	ToVersion   int    `json:"to_version"`
	// Fields are what changes: description, conditions.
	Fields []string `json:"fields"`
	// Conditions are the segment's conditions after the change, in words.
	Conditions string `json:"conditions"`
	// Features are the keys of the features that use the segment after
	// the change (sorted): a change of the segment makes a new version
	// of each (they are among the plan's changes).
	Features []string `json:"features"`

	target feature.Segment
}

// After is the segment as the change leaves it (its version ToVersion).
func (c SegmentChange) After() feature.Segment { return c.target }

// FeatureChange is what a document changes in one feature.
type FeatureChange struct {
	Feature     string `json:"feature"`
	Action      string `json:"action"` // ActionCreate, ActionUpdate or ActionNone
	FromVersion int    `json:"from_version"`
	ToVersion   int    `json:"to_version"`
	// Fields are the fields that change: buckets, values, description,
	// enabled, fallback, overrides, salt, tags, owner.
	Fields []string `json:"fields"`
	// Churn and Moves are the report's: the exact fraction of users that
	// change bucket, from which to which.
	Churn float64        `json:"churn"`
	Moves []feature.Move `json:"moves"`
	// CrossMoves are the moves between buckets that had users before and
	// still have after, out of one that does not shrink or into one that
	// does not grow: they switch users between running variants. A change
	// without any is nested (users move only into growing buckets, out of
	// shrinking ones).
	CrossMoves []feature.Move   `json:"cross_moves"`
	CrossChurn float64          `json:"cross_churn"`
	Nested     bool             `json:"nested"`
	RangeChurn float64          `json:"range_churn"`
	Buckets    []feature.Bucket `json:"buckets"`
	// Rules are the populations whose bucket a change of rules (or of a
	// segment the rules use) changes, in words: the report's Rules, as
	// POST /api/features/K/preview gives them.
	Rules []feature.PopulationChange `json:"rules"`
	// Plan summarizes the planner's search when the document gave shares
	// that the feature's replicas did not already serve.
	Plan   *BucketPlan    `json:"plan,omitempty"`
	Report feature.Report `json:"report"`

	target *feature.Compiled // the feature after the change
	cur    *feature.Compiled // before (nil: created)
}

// Before is the feature before the change, compiled; nil when the change
// creates it.
func (c FeatureChange) Before() *feature.Compiled { return c.cur }

// After is the feature as the change leaves it, compiled with the
// segments as the plan leaves them (its version ToVersion).
func (c FeatureChange) After() *feature.Compiled { return c.target }

// BucketPlan is the planner's search for a feature's shares.
type BucketPlan struct {
	Mode            string  `json:"mode"`
	Tolerance       float64 `json:"tolerance"`
	MaxError        float64 `json:"max_error"`
	WithinTolerance bool    `json:"within_tolerance"`
	CutShort        bool    `json:"cut_short"`
	CutReason       string  `json:"cut_reason,omitempty"`
	// Replanned reports that the plan first made a ring too coarse for
	// its tolerance finer, which moves users once (see Plan.Replanned).
	Replanned bool `json:"replanned,omitempty"`
}

// planSegments returns the changes of d's segments against snap's, and
// the segments after them.
func planSegments(snap *feature.Snapshot, d Document) ([]SegmentChange, map[string]*feature.CompiledSegment, error) {
	out := make([]SegmentChange, 0, len(d.Segments))
	segs, cloned := snap.CompiledSegments(), false
	added := 0
	for i, sg := range d.Segments {
		next := sg.segment()
		ch := SegmentChange{Segment: sg.Key, Action: ActionNone, Fields: []string{}, Conditions: feature.DescribeConditions(next.Conditions), Features: []string{}}
		if sg.List {
			ch.Conditions = "a user list (its users are kept on the server)"
		}
		cur, ok := snap.CompiledSegments()[sg.Key]
		switch {
		case !ok:
			ch.Action, ch.Fields, ch.ToVersion = ActionCreate, []string{"created"}, 1
			next.Version = 1
			added++
		case cur.Segment().List && !sg.List:
			return nil, nil, errorf(fmt.Sprintf("segments[%d]", i), "segment %q is a user list on the server: name it with list: true and no conditions (a document refers to a list; its users change through the API)", sg.Key)
		case !cur.Segment().List && sg.List:
			return nil, nil, errorf(fmt.Sprintf("segments[%d]", i), "segment %q is a segment of conditions on the server, not a user list: give its conditions, without list: true", sg.Key)
		default:
			ch.FromVersion, ch.ToVersion = cur.Segment().Version, cur.Segment().Version
			next.Version, next.CreatedAt, next.UpdatedAt = cur.Segment().Version, cur.Segment().CreatedAt, cur.Segment().UpdatedAt
			next.Size = cur.Segment().Size // a list's users stay as they are
			if cur.Segment().Description != next.Description {
				ch.Fields = append(ch.Fields, "description")
			}
			if !feature.SameConditions(cur.Segment().Conditions, next.Conditions) {
				ch.Fields = append(ch.Fields, "conditions")
			}
			if len(ch.Fields) > 0 {
				ch.Action, ch.ToVersion = ActionUpdate, cur.Segment().Version+1
				next.Version = ch.ToVersion
			} else {
				next = cur.Segment().Clone()
			}
		}
		if err := next.Validate(); err != nil {
			return nil, nil, placed(fmt.Sprintf("segments[%d]", i), err)
		}
		ch.target = next
		if ch.Action != ActionNone {
			if !cloned {
				segs, cloned = maps.Clone(snap.CompiledSegments()), true
			}
			segs[sg.Key] = feature.CompileSegmentAfter(next, snap.CompiledSegments()[sg.Key])
		}
		out = append(out, ch)
	}
	if added > 0 && len(segs) > feature.MaxSegments {
		return nil, nil, errorf("segments", "there would be %d segments; at most %d", len(segs), feature.MaxSegments)
	}
	return out, segs, nil
}

// segmentPopulation is the population a change of segment sc changes in a
// feature that uses it, as UpdateSegment words it.
func segmentPopulation(sc SegmentChange) feature.PopulationChange {
	return feature.PopulationChange{When: "in segment " + sc.Segment, From: "segment version " + strconv.Itoa(sc.FromVersion), To: "segment version " + strconv.Itoa(sc.ToVersion),
		Text: fmt.Sprintf("users matching in segment %s: as segment version %d said → as version %d says (%s)", sc.Segment, sc.FromVersion, sc.ToVersion, feature.Abbreviate(sc.Conditions))}
}

// Plan returns what applying d would change, against the features and
// segments of snap, after checking d (Validate). Shares that a feature's
// replicas do not already serve are planned as POST /api/features/K/plan
// plans them (ModeAuto, opts's budget, stopping when ctx ends); a plan
// that cannot come within its tolerance is an EInvalid error.
func (d Document) Plan(ctx context.Context, snap *feature.Snapshot, opts plan.Options) (Plan, error) {
	if err := d.Validate(); err != nil {
		return Plan{}, err
	}
	p := Plan{Changes: make([]FeatureChange, 0, len(d.Features)), Revision: snap.Revision(),
		Versions: make(map[string]int, len(d.Features)), Unlisted: []string{},
		Document: Document{Features: make([]Feature, 0, len(d.Features)), Segments: []Segment{}}}
	if err := d.CheckSegments(snap.CompiledSegments()); err != nil {
		return Plan{}, err
	}
	sch, segs, err := planSegments(snap, d)
	if err != nil {
		return Plan{}, err
	}
	p.Segments, p.SegmentVersions = sch, make(map[string]int, len(sch))
	changedSegs := map[string]SegmentChange{}
	for _, sc := range sch {
		p.SegmentVersions[sc.Segment] = sc.FromVersion
		p.Document.Segments = append(p.Document.Segments, Segment{Key: sc.Segment, Description: sc.target.Description, Conditions: sc.target.Conditions, List: sc.target.List})
		if sc.Action == ActionUpdate {
			changedSegs[sc.Segment] = sc
		}
	}
	// usesChanged lists the changed segments f uses.
	usesChanged := func(f feature.Feature) []SegmentChange {
		var out []SegmentChange
		for _, key := range f.Segments() {
			if sc, ok := changedSegs[key]; ok {
				out = append(out, sc)
			}
		}
		return out
	}
	listed := make(map[string]bool, len(d.Features))
	for i, df := range d.Features {
		// A client that left wants no plan: stop between features (a
		// search ends by itself when ctx does; the rest does not).
		if errors.Is(context.Cause(ctx), context.Canceled) {
			return Plan{}, fmt.Errorf("%w: %w", feature.Errorf(feature.EUnavailable, "the plan stopped: its request ended"), context.Cause(ctx))
		}
		listed[df.Key] = true
		at := fmt.Sprintf("features[%d]", i)
		ch, err := planFeature(ctx, snap.Compiled(df.Key), df, opts, segs)
		if e, ok := errors.AsType[*feature.Error](err); ok && e.Field != "" {
			return Plan{}, placed(at, err)
		} else if err != nil {
			return Plan{}, fmt.Errorf("%s (%s): %w", at, df.Key, err)
		}
		if used := usesChanged(ch.target.Feature()); len(used) > 0 && ch.cur != nil {
			if ch.Action == ActionNone {
				ch = segmentBump(ch, segs)
			}
			for _, sc := range used {
				ch.Rules = append(ch.Rules, segmentPopulation(sc))
				ch.Report.Rules = ch.Rules
			}
		}
		p.Versions[df.Key] = ch.FromVersion
		if ch.Action != ActionNone {
			p.Changed++
			p.TotalChurn += ch.Churn
		}
		if ch.Action != ActionNone {
			if err := ch.target.CheckPatterns(); err != nil {
				return Plan{}, placed(at, err)
			}
		}
		resolved := df
		resolved.Buckets = make([]Bucket, len(ch.Buckets))
		for j, b := range ch.Buckets {
			r := b.Replicas
			resolved.Buckets[j] = Bucket{Name: b.Name, Replicas: &r, Value: b.Value}
		}
		resolved.Salt = ch.target.Feature().Salt
		p.Document.Features = append(p.Document.Features, resolved)
		p.Changes = append(p.Changes, ch)
	}
	for _, key := range snap.Keys() {
		if !listed[key] {
			p.Unlisted = append(p.Unlisted, key)
			// A feature the document leaves alone still gets a new
			// version when a segment its rules use changes.
			cur := snap.Compiled(key)
			if used := usesChanged(cur.Feature()); len(used) > 0 {
				ch := FeatureChange{Feature: key, Action: ActionNone, Fields: []string{}, FromVersion: cur.Feature().Version, cur: cur, target: cur}
				ch = segmentBump(ch, segs)
				if err := ch.target.CheckPatterns(); err != nil {
					return Plan{}, errorf("segments", "feature %q, which the document leaves as it is, uses segment(s) it changes and would pass the limit of its patterns: %s", key, feature.ErrorMessage(err))
				}
				for _, sc := range used {
					ch.Rules = append(ch.Rules, segmentPopulation(sc))
				}
				ch.Report.Rules = ch.Rules
				p.Versions[key] = ch.FromVersion
				p.Changed++
				p.TotalChurn += ch.Churn
				p.Changes = append(p.Changes, ch)
			}
		}
	}
	if err := checkPrerequisites(snap, p.Changes); err != nil {
		return Plan{}, err
	}
	for i, sc := range p.Segments {
		for _, ch := range p.Changes {
			if slices.Contains(ch.target.Feature().Segments(), sc.Segment) {
				p.Segments[i].Features = append(p.Segments[i].Features, ch.Feature)
			}
		}
		slices.Sort(p.Segments[i].Features)
		if sc.Action != ActionNone {
			p.Changed++
		}
	}
	return p, nil
}

// segmentBump makes ch, a feature the document leaves as it is, a new
// version because a segment its rules use changes.
func segmentBump(ch FeatureChange, segs map[string]*feature.CompiledSegment) FeatureChange {
	next := ch.cur.Feature().Clone()
	next.Version = ch.cur.Feature().Version + 1
	ch.Action, ch.Fields, ch.ToVersion = ActionUpdate, []string{"segments"}, next.Version
	ch.target = feature.Compile(next, segs)
	rep := ch.target.ReportFrom(ch.cur)
	ch.Report, ch.Churn, ch.Moves, ch.RangeChurn, ch.Buckets = rep, rep.Churn, rep.Moves, rep.RangeChurn, next.Buckets
	ch.CrossMoves, ch.CrossChurn = crossMoves(rep)
	ch.Nested = len(ch.CrossMoves) == 0
	ch.Rules = []feature.PopulationChange{}
	return ch
}

// planFeature plans df against cur (nil: no such feature yet).
func planFeature(ctx context.Context, cur *feature.Compiled, df Feature, opts plan.Options, segs map[string]*feature.CompiledSegment) (FeatureChange, error) {
	ch := FeatureChange{Feature: df.Key, Action: ActionNone, Fields: []string{}, Moves: []feature.Move{}, CrossMoves: []feature.Move{}, Rules: []feature.PopulationChange{}, cur: cur}
	var next feature.Feature
	if cur != nil {
		next = cur.Feature().Clone()
		ch.FromVersion = cur.Feature().Version
	} else {
		next = feature.Feature{Key: df.Key, Salt: df.Key}
	}
	buckets, bp, err := docBuckets(ctx, cur, df, opts)
	if err != nil {
		return FeatureChange{}, err
	}
	ch.Plan = bp
	next.Buckets = buckets
	next.Description, next.Fallback = df.Description, df.Fallback
	next.Enabled = df.Enabled == nil || *df.Enabled
	if df.Salt != "" {
		next.Salt = df.Salt
	}
	next.Overrides = maps.Clone(df.Overrides)
	if next.Overrides == nil {
		next.Overrides = map[string]string{}
	}
	next.Rules, next.BucketBy = nil, df.BucketBy
	if len(df.Rules) > 0 {
		next.Rules = feature.CloneRules(df.Rules)
	}
	var before feature.Feature
	if cur != nil {
		before = cur.Feature()
	}
	if err := plan.Splits(before, &next); err != nil {
		return FeatureChange{}, err
	}
	next.Prerequisites = feature.ClonePrerequisites(df.Prerequisites)
	next.Tags, next.Owner = nil, df.Owner
	if len(df.Tags) > 0 {
		next.Tags = slices.Clone(df.Tags)
	}
	if cur != nil {
		ch.Fields = changedFields(cur.Feature(), next)
		if len(ch.Fields) == 0 {
			ch.ToVersion, ch.Buckets, ch.target = cur.Feature().Version, cur.Feature().Buckets, cur
			ch.Report = feature.Report{FromVersion: cur.Feature().Version, ToVersion: cur.Feature().Version, Method: feature.MethodExact,
				Moves: []feature.Move{}, SharesBefore: cur.Shares(), SharesAfter: cur.Shares()}
			ch.Nested = true
			return ch, nil
		}
		ch.Action = ActionUpdate
	} else {
		ch.Action, ch.Fields = ActionCreate, []string{"created"}
	}
	if err := next.Validate(); err != nil {
		return FeatureChange{}, err
	}
	next.Version = ch.FromVersion + 1
	ch.ToVersion = next.Version
	ch.target = feature.Compile(next, segs)
	rep := ch.target.ReportFrom(cur)
	ch.Report, ch.Churn, ch.Moves, ch.RangeChurn, ch.Buckets = rep, rep.Churn, rep.Moves, rep.RangeChurn, next.Buckets
	if len(rep.Rules) > 0 {
		ch.Rules = slices.Clone(rep.Rules)
	}
	ch.CrossMoves, ch.CrossChurn = crossMoves(rep)
	ch.Nested = len(ch.CrossMoves) == 0
	return ch, nil
}

// docBuckets returns the buckets df asks for: its replicas as given; or
// the current replicas when its shares are the feature's exact shares; or
// else the planner's replicas for its shares. Values are df's, but a value
// equal as JSON to the current one keeps the current text.
func docBuckets(ctx context.Context, cur *feature.Compiled, df Feature, opts plan.Options) ([]feature.Bucket, *BucketPlan, error) {
	values := make(map[string]json.RawMessage, len(df.Buckets))
	for _, b := range df.Buckets {
		v := feature.CompactJSON(b.Value)
		if cur != nil {
			if cb, ok := cur.Feature().Bucket(b.Name); ok && sameJSON(cb.Value, v) {
				v = cb.Value
			}
		}
		values[b.Name] = v
	}
	withValues := func(bs []feature.Bucket) []feature.Bucket {
		out := make([]feature.Bucket, 0, len(bs))
		for _, b := range bs {
			if v, ok := values[b.Name]; ok {
				out = append(out, feature.Bucket{Name: b.Name, Replicas: b.Replicas, Value: v})
			}
		}
		return out
	}
	if df.Buckets[0].Replicas != nil {
		out := make([]feature.Bucket, len(df.Buckets))
		for i, b := range df.Buckets {
			out[i] = feature.Bucket{Name: b.Name, Replicas: *b.Replicas}
		}
		return withValues(out), nil, nil
	}
	targets := make(map[string]float64, len(df.Buckets))
	for _, b := range df.Buckets {
		targets[b.Name] = *b.Share
	}
	if cur != nil && keepsShares(cur, targets) {
		return withValues(cur.Feature().Buckets), nil, nil
	}
	if opts.Mode == "" {
		opts.Mode = plan.ModeAuto
	}
	if df.Tolerance != 0 {
		opts.Tolerance = df.Tolerance
	}
	var p plan.Plan
	var err error
	if cur == nil {
		for _, b := range df.Buckets {
			opts.Order = append(opts.Order, b.Name)
		}
		p, err = plan.NewContext(ctx, targets, opts)
	} else {
		for _, b := range cur.Feature().Buckets {
			if _, ok := targets[b.Name]; !ok {
				targets[b.Name] = 0 // left out of the document: removed
			}
		}
		p, err = plan.ForContext(ctx, cur.Feature().Buckets, targets, opts)
	}
	switch {
	case err != nil:
		return nil, nil, err
	case !p.WithinTolerance && p.CutShort:
		return nil, nil, feature.Errorf(feature.EInvalid, "the planner stopped (%s) before it came within tolerance %v of the shares (closest: max error %v): give the feature a larger tolerance, or replicas, or plan fewer features at once", p.CutReason, p.Tolerance, p.MaxError)
	case !p.WithinTolerance:
		return nil, nil, feature.Errorf(feature.EInvalid, "no replica counts within the limits come within tolerance %v of the shares (closest: max error %v): give the feature a larger tolerance (such as 0.01), or replicas", p.Tolerance, p.MaxError)
	}
	bp := &BucketPlan{Mode: p.Mode, Tolerance: p.Tolerance, MaxError: p.MaxError, WithinTolerance: p.WithinTolerance, CutShort: p.CutShort, CutReason: p.CutReason, Replanned: p.Replanned}
	planned := withValues(p.Buckets)
	// A bucket the document lists with share 0 that the plan left out
	// is kept with 0 replicas, so that the document plans to no change
	// once applied.
	for _, b := range df.Buckets {
		if !slices.ContainsFunc(planned, func(pb feature.Bucket) bool { return pb.Name == b.Name }) {
			planned = append(planned, feature.Bucket{Name: b.Name, Value: values[b.Name]})
		}
	}
	return planned, bp, nil
}

// keepsShares reports whether targets are cur's exact shares, bucket for
// bucket (a bucket missing on either side has share 0).
func keepsShares(cur *feature.Compiled, targets map[string]float64) bool {
	for _, b := range cur.Feature().Buckets {
		if _, ok := targets[b.Name]; !ok {
			return false
		}
	}
	for name, t := range targets {
		if _, ok := cur.Feature().Bucket(name); !ok {
			return false
		}
		if math.Abs(cur.Shares()[name]-t) > keepSlack {
			return false
		}
	}
	return true
}

// changedFields lists what differs between a and b.
func changedFields(a, b feature.Feature) []string {
	out := []string{}
	add := func(changed bool, name string) {
		if changed {
			out = append(out, name)
		}
	}
	add(!slices.EqualFunc(a.Buckets, b.Buckets, func(x, y feature.Bucket) bool { return x.Name == y.Name && x.Replicas == y.Replicas }), "buckets")
	add(!slices.EqualFunc(a.Buckets, b.Buckets, func(x, y feature.Bucket) bool { return bytes.Equal(x.Value, y.Value) }) && len(a.Buckets) == len(b.Buckets), "values")
	add(a.Description != b.Description, "description")
	add(a.Enabled != b.Enabled, "enabled")
	add(a.Fallback != b.Fallback, "fallback")
	add(a.Salt != b.Salt, "salt")
	add(!maps.Equal(a.Overrides, b.Overrides), "overrides")
	add(!slices.EqualFunc(a.Rules, b.Rules, feature.SameRule), "rules")
	add(a.BucketBy != b.BucketBy, "bucket_by")
	add(!feature.SamePrerequisites(a.Prerequisites, b.Prerequisites), "prerequisites")
	add(!slices.Equal(a.Tags, b.Tags), "tags")
	add(a.Owner != b.Owner, "owner")
	if len(a.Buckets) != len(b.Buckets) && !slices.Contains(out, "buckets") {
		out = append(out, "buckets")
	}
	return out
}

// crossMoves returns the moves of rep between buckets that had users
// before and have users after, out of a bucket that does not shrink or
// into one that does not grow, and their total.
func crossMoves(rep feature.Report) ([]feature.Move, float64) {
	out := []feature.Move{}
	var total float64
	for _, m := range rep.Moves {
		fb, fa := rep.SharesBefore[m.From], rep.SharesAfter[m.From]
		tb, ta := rep.SharesBefore[m.To], rep.SharesAfter[m.To]
		if m.From == "" || m.To == "" || fb == 0 || ta == 0 || tb == 0 && fa == 0 {
			continue
		}
		if fa >= fb || ta <= tb {
			out = append(out, m)
			total += m.Share
		}
	}
	return out, total
}

// sameJSON reports whether a and b are the same JSON value: objects equal
// whatever the order of their members, numbers equal by value. Empty is
// no value, equal only to empty.
func sameJSON(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	da, db := json.NewDecoder(bytes.NewReader(a)), json.NewDecoder(bytes.NewReader(b))
	da.UseNumber()
	db.UseNumber()
	if da.Decode(&x) != nil || db.Decode(&y) != nil {
		return false
	}
	return sameValue(x, y)
}

func sameValue(x, y any) bool {
	switch x := x.(type) {
	case map[string]any:
		y, ok := y.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := y.([]any)
		return ok && slices.EqualFunc(x, y, sameValue)
	case json.Number:
		y, ok := y.(json.Number)
		if !ok {
			return false
		}
		fx, _, ex := big.ParseFloat(string(x), 10, 256, big.ToNearestEven)
		fy, _, ey := big.ParseFloat(string(y), 10, 256, big.ToNearestEven)
		return ex == nil && ey == nil && fx.Cmp(fy) == 0
	}
	return x == y
}

// checkPrerequisites refuses a plan after which the prerequisites of a
// feature it changes would not fit the features (the server's, as the
// plan leaves them): see feature.CheckPrerequisites.
func checkPrerequisites(snap *feature.Snapshot, changes []FeatureChange) error {
	after := make(map[string]feature.Feature, len(changes))
	keys := slices.Clone(snap.Keys())
	for _, ch := range changes {
		after[ch.Feature] = ch.target.Feature()
		if snap.Compiled(ch.Feature) == nil {
			keys = append(keys, ch.Feature)
		}
	}
	lookup := func(k string) (feature.Feature, bool) {
		if f, ok := after[k]; ok {
			return f, true
		}
		if c := snap.Compiled(k); c != nil {
			return c.Feature(), true
		}
		return feature.Feature{}, false
	}
	for i, ch := range changes {
		f := ch.target.Feature()
		if len(f.Prerequisites) == 0 || !slices.Contains(ch.Fields, "prerequisites") && ch.Action != ActionCreate {
			continue
		}
		if err := feature.CheckPrerequisites(f, keys, lookup); err != nil {
			return placed(fmt.Sprintf("features[%d]", i), err)
		}
	}
	return nil
}
