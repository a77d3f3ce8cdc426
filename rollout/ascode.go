package rollout

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
	"strings"

	"github.com/google/uuid"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// Rollouts as code. A Document is the features of a server written down as
// a file (YAML or JSON, one schema): each feature's buckets with their
// shares (or replicas), values, overrides, kill switch, fallback,
// description, tags and owner. Service.PlanDocument compares a document
// with what the server holds and tells, feature by feature, what would
// change and its exact churn; Service.ApplyDocument makes every change of
// the document as one batch of versions (Store.ApplyBatch), each checked
// against the version its plan read, or none of them. ExportDocument
// writes a snapshot as a document, which plans to no change.
//
// A document is declarative about the features it lists: a field it leaves
// out takes its default (no description, no overrides, enabled), except
// the salt, which a listed feature keeps. Features of the server that it
// does not list are left alone (the plan names them as Unlisted).

// Limits of a document.
const (
	// MaxDocumentBytes bounds a document's encoding, as a file and as a
	// request body.
	MaxDocumentBytes = 5 << 20
	// MaxDocumentFeatures bounds how many features one document lists.
	MaxDocumentFeatures = 1000
)

// shareSumSlack is how far from 1, per bucket, a feature's shares may sum
// (as targets in a plan's mode may: 3 × 0.3333 for thirds).
const shareSumSlack = plan.RoundedSumSlack

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

// Document is a features file.
type Document struct {
	Features []DocFeature `json:"features"`
	// Segments are targeting's named sets of conditions (see Segment):
	// the document's are created or updated; the server's that it does
	// not list are left alone.
	Segments []DocSegment `json:"segments"`
}

// DocSegment is a segment of a document.
type DocSegment struct {
	Key         string              `json:"key"`
	Description string              `json:"description,omitempty"`
	Conditions  []feature.Condition `json:"conditions,omitempty"`
}

// DocFeature is one feature of a document.
type DocFeature struct {
	Key         string `json:"key"`
	Description string `json:"description,omitempty"`
	// Enabled is the kill switch: true when left out.
	Enabled  *bool  `json:"enabled,omitempty"`
	Fallback string `json:"fallback,omitempty"`
	// Salt keys the feature's users: left out, a feature keeps its own,
	// and a new one gets its key (as POST /api/features gives it).
	Salt    string      `json:"salt,omitempty"`
	Buckets []DocBucket `json:"buckets"`
	// Tolerance is how far a planned bucket's share may miss the share
	// the document gives it (see PlanOptions.Tolerance); 0: the plan
	// endpoint's default.
	Tolerance float64           `json:"tolerance,omitempty"`
	Overrides map[string]string `json:"overrides,omitempty"`
	Rules     []feature.Rule    `json:"rules,omitempty"`
	BucketBy  string            `json:"bucket_by,omitempty"`
	Tags      []string          `json:"tags,omitempty"`
	Owner     string            `json:"owner,omitempty"`
}

// DocBucket is a bucket of a document's feature: its share of users (0 to
// 1) or its replicas, and its value (any JSON; none: the bucket's name).
type DocBucket struct {
	Name     string          `json:"name"`
	Share    *float64        `json:"share,omitempty"`
	Replicas *int            `json:"replicas,omitempty"`
	Value    json.RawMessage `json:"value,omitempty"`
}

// DocumentError is what is wrong with a document, at a place in it: Path
// is a YAML path such as $.features[2].buckets[0].share, which the command
// line turns into a line of the file. It wraps an EInvalid *Error whose
// Field is the same place as the API names it
// (features[2].buckets[0].share, `features[0].overrides["u1"]`), and whose
// message starts with it.
type DocumentError struct {
	Path string
	Err  *feature.Error
}

func (e *DocumentError) Error() string { return e.Err.Error() }
func (e *DocumentError) Unwrap() error { return e.Err }

// docErrorf returns a *DocumentError at field, a place in the document
// (features[2].buckets[0].share).
func docErrorf(field, format string, args ...any) *DocumentError {
	return docError(feature.Errorf(feature.EInvalid, format, args...).Within(field))
}

// docError returns e, whose Field is a place in the document, as a
// *DocumentError.
func docError(e *feature.Error) *DocumentError {
	return &DocumentError{Path: yamlPath(e.Field), Err: e}
}

