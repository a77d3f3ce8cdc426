package environment

import (
	"slices"
	"strconv"
	"strings"

	"github.com/rollout/rollout/rollout/feature"
)

// A feature is defined once, for every environment: its key, description,
// tags, owner, salt and its buckets' names and values. Its configuration
// (enabled, fallback, replicas, rules, overrides, bucket_by) is each
// environment's own. A change of the definition in one environment is
// written, in the same transaction, to the feature in every other
// environment (Redefine): a bucket added there gets 0 replicas, so that no
// user moves; a bucket removed must serve no one there (InUse).

// DefinitionDiffers reports whether f and g differ in what every
// environment shares.
func DefinitionDiffers(f, g feature.Feature) bool {
	if f.Description != g.Description || f.Owner != g.Owner || f.Salt != g.Salt || !sameList(f.Tags, g.Tags) {
		return true
	}
	return !slices.EqualFunc(f.Buckets, g.Buckets, func(a, b feature.Bucket) bool {
		return a.Name == b.Name && string(a.Value) == string(b.Value)
	})
}

// Redefine returns other, the feature's configuration in another
// environment, with the change of definition from prev to next made in one
// environment: what that change set (description, tags, owner, salt, a
// bucket's value) is set in other too; a bucket it added is added to other
// with 0 replicas, so that no one moves; a bucket it removed is removed
// from other, refused with EConflict where other still serves it (InUse).
// What the change left alone keeps other's own (an older difference).
// Buckets follow next's order, other's own after them.
func Redefine(prev, next, other feature.Feature) (feature.Feature, error) {
	out := other.Clone()
	if prev.Description != next.Description {
		out.Description = next.Description
	}
	if prev.Owner != next.Owner {
		out.Owner = next.Owner
	}
	if prev.Salt != next.Salt {
		out.Salt = next.Salt
	}
	if !sameList(prev.Tags, next.Tags) {
		out.Tags = slices.Clone(next.Tags)
	}
	for _, name := range Removed(prev, next) {
		if uses := InUse(other, name); len(uses) > 0 {
			return feature.Feature{}, feature.Errorf(feature.EConflict, "bucket %q still serves users here: %s; take them off it first", name, strings.Join(uses, ", "))
		}
	}
	out.Buckets = out.Buckets[:0:0]
	for _, b := range next.Buckets {
		mine, ok := other.Bucket(b.Name)
		was, had := prev.Bucket(b.Name)
		switch {
		case !ok:
			mine = feature.Bucket{Name: b.Name, Value: slices.Clone(b.Value)}
		case !had || string(was.Value) != string(b.Value):
			mine.Value = slices.Clone(b.Value)
		}
		out.Buckets = append(out.Buckets, mine)
	}
	for _, b := range other.Buckets {
		_, inNext := next.Bucket(b.Name)
		_, inPrev := prev.Bucket(b.Name)
		if !inNext && !inPrev {
			out.Buckets = append(out.Buckets, b)
		}
	}
	return out, nil
}

// InUse names the ways f, a feature's configuration in one environment,
// serves the bucket name: its share, the fallback, overrides and the
// rules that serve it. None: the bucket can be dropped there without
// moving anyone.
func InUse(f feature.Feature, name string) []string {
	var uses []string
	if b, ok := f.Bucket(name); ok && b.Replicas > 0 {
		uses = append(uses, "a share of the ring")
	}
	if f.Fallback == name {
		uses = append(uses, "the fallback")
	}
	overrides := 0
	for _, b := range f.Overrides {
		if b == name {
			overrides++
		}
	}
	if overrides > 0 {
		uses = append(uses, plural(overrides, "override"))
	}
	for _, r := range f.Rules {
		if r.Serve.Bucket == name || r.Serve.Split[name] > 0 {
			uses = append(uses, "rule "+r.Name)
		}
	}
	return uses
}

// Removed names the buckets before has and after lacks.
func Removed(before, after feature.Feature) []string {
	var out []string
	for _, b := range before.Buckets {
		if _, ok := after.Bucket(b.Name); !ok {
			out = append(out, b.Name)
		}
	}
	return out
}

// Revalued names the buckets both have whose value after differs.
func Revalued(before, after feature.Feature) []string {
	var out []string
	for _, b := range before.Buckets {
		if a, ok := after.Bucket(b.Name); ok && string(a.Value) != string(b.Value) {
			out = append(out, b.Name)
		}
	}
	return out
}

// Serves reports whether f, a feature's configuration in one environment,
// serves the bucket name to anyone: InUse while the feature is on, the
// fallback while it is off.
func Serves(f feature.Feature, name string) bool {
	if !f.Enabled {
		return f.Fallback == name
	}
	return len(InUse(f, name)) > 0
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// Effect is what an archive or a restore made in one environment does in
// another, which it archives or restores too: the feature's version there
// and the share of its users who lose their bucket (or get it back).
type Effect struct {
	Environment string  `json:"environment"`
	Version     int     `json:"version"`
	Churn       float64 `json:"churn"`
	Protected   bool    `json:"protected,omitempty"`
}
