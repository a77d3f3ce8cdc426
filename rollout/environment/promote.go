package environment

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rollout/rollout/rollout/feature"
)

// The parts of a feature's configuration a promotion may carry.
const (
	PartBuckets   = "buckets" // bucket names, values and replicas, with the salt: the ring
	PartRules     = "rules"
	PartEnabled   = "enabled"
	PartFallback  = "fallback"
	PartBucketBy  = "bucket_by"
	PartOverrides = "overrides"
)

// Parts are the parts a promotion may carry, and DefaultParts
// those it carries unless told: every part but the overrides, since pinned
// users differ per environment.
var (
	Parts        = []string{PartBuckets, PartRules, PartEnabled, PartFallback, PartBucketBy, PartOverrides}
	DefaultParts = []string{PartBuckets, PartRules, PartEnabled, PartFallback, PartBucketBy}
)

// CheckParts refuses, with EInvalid, a part a promotion does not carry;
// none means DefaultParts, which it returns.
func CheckParts(include []string) ([]string, error) {
	if len(include) == 0 {
		return slices.Clone(DefaultParts), nil
	}
	for _, part := range include {
		if !slices.Contains(Parts, part) {
			return nil, &feature.Error{Code: feature.EInvalid, Field: "include", Message: fmt.Sprintf("%q is not a part a promotion carries: give some of %s", part, strings.Join(Parts, ", "))}
		}
	}
	return slices.Clone(include), nil
}

// Promote makes f's parts include as they are in source.
func Promote(f *feature.Feature, source feature.Feature, include []string) {
	has := func(part string) bool { return slices.Contains(include, part) }
	if has(PartBuckets) {
		f.Buckets = slices.Clone(source.Buckets)
		f.Salt = source.Salt
	}
	if has(PartRules) {
		f.Rules = source.Clone().Rules
	}
	if has(PartEnabled) {
		f.Enabled = source.Enabled
	}
	if has(PartFallback) {
		f.Fallback = source.Fallback
	}
	if has(PartBucketBy) {
		f.BucketBy = source.BucketBy
	}
	if has(PartOverrides) {
		f.Overrides = maps.Clone(source.Overrides)
		if f.Overrides == nil {
			f.Overrides = map[string]string{}
		}
	}
}

// Placement is a feature's configuration in one environment, as the
// comparison of environments shows it.
type Placement struct {
	Environment    string             `json:"environment"`
	Version        int                `json:"version"`
	Enabled        bool               `json:"enabled"`
	Fallback       string             `json:"fallback"`
	Shares         map[string]float64 `json:"shares"`
	Buckets        []feature.Bucket   `json:"buckets"`
	Rules          []feature.Rule     `json:"rules"`
	OverridesCount int                `json:"overrides_count"`
	BucketBy       string             `json:"bucket_by"`
	ETag           string             `json:"etag"`
	UpdatedAt      string             `json:"updated_at"`
}

// PlacementOf is the configuration c serves in the environment env.
func PlacementOf(env string, c *feature.Compiled) Placement {
	f := c.Feature()
	rules := f.Rules
	if rules == nil {
		rules = []feature.Rule{}
	}
	return Placement{Environment: env, Version: f.Version, Enabled: f.Enabled, Fallback: f.Fallback, Shares: c.Shares(),
		Buckets: f.Buckets, Rules: rules, OverridesCount: len(f.Overrides), BucketBy: f.BucketBy, ETag: f.Tag(),
		UpdatedAt: f.UpdatedAt.Format("2006-01-02T15:04:05.999999999Z07:00")}
}

// Difference is a feature whose configuration differs between two
// environments: the parts that differ, and both configurations (nil where
// the environment lacks the feature).
type Difference struct {
	Feature string     `json:"feature"`
	Differs []string   `json:"differs"`
	From    *Placement `json:"from"`
	To      *Placement `json:"to"`
}

// sameList reports whether two lists encode alike (none and empty alike).
func sameList[T any](a, b []T) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	return erra == nil && errb == nil && string(ja) == string(jb)
}

// Differs names the parts of a promotion in which f and g differ.
func Differs(f, g feature.Feature) []string {
	var out []string
	if !slices.EqualFunc(f.Buckets, g.Buckets, func(a, b feature.Bucket) bool {
		return a.Name == b.Name && a.Replicas == b.Replicas && string(a.Value) == string(b.Value)
	}) || f.Salt != g.Salt {
		out = append(out, PartBuckets)
	}
	if !sameList(f.Rules, g.Rules) {
		out = append(out, PartRules)
	}
	if f.Enabled != g.Enabled {
		out = append(out, PartEnabled)
	}
	if f.Fallback != g.Fallback {
		out = append(out, PartFallback)
	}
	if f.BucketBy != g.BucketBy {
		out = append(out, PartBucketBy)
	}
	if !maps.Equal(f.Overrides, g.Overrides) {
		out = append(out, PartOverrides)
	}
	return out
}

// Compare returns every feature whose configuration differs between the
// snapshots sa of environment from and sb of environment to, by key.
func Compare(from, to string, sa, sb *feature.Snapshot) []Difference {
	keys := slices.Sorted(slices.Values(slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(sa.Keys()), sb.Keys()...))))))
	out := []Difference{}
	for _, key := range keys {
		ca, cb := sa.Compiled(key), sb.Compiled(key)
		d := Difference{Feature: key}
		if ca != nil {
			p := PlacementOf(from, ca)
			d.From = &p
		}
		if cb != nil {
			p := PlacementOf(to, cb)
			d.To = &p
		}
		switch {
		case ca == nil || cb == nil:
			d.Differs = []string{"exists"}
		default:
			d.Differs = Differs(ca.Feature(), cb.Feature())
		}
		if len(d.Differs) > 0 {
			out = append(out, d)
		}
	}
	return out
}

// MaxBatchPromotion bounds the features one batch promotion names.
const MaxBatchPromotion = 500

// BatchPromotion is the answer of a promotion of several features: each
// one's report in the target, and their sum.
type BatchPromotion struct {
	From       string           `json:"from"`
	To         string           `json:"to"`
	Features   []PromotedChange `json:"features"`
	TotalChurn float64          `json:"total_churn"`
	DryRun     bool             `json:"dry_run"`
	Applied    bool             `json:"applied"`
}

// PromotedChange is one feature of a BatchPromotion: its version in the
// target before and after, and the report of the change there.
type PromotedChange struct {
	Feature     string         `json:"feature"`
	FromVersion int            `json:"from_version"`
	ToVersion   int            `json:"to_version"`
	Churn       float64        `json:"churn"`
	Report      feature.Report `json:"report"`
}

// Pin is the versions of a feature in the source and the target of a
// promotion that its author previewed.
type Pin struct {
	From int `json:"from"`
	To   int `json:"to"`
}