// placed returns err, what feature's validation says of a feature or a
// segment (its Field a place within it), at its place in the document:
// within at (features[2], segments[0]). Any other error is returned as it
// is.
func placed(at string, err error) error {
	e, ok := errors.AsType[*feature.Error](err)
	if !ok {
		return err
	}
	return docError(e.Within(at))
}

// yamlPath returns field, a place in the document, as a YAML path: a map
// key quoted as Go quotes it (`overrides["u1"]`) is quoted as YAML paths
// quote keys (overrides.'u1').
func yamlPath(field string) string {
	var b strings.Builder
	b.WriteString("$.")
	for {
		i := strings.Index(field, `["`)
		if i < 0 {
			b.WriteString(field)
			return b.String()
		}
		b.WriteString(field[:i])
		q, err := strconv.QuotedPrefix(field[i+1:])
		if err != nil {
			b.WriteString(field[i:])
			return b.String()
		}
		key, _ := strconv.Unquote(q)
		b.WriteString(".'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(key) + "'")
		field = strings.TrimPrefix(field[i+1+len(q):], "]")
	}
}

// Validate reports the first thing wrong with d that needs no server to
// see, as a *DocumentError: each feature and segment as feature's
// validation sees them (Feature.Validate, Segment.Validate), at their
// place in the document, and what only a document has: the features and
// segments listed once, each bucket's share (from 0 to 1, summing to
// 100 %) or replicas, a feature's tolerance. Whether an in_segment names
// a segment that exists needs the server: see planDocument.
func (d Document) Validate() error {
	if d.Features == nil {
		return docErrorf("features", `the document lists no features: give "features: []" for none`)
	}
	if len(d.Features) > MaxDocumentFeatures {
		return docErrorf("features", "the document lists %d features; at most %d: split it", len(d.Features), MaxDocumentFeatures)
	}
	if len(d.Segments) > feature.MaxSegments {
		return docErrorf("segments", "the document lists %d segments; at most %d", len(d.Segments), feature.MaxSegments)
	}
	segs := make(map[string]int, len(d.Segments))
	for i, sg := range d.Segments {
		at := fmt.Sprintf("segments[%d]", i)
		if j, ok := segs[sg.Key]; ok {
			return docErrorf(at+".key", "segment %q is listed twice (segments[%d] too): list each segment once", sg.Key, j)
		}
		segs[sg.Key] = i
		if err := sg.segment().Validate(); err != nil {
			return placed(at, err)
		}
	}
	seen := make(map[string]int, len(d.Features))
	for i, f := range d.Features {
		at := fmt.Sprintf("features[%d]", i)
		if j, ok := seen[f.Key]; ok {
			return docErrorf(at+".key", "feature %q is listed twice (features[%d] too): list each feature once", f.Key, j)
		}
		seen[f.Key] = i
		if err := f.validate(at); err != nil {
			return err
		}
	}
	return nil
}

// validate checks f, the document's feature at at: as a Feature (see
// validated), then what only a document's feature has.
func (f DocFeature) validate(at string) error {
	if err := f.validated().ValidateUnplanned(); err != nil {
		return placed(at, err)
	}
	if f.Tolerance != 0 {
		if err := plan.CheckTolerance(f.Tolerance); err != nil {
			return placed(at+".tolerance", err)
		}
	}
	shares, replicas := 0, 0
	var sum float64
	for i, b := range f.Buckets {
		bat := fmt.Sprintf("%s.buckets[%d]", at, i)
		switch {
		case b.Share != nil && b.Replicas != nil:
			return docErrorf(bat, "bucket %q gives both share and replicas: give one", b.Name)
		case b.Share != nil:
			if s := *b.Share; math.IsNaN(s) || s < 0 || s > 1 {
				return docErrorf(bat+".share", "share %v is out of range: give a fraction of users from 0 to 1, such as 0.25 for 25 %%", s)
			}
			shares++
			sum += *b.Share
		case b.Replicas != nil:
			replicas++
		default:
			return docErrorf(bat, "bucket %q gives neither share nor replicas: give its share of users (0 to 1)", b.Name)
		}
	}
	switch {
	case shares > 0 && replicas > 0:
		return docErrorf(at+".buckets", "feature %q mixes shares and replicas: give every bucket a share, or every bucket replicas", f.Key)
	case shares > 0 && math.Abs(sum-1) > shareSumSlack*float64(shares):
		return docErrorf(at+".buckets", "the shares of feature %q sum to %.6g %%, not 100 %%: give fractions of users that add up to 1", f.Key, 100*sum)
	}
	return nil
}

// validated is f as the Feature that Validate checks: each bucket with
// its replicas, or 1 replica for a share (which the plan turns into
// replicas, and Validate checks in its place).
func (f DocFeature) validated() feature.Feature {
	v := feature.Feature{Key: f.Key, Description: f.Description, Salt: f.Salt, Fallback: f.Fallback,
		Buckets: make([]feature.Bucket, len(f.Buckets)), Overrides: f.Overrides, Rules: f.Rules,
		BucketBy: f.BucketBy, Tags: f.Tags, Owner: f.Owner}
	for i, b := range f.Buckets {
		v.Buckets[i] = feature.Bucket{Name: b.Name, Replicas: 1, Value: b.Value}
		if b.Share == nil && b.Replicas != nil {
			v.Buckets[i].Replicas = *b.Replicas
		}
	}
	return v
}

// segment is sg as a Segment (no version, no times), its values compact.
func (sg DocSegment) segment() feature.Segment {
	seg := feature.Segment{Key: sg.Key, Description: sg.Description, Conditions: sg.Conditions}.Clone()
	seg.Conditions = feature.CompactConditions(seg.Conditions)
	return seg
}

// checkSegmentsKnown refuses a document whose rules use a segment that
// neither it nor the server (segs) has, at the condition that names it.
func (d Document) checkSegmentsKnown(segs map[string]*feature.CompiledSegment) error {
	listed := make(map[string]bool, len(d.Segments))
	for _, sg := range d.Segments {
		listed[sg.Key] = true
	}
	for i, f := range d.Features {
		for j, r := range f.Rules {
			for k, c := range r.Conditions {
				for _, c := range append([]feature.Condition{c}, c.Any...) {
					if c.Op != feature.OpInSegment {
						continue
					}
					var key string
					if json.Unmarshal(c.Value, &key) != nil {
						continue
					}
					if _, ok := segs[key]; !ok && !listed[key] {
						return docErrorf(fmt.Sprintf("features[%d].rules[%d].conditions[%d]", i, j, k),
							"in_segment names segment %q, which neither the document nor the server has: add it to the document's segments", key)
					}
				}
			}
		}
	}
	return nil
}

// ExportDocument returns the features of snap as a document: each bucket
// with its exact share of users, so that the document plans to no change.
func ExportDocument(snap *feature.Snapshot) Document {
	d := Document{Features: make([]DocFeature, 0, snap.Len()), Segments: []DocSegment{}}
	for _, seg := range snap.Segments() {
		d.Segments = append(d.Segments, DocSegment{Key: seg.Key, Description: seg.Description, Conditions: seg.Conditions})
	}
	for _, key := range snap.Keys() {
		c := snap.Compiled(key)
		f := c.Feature()
		enabled := f.Enabled
		df := DocFeature{
			Key: f.Key, Description: f.Description, Enabled: &enabled, Fallback: f.Fallback,
			Overrides: maps.Clone(f.Overrides), Rules: cloneRules(f.Rules), BucketBy: f.BucketBy,
			Tags: slices.Clone(f.Tags), Owner: f.Owner,
		}
		if f.Salt != f.Key {
			df.Salt = f.Salt
		}
		for _, b := range f.Buckets {
			share := c.Shares()[b.Name]
			df.Buckets = append(df.Buckets, DocBucket{Name: b.Name, Share: &share, Value: slices.Clone(b.Value)})
		}
		d.Features = append(d.Features, df)
	}
	return d
}

// DocumentPlan is what a document would change: a FeatureChange for every
// feature it lists, in its order.
type DocumentPlan struct {
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
	cur    *feature.CompiledSegment
}

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
	Plan   *DocBucketPlan `json:"plan,omitempty"`
	Report feature.Report `json:"report"`

	target *feature.Compiled // the feature after the change
	cur    *feature.Compiled // before (nil: created)
}

