package document

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
)

// Limits of a document.
const (
	// MaxBytes bounds a document's encoding, as a file and as a
	// request body.
	MaxBytes = 5 << 20
	// MaxFeatures bounds how many features one document lists.
	MaxFeatures = 1000
)

// Document is a features file.
type Document struct {
	// Environment, when not "", is the environment the document is for:
	// planned or applied in another, it is refused (see CheckEnvironment).
	Environment string    `json:"environment,omitempty"`
	Features    []Feature `json:"features"`
	// Segments are targeting's named sets of conditions (feature.Segment):
	// the document's are created or updated; the server's that it does
	// not list are left alone.
	Segments []Segment `json:"segments"`
}

// Segment is a segment of a document. A user list (List) is named by
// reference: the document holds its key and description, never its
// users, which only the API changes (POST /api/segments/KEY/users). A
// document that lists one creates it empty where it does not exist, and
// where it does changes at most its description: applying a document
// never touches a list's users.
type Segment struct {
	Key         string              `json:"key"`
	Description string              `json:"description,omitempty"`
	Conditions  []feature.Condition `json:"conditions,omitempty"`
	List        bool                `json:"list,omitempty"`
}

// Feature is one feature of a document.
type Feature struct {
	Key         string `json:"key"`
	Description string `json:"description,omitempty"`
	// Enabled is the kill switch: true when left out.
	Enabled  *bool  `json:"enabled,omitempty"`
	Fallback string `json:"fallback,omitempty"`
	// Salt keys the feature's users: left out, a feature keeps its own,
	// and a new one gets its key (as POST /api/features gives it).
	Salt    string   `json:"salt,omitempty"`
	Buckets []Bucket `json:"buckets"`
	// Tolerance is how far a planned bucket's share may miss the share
	// the document gives it (see PlanOptions.Tolerance); 0: the plan
	// endpoint's default.
	Tolerance float64           `json:"tolerance,omitempty"`
	Overrides map[string]string `json:"overrides,omitempty"`
	Rules     []feature.Rule    `json:"rules,omitempty"`
	BucketBy  string            `json:"bucket_by,omitempty"`
	// Prerequisites are the features that must serve the user some of
	// their buckets (of the document or the server; see package feature).
	Prerequisites []feature.Prerequisite `json:"prerequisites,omitempty"`
	Tags          []string               `json:"tags,omitempty"`
	Owner         string                 `json:"owner,omitempty"`
}

// Bucket is a bucket of a document's feature: its share of users (0 to
// 1) or its replicas, and its value (any JSON; none: the bucket's name).
type Bucket struct {
	Name     string          `json:"name"`
	Share    *float64        `json:"share,omitempty"`
	Replicas *int            `json:"replicas,omitempty"`
	Value    json.RawMessage `json:"value,omitempty"`
}