// DocBucketPlan is the planner's search for a feature's shares.
type DocBucketPlan struct {
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

// PlanDocument returns what applying d would change, against the features
// as this service holds them now. Shares that a feature's replicas do not
// already serve are planned as POST /api/features/K/plan plans them
// (ModeAuto, opts's budget, stopping when ctx ends); a plan that cannot
// come within its tolerance is an EInvalid error. Nothing is stored.
func (s *Service) PlanDocument(ctx context.Context, d Document, opts plan.Options) (DocumentPlan, error) {
	if err := d.Validate(); err != nil {
		return DocumentPlan{}, err
	}
	return planDocument(ctx, s.Snapshot(), d, opts)
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
		cur, ok := snap.CompiledSegments()[sg.Key]
		switch {
		case !ok:
			ch.Action, ch.Fields, ch.ToVersion = ActionCreate, []string{"created"}, 1
			next.Version = 1
			added++
		default:
			ch.cur, ch.FromVersion, ch.ToVersion = cur, cur.Segment().Version, cur.Segment().Version
			next.Version, next.CreatedAt, next.UpdatedAt = cur.Segment().Version, cur.Segment().CreatedAt, cur.Segment().UpdatedAt
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
			segs[sg.Key] = feature.CompileSegment(next)
		}
		out = append(out, ch)
	}
	if added > 0 && len(segs) > feature.MaxSegments {
		return nil, nil, docErrorf("segments", "there would be %d segments; at most %d", len(segs), feature.MaxSegments)
	}
	return out, segs, nil
}

// segmentPopulation is the population a change of segment sc changes in a
// feature that uses it, as UpdateSegment words it.
func segmentPopulation(sc SegmentChange) feature.PopulationChange {
	return feature.PopulationChange{When: "in segment " + sc.Segment, From: "segment version " + strconv.Itoa(sc.FromVersion), To: "segment version " + strconv.Itoa(sc.ToVersion),
		Text: fmt.Sprintf("users matching in segment %s: as segment version %d said → as version %d says (%s)", sc.Segment, sc.FromVersion, sc.ToVersion, feature.Abbreviate(sc.Conditions))}
}

func planDocument(ctx context.Context, snap *feature.Snapshot, d Document, opts plan.Options) (DocumentPlan, error) {
	p := DocumentPlan{Changes: make([]FeatureChange, 0, len(d.Features)), Revision: snap.Revision(),
		Versions: make(map[string]int, len(d.Features)), Unlisted: []string{},
		Document: Document{Features: make([]DocFeature, 0, len(d.Features)), Segments: []DocSegment{}}}
	if err := d.checkSegmentsKnown(snap.CompiledSegments()); err != nil {
		return DocumentPlan{}, err
	}
	sch, segs, err := planSegments(snap, d)
	if err != nil {
		return DocumentPlan{}, err
	}
	p.Segments, p.SegmentVersions = sch, make(map[string]int, len(sch))
	changedSegs := map[string]SegmentChange{}
	for _, sc := range sch {
		p.SegmentVersions[sc.Segment] = sc.FromVersion
		p.Document.Segments = append(p.Document.Segments, DocSegment{Key: sc.Segment, Description: sc.target.Description, Conditions: sc.target.Conditions})
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
			return DocumentPlan{}, fmt.Errorf("%w: %w", feature.Errorf(feature.EUnavailable, "the plan stopped: its request ended"), context.Cause(ctx))
		}
		listed[df.Key] = true
		at := fmt.Sprintf("features[%d]", i)
		ch, err := planFeature(ctx, snap.Compiled(df.Key), df, opts, segs)
		if e, ok := errors.AsType[*feature.Error](err); ok && e.Field != "" {
			return DocumentPlan{}, placed(at, err)
		} else if err != nil {
			return DocumentPlan{}, fmt.Errorf("%s (%s): %w", at, df.Key, err)
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
				return DocumentPlan{}, placed(at, err)
			}
		}
		resolved := df
		resolved.Buckets = make([]DocBucket, len(ch.Buckets))
		for j, b := range ch.Buckets {
			r := b.Replicas
			resolved.Buckets[j] = DocBucket{Name: b.Name, Replicas: &r, Value: b.Value}
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
					return DocumentPlan{}, docErrorf("segments", "feature %q, which the document leaves as it is, uses segment(s) it changes and would pass the limit of its patterns: %s", key, feature.ErrorMessage(err))
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
func planFeature(ctx context.Context, cur *feature.Compiled, df DocFeature, opts plan.Options, segs map[string]*feature.CompiledSegment) (FeatureChange, error) {
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
		next.Rules = cloneRules(df.Rules)
	}
	var before feature.Feature
	if cur != nil {
		before = cur.Feature()
	}
	if err := planSplits(before, &next); err != nil {
		return FeatureChange{}, err
	}
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
func docBuckets(ctx context.Context, cur *feature.Compiled, df DocFeature, opts plan.Options) ([]feature.Bucket, *DocBucketPlan, error) {
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
	bp := &DocBucketPlan{Mode: p.Mode, Tolerance: p.Tolerance, MaxError: p.MaxError, WithinTolerance: p.WithinTolerance, CutShort: p.CutShort, CutReason: p.CutReason, Replanned: p.Replanned}
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

// BatchWrite is one feature's new version in a batch (Store.ApplyBatch):
// Feature at Version, which replaces the stored feature at Version.Version-1
// of Feature's ID, or, with Create, is a new feature at version 1.
type BatchWrite struct {
	Feature feature.Feature
	Version Version
	Create  bool
}

// SegmentWrite is one segment's new version in a batch: Segment at
// Version.Version, which replaces the stored segment at the version below,
// or, with Create, is a new segment at version 1.
type SegmentWrite struct {
	Segment feature.Segment
	Version feature.SegmentVersion
	Create  bool
}

// Batch is what Store.ApplyBatch writes: new versions of several features
// and segments, and the idempotency key of the request that makes them.
type Batch struct {
	Features []BatchWrite
	Segments []SegmentWrite
	// Settles, when not nil, is marked done in the batch's transaction,
	// as a Version's Settles is in its own.
	Settles *Settlement
}

// BatchStore writes versions of several features and segments at once.
type BatchStore interface {
	// ApplyBatch writes every write of b in one transaction, with a
	// commit and an audit event each, and settles b.Settles, or none of
	// them: a feature or segment that is not at the version its write
	// expects (or, for a Create, exists) fails the batch with an
	// EConflict *Error that names it, an update of one that does not
	// exist with ENotFound, a key no longer the request's with EKeyInUse.
	ApplyBatch(ctx context.Context, b Batch) error
}

// ApplyOptions are the guards and author of ApplyDocument.
type ApplyOptions struct {
	Actor   string
	Comment string
	// Role is the role of the token applying: an editor's document is
	// bound by the Settings (see checkDocument); "" and admins are not.
	Role auth.Role
	// Versions, when not nil, are the versions the document's plan read
	// (DocumentPlan.Versions): a feature of the document at another
	// version now (0: it must not exist) refuses the whole apply with
	// EPrecondition, storing nothing. Every feature the document lists
	// must have one.
	Versions map[string]int
	// SegmentVersions are, likewise, the versions of the document's
	// segments its plan read (DocumentPlan.SegmentVersions): needed with
	// Versions when the document lists segments.
	SegmentVersions map[string]int
	// MaxChurn refuses, with EChurn, a document that would move more than
	// this fraction of one feature's users; MaxTotalChurn one whose
	// TotalChurn is above it.
	MaxChurn      *float64
	MaxTotalChurn *float64
	Plan          plan.Options
	// Idempotency, when not nil, is the request's idempotency key, kept
	// with the batch's answer, a DocumentPlan (see Idempotency).
	Idempotency *Idempotency
}

// ApplyDocument makes every change d plans (see PlanDocument) as one batch
// of versions, each with opts's actor and comment, or none of them. It
// returns the plan it applied, Applied when it stored anything. Errors:
// EInvalid for a bad document, EPrecondition when a feature is not at the
// version opts.Versions names, EChurn when a guard refuses, naming the
// feature; the store's.
func (s *Service) ApplyDocument(ctx context.Context, d Document, opts ApplyOptions) (DocumentPlan, error) {
	if err := d.Validate(); err != nil {
		return DocumentPlan{}, err
	}
	if err := validateComment(opts.Comment); err != nil {
		return DocumentPlan{}, err
	}
	if opts.Versions != nil {
		for _, f := range d.Features {
			if _, ok := opts.Versions[f.Key]; !ok {
				return DocumentPlan{}, feature.Errorf(feature.EInvalid, "the versions do not name feature %q: give the versions of the document's plan for every feature it lists", f.Key)
			}
		}
		for _, sg := range d.Segments {
			if _, ok := opts.SegmentVersions[sg.Key]; !ok {
				return DocumentPlan{}, feature.Errorf(feature.EInvalid, "the segment_versions do not name segment %q: give the segment versions of the document's plan for every segment it lists", sg.Key)
			}
		}
	}
	g, err := s.gateFor(ctx, ChangeOptions{Role: opts.Role})
	if err != nil {
		return DocumentPlan{}, err
	}
	if err := s.mu.lock(ctx); err != nil {
		return DocumentPlan{}, err
	}
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		p, err := s.applyDocument(ctx, d, opts, g)
		if attempt >= 2 || feature.ErrorCode(err) != feature.EConflict {
			return p, err
		}
		// The snapshot lagged behind another instance: read the
		// document's features again, then check and plan anew.
		if _, rerr := s.syncLocked(ctx); rerr != nil {
			return DocumentPlan{}, rerr
		}
	}
}

// checkSegmentVersions refuses, with EPrecondition, a document whose
// segments are not at the versions want names (nil: no check). The
// caller holds s.mu.
func (s *Service) checkSegmentVersions(ctx context.Context, d Document, want map[string]int) error {
	if want == nil || len(d.Segments) == 0 {
		return nil
	}
	have := func() map[string]int {
		out := map[string]int{}
		for _, sg := range d.Segments {
			if c, ok := s.Snapshot().CompiledSegments()[sg.Key]; ok {
				out[sg.Key] = c.Segment().Version
			}
		}
		return out
	}
	got := have()
	for _, sg := range d.Segments {
		if got[sg.Key] != want[sg.Key] {
			// The snapshot may lag behind another instance.
			if err := s.reloadSegments(ctx); err != nil {
				return err
			}
			got = have()
			break
		}
	}
	for _, sg := range d.Segments {
		h, w := got[sg.Key], want[sg.Key]
		switch {
		case h == w:
		case w == 0:
			return feature.Errorf(feature.EPrecondition, "segment %q was created (it is at version %d) since the plan, which would have created it: plan again; nothing was changed", sg.Key, h)
		case h == 0:
			return feature.Errorf(feature.EPrecondition, "segment %q was deleted since the plan read its version %d: plan again; nothing was changed", sg.Key, w)
		default:
			return feature.Errorf(feature.EPrecondition, "segment %q is at version %d, not %d as the plan read: plan again; nothing was changed", sg.Key, h, w)
		}
	}
	return nil
}

// applyDocument is one attempt of ApplyDocument. The caller holds s.mu.
func (s *Service) applyDocument(ctx context.Context, d Document, opts ApplyOptions, g *gate) (DocumentPlan, error) {
	// Segments first: a segment changed meanwhile moved on the features
	// that use it too, and is what to name.
	if err := s.checkSegmentVersions(ctx, d, opts.SegmentVersions); err != nil {
		return DocumentPlan{}, err
	}
	for _, f := range d.Features {
		want, ok := opts.Versions[f.Key]
		if !ok {
			continue
		}
		c := s.Snapshot().Compiled(f.Key)
		if c == nil && want != 0 || c != nil && c.Feature().Version != want {
			// The snapshot may lag behind another instance: ask the store.
			var err error
			if c, err = s.reload(ctx, f.Key); err != nil {
				return DocumentPlan{}, err
			}
		}
		have := 0
		if c != nil {
			have = c.Feature().Version
		}
		switch {
		case have == want:
		case want == 0:
			return DocumentPlan{}, feature.Errorf(feature.EPrecondition, "feature %q was created (it is at version %d) since the plan, which would have created it: plan again; nothing was changed", f.Key, have)
		case have == 0:
			return DocumentPlan{}, feature.Errorf(feature.EPrecondition, "feature %q was deleted since the plan read its version %d: plan again; nothing was changed", f.Key, want)
		default:
			return DocumentPlan{}, feature.Errorf(feature.EPrecondition, "feature %q is at version %d, not %d as the plan read: plan again; nothing was changed", f.Key, have, want)
		}
	}
	if err := d.checkSegmentsKnown(s.Snapshot().CompiledSegments()); err != nil {
		// Made by another instance? Ask the store before refusing.
		if rerr := s.reloadSegments(ctx); rerr != nil {
			return DocumentPlan{}, rerr
		}
	}
	p, err := planDocument(ctx, s.Snapshot(), d, opts.Plan)
	if err != nil {
		return DocumentPlan{}, err
	}
	for _, ch := range p.Changes {
		if ch.Action != ActionNone && opts.MaxChurn != nil && ch.Churn > *opts.MaxChurn {
			rep := ch.Report
			return DocumentPlan{}, &feature.Error{Code: feature.EChurn, Report: &rep, Message: fmt.Sprintf(
				"feature %q would move %.4f%% of its users, more than max_churn %.4f%%: nothing was changed", ch.Feature, 100*ch.Churn, 100**opts.MaxChurn)}
		}
	}
	if err := g.checkDocument(p); err != nil {
		return DocumentPlan{}, err
	}
	if opts.MaxTotalChurn != nil && p.TotalChurn > *opts.MaxTotalChurn {
		return DocumentPlan{}, feature.Errorf(feature.EChurn, "the document would move %.4f%% of users in all (the sum over its features), more than max_total_churn %.4f%%: nothing was changed", 100*p.TotalChurn, 100**opts.MaxTotalChurn)
	}
	if p.Changed == 0 {
		return p, nil
	}
	now := s.now().UTC()
	segs := s.Snapshot().CompiledSegments()
	var sws []SegmentWrite
	for i, sc := range p.Segments {
		if sc.Action == ActionNone {
			continue
		}
		if sws == nil {
			segs = maps.Clone(segs)
		}
		seg := sc.target.Clone()
		seg.UpdatedAt = now
		summary := "changed: " + feature.DescribeConditions(seg.Conditions)
		if sc.Action == ActionCreate {
			seg.CreatedAt = now
			summary = "created: " + feature.DescribeConditions(seg.Conditions)
		} else if !slices.Contains(sc.Fields, "conditions") {
			summary = "description changed"
		}
		p.Segments[i].target = seg
		segs[seg.Key] = feature.CompileSegment(seg)
		sws = append(sws, SegmentWrite{Segment: seg, Create: sc.Action == ActionCreate, Version: feature.SegmentVersion{
			Version: seg.Version, Actor: actor(ChangeOptions{Actor: opts.Actor}), Time: now, Summary: abbreviateSummary(summary), Comment: opts.Comment, Config: seg,
		}})
	}
	ws := make([]BatchWrite, 0, p.Changed)
	for i, ch := range p.Changes {
		if ch.Action == ActionNone {
			continue
		}
		f := ch.target.Feature()
		f.UpdatedAt = now
		if ch.cur == nil {
			f.ID, f.CreatedAt = uuid.NewString(), now
		}
		summary := "applied from a document: " + strings.Join(ch.Fields, ", ")
		if ch.cur == nil {
			summary = "created from a document"
		}
		ch.target = feature.Compile(f, segs)
		p.Changes[i] = ch
		ws = append(ws, BatchWrite{Feature: f, Create: ch.cur == nil, Version: Version{
			Version: f.Version, Actor: actor(ChangeOptions{Actor: opts.Actor}), Time: now, Summary: summary, Comment: opts.Comment,
			Config: f, OverrideCount: len(f.Overrides), Report: ch.Report,
		}})
	}
	p.Applied = true
	settles, err := opts.Idempotency.settlement(p, now)
	if err != nil {
		return DocumentPlan{}, err
	}
	// The write is bounded by the store's own deadline, which grows with
	// the batch, not by the plan's (ctx may end when the plan's search
	// time does).
	if err := s.store.ApplyBatch(context.WithoutCancel(ctx), Batch{Features: ws, Segments: sws, Settles: settles}); err != nil {
		if feature.ErrorCode(err) == feature.EConflict && opts.Versions != nil {
			return DocumentPlan{}, feature.Errorf(feature.EPrecondition, "%s; nothing was changed", feature.ErrorMessage(err))
		}
		return DocumentPlan{}, err
	}
	next := s.Snapshot()
	if len(sws) > 0 {
		next = next.WithSegments(segs)
	}
	for _, ch := range p.Changes {
		if ch.Action != ActionNone {
			s.retire(next.Compiled(ch.Feature))
			next = next.With(ch.Feature, ch.target)
		}
	}
	s.snap.Store(next)
	s.committed()
	return p, nil
}