// Error is what is wrong with a document, at a place in it: Path
// is a YAML path such as $.features[2].buckets[0].share, which the command
// line turns into a line of the file. It wraps an EInvalid *feature.Error whose
// Field is the same place as the API names it
// (features[2].buckets[0].share, `features[0].overrides["u1"]`), and whose
// message starts with it.
type Error struct {
	Path string
	Err  *feature.Error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// errorf returns a *Error at field, a place in the document
// (features[2].buckets[0].share).
func errorf(field, format string, args ...any) *Error {
	return wrap(feature.Errorf(feature.EInvalid, format, args...).Within(field))
}

// wrap returns e, whose Field is a place in the document, as a
// *Error.
func wrap(e *feature.Error) *Error {
	return &Error{Path: yamlPath(e.Field), Err: e}
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
	return wrap(e.Within(at))
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
// see, as a *Error: each feature and segment as feature's
// validation sees them (Feature.Validate, Segment.Validate), at their
// place in the document, and what only a document has: the features and
// segments listed once, each bucket's share (from 0 to 1, summing to
// 100 %) or replicas, a feature's tolerance. Whether an in_segment names
// a segment that exists needs the server: see CheckSegments.
func (d Document) Validate() error {
	if d.Features == nil {
		return errorf("features", `the document lists no features: give "features: []" for none`)
	}
	if len(d.Features) > MaxFeatures {
		return errorf("features", "the document lists %d features; at most %d: split it", len(d.Features), MaxFeatures)
	}
	if len(d.Segments) > feature.MaxSegments {
		return errorf("segments", "the document lists %d segments; at most %d", len(d.Segments), feature.MaxSegments)
	}
	segs := make(map[string]int, len(d.Segments))
	for i, sg := range d.Segments {
		at := fmt.Sprintf("segments[%d]", i)
		if j, ok := segs[sg.Key]; ok {
			return errorf(at+".key", "segment %q is listed twice (segments[%d] too): list each segment once", sg.Key, j)
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
			return errorf(at+".key", "feature %q is listed twice (features[%d] too): list each feature once", f.Key, j)
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
func (f Feature) validate(at string) error {
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
			return errorf(bat, "bucket %q gives both share and replicas: give one", b.Name)
		case b.Share != nil:
			if s := *b.Share; math.IsNaN(s) || s < 0 || s > 1 {
				return errorf(bat+".share", "share %v is out of range: give a fraction of users from 0 to 1, such as 0.25 for 25 %%", s)
			}
			shares++
			sum += *b.Share
		case b.Replicas != nil:
			replicas++
		default:
			return errorf(bat, "bucket %q gives neither share nor replicas: give its share of users (0 to 1)", b.Name)
		}
	}
	switch {
	case shares > 0 && replicas > 0:
		return errorf(at+".buckets", "feature %q mixes shares and replicas: give every bucket a share, or every bucket replicas", f.Key)
	// The shares may sum to 1 within plan.RoundedSumSlack per bucket, as
	// the targets in a plan's mode may (3 × 0.3333 for thirds).
	case shares > 0 && math.Abs(sum-1) > plan.RoundedSumSlack*float64(shares):
		return errorf(at+".buckets", "the shares of feature %q sum to %.6g %%, not 100 %%: give fractions of users that add up to 1", f.Key, 100*sum)
	}
	return nil
}

// validated is f as the Feature that Validate checks: each bucket with
// its replicas, or 1 replica for a share (which the plan turns into
// replicas, and Validate checks in its place).
func (f Feature) validated() feature.Feature {
	v := feature.Feature{Key: f.Key, Description: f.Description, Salt: f.Salt, Fallback: f.Fallback,
		Buckets: make([]feature.Bucket, len(f.Buckets)), Overrides: f.Overrides, Rules: f.Rules,
		BucketBy: f.BucketBy, Prerequisites: f.Prerequisites, Tags: f.Tags, Owner: f.Owner}
	for i, b := range f.Buckets {
		v.Buckets[i] = feature.Bucket{Name: b.Name, Replicas: 1, Value: b.Value}
		if b.Share == nil && b.Replicas != nil {
			v.Buckets[i].Replicas = *b.Replicas
		}
	}
	return v
}

// segment is sg as a Segment (no version, no times), its values compact.
func (sg Segment) segment() feature.Segment {
	seg := feature.Segment{Key: sg.Key, Description: sg.Description, Conditions: sg.Conditions, List: sg.List}.Clone()
	seg.Conditions = feature.CompactConditions(seg.Conditions)
	return seg
}

// CheckSegments refuses a document whose rules use a segment that
// neither it nor the server (segs) has, at the condition that names it.
func (d Document) CheckSegments(segs map[string]*feature.CompiledSegment) error {
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
						return errorf(fmt.Sprintf("features[%d].rules[%d].conditions[%d]", i, j, k),
							"in_segment names segment %q, which neither the document nor the server has: add it to the document's segments", key)
					}
				}
			}
		}
	}
	return nil
}

// Export returns the features of snap as a document: each bucket
// with its exact share of users, so that the document plans to no change.
func Export(snap *feature.Snapshot) Document {
	d := Document{Features: make([]Feature, 0, snap.Len()), Segments: []Segment{}}
	for _, seg := range snap.Segments() {
		if seg.List { // by reference: not its users
			d.Segments = append(d.Segments, Segment{Key: seg.Key, Description: seg.Description, List: true})
			continue
		}
		d.Segments = append(d.Segments, Segment{Key: seg.Key, Description: seg.Description, Conditions: seg.Conditions})
	}
	for _, key := range snap.Keys() {
		c := snap.Compiled(key)
		f := c.Feature()
		enabled := f.Enabled
		df := Feature{
			Key: f.Key, Description: f.Description, Enabled: &enabled, Fallback: f.Fallback,
			Overrides: maps.Clone(f.Overrides), Rules: feature.CloneRules(f.Rules), BucketBy: f.BucketBy,
			Prerequisites: feature.ClonePrerequisites(f.Prerequisites), Tags: slices.Clone(f.Tags), Owner: f.Owner,
		}
		if f.Salt != f.Key {
			df.Salt = f.Salt
		}
		for _, b := range f.Buckets {
			share := c.Shares()[b.Name]
			df.Buckets = append(df.Buckets, Bucket{Name: b.Name, Share: &share, Value: slices.Clone(b.Value)})
		}
		d.Features = append(d.Features, df)
	}
	return d
}

// CheckEnvironment refuses, with EInvalid, a document for an environment
// other than env, the one it is planned or applied in.
func (d Document) CheckEnvironment(env string) error {
	if d.Environment == "" || d.Environment == env {
		return nil
	}
	return &feature.Error{Code: feature.EInvalid, Field: "environment", Message: fmt.Sprintf(
		"the document is for environment %.64q, not %s: plan or apply it there (?env=%.64s, or rollout --env)", d.Environment, env, d.Environment)}
}
