package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rollout/rollout/rollout/audit"
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

// PromoteParts are the parts a promotion may carry, and DefaultPromoteParts
// those it carries unless told: every part but the overrides, since pinned
// users differ per environment.
var (
	PromoteParts        = []string{PartBuckets, PartRules, PartEnabled, PartFallback, PartBucketBy, PartOverrides}
	DefaultPromoteParts = []string{PartBuckets, PartRules, PartEnabled, PartFallback, PartBucketBy}
)

// Promotion is the change that makes a feature's parts include as they are
// in source, the feature's configuration in the environment from.
func Promotion(from string, source feature.Feature, include []string) (Change, error) {
	if len(include) == 0 {
		include = DefaultPromoteParts
	}
	for _, part := range include {
		if !slices.Contains(PromoteParts, part) {
			return Change{}, &feature.Error{Code: feature.EInvalid, Field: "include", Message: fmt.Sprintf("%q is not a part a promotion carries: give some of %s", part, strings.Join(PromoteParts, ", "))}
		}
	}
	source = source.Clone()
	include = slices.Clone(include)
	has := func(part string) bool { return slices.Contains(include, part) }
	return Change{
		kind:    audit.Promote,
		spec:    ChangeSpec{Kind: SpecPromote, From: from, Include: include, Source: &source},
		summary: fmt.Sprintf("promoted %s from %s (version %d)", strings.Join(include, ", "), from, source.Version),
		apply: func(f *feature.Feature) error {
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
			return nil
		},
	}, nil
}

// PromoteOptions are a promotion's: from where to where, what, and the
// guards of the change in the target (Change: dry run, max_churn, If-Match
// of the target, comment, actor and role).
type PromoteOptions struct {
	From, To string
	Include  []string
	// FromVersion, when not 0, pins the source: the promotion is refused
	// with EPrecondition if the source's feature is at another version.
	FromVersion int
	Change      ChangeOptions
}

// Promote makes the feature key in the environment p.To as it is in
// p.From, for the parts p.Include names, through the target's pipeline:
// its report is the churn in the target, exactly what a preview of the
// same configuration there reports; editors are held to the target's
// settings, and a protected target makes their promotion a request.
func (e *Environments) Promote(ctx context.Context, key string, p PromoteOptions) (Result, error) {
	if p.From == p.To {
		return Result{}, &feature.Error{Code: feature.EInvalid, Field: "to", Message: "a promotion goes from one environment to another: from and to are both " + p.From}
	}
	src, err := e.Lookup(p.From)
	if err != nil {
		return Result{}, err
	}
	dst, err := e.Lookup(p.To)
	if err != nil {
		return Result{}, err
	}
	source, err := src.Feature(ctx, key)
	if err != nil {
		return Result{}, err
	}
	if p.FromVersion != 0 && source.Version != p.FromVersion {
		return Result{}, feature.Errorf(feature.EPrecondition, "feature %q is at version %d in %s, not %d: review the promotion again", key, source.Version, p.From, p.FromVersion)
	}
	ch, err := Promotion(p.From, source, p.Include)
	if err != nil {
		return Result{}, err
	}
	return dst.Change(ctx, key, ch, p.Change)
}

// Feature returns the current configuration of the feature key, asking
// the store when the snapshot lacks it (made elsewhere a moment ago).
func (s *Service) Feature(ctx context.Context, key string) (feature.Feature, error) {
	if c := s.Snapshot().Compiled(key); c != nil {
		return c.Feature(), nil
	}
	if err := s.mu.lock(ctx); err != nil {
		return feature.Feature{}, err
	}
	defer s.mu.Unlock()
	c, err := s.reload(ctx, key)
	if err != nil {
		return feature.Feature{}, err
	}
	if c == nil {
		return feature.Feature{}, feature.Errorf(feature.ENotFound, "feature %q does not exist in environment %s", key, s.env)
	}
	return c.Feature(), nil
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

// Placements returns the configuration of the feature key in every
// environment that serves it, by the environments' positions.
func (e *Environments) Placements(key string) ([]Placement, error) {
	var out []Placement
	for _, svc := range e.Services() {
		c := svc.Snapshot().Compiled(key)
		if c == nil {
			continue
		}
		out = append(out, placement(svc.env, c))
	}
	if len(out) == 0 {
		return nil, feature.NotFound(key)
	}
	return out, nil
}

func placement(env string, c *feature.Compiled) Placement {
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

// Compare returns every feature whose configuration differs between the
// environments from and to, by key.
func (e *Environments) Compare(from, to string) ([]Difference, error) {
	a, err := e.Lookup(from)
	if err != nil {
		return nil, err
	}
	b, err := e.Lookup(to)
	if err != nil {
		return nil, err
	}
	sa, sb := a.Snapshot(), b.Snapshot()
	keys := slices.Sorted(slices.Values(slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(sa.Keys()), sb.Keys()...))))))
	out := []Difference{}
	for _, key := range keys {
		ca, cb := sa.Compiled(key), sb.Compiled(key)
		d := Difference{Feature: key}
		if ca != nil {
			p := placement(from, ca)
			d.From = &p
		}
		if cb != nil {
			p := placement(to, cb)
			d.To = &p
		}
		switch {
		case ca == nil || cb == nil:
			d.Differs = []string{"exists"}
		default:
			d.Differs = differs(ca.Feature(), cb.Feature())
		}
		if len(d.Differs) > 0 {
			out = append(out, d)
		}
	}
	return out, nil
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

// differs names the parts of a promotion in which f and g differ.
func differs(f, g feature.Feature) []string {
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

// PromoteMany promotes the features keys from p.From to p.To as one batch:
// every one or none. p.Change's MaxChurn bounds each feature's churn and
// maxTotal, when not nil, their sum; an editor's batch is held to the
// target's settings and refused where one of its changes would need an
// approval (a batch is not a change request: promote such a feature
// alone). p.FromVersion is not used: each feature is promoted as its
// source is now.
func (e *Environments) PromoteMany(ctx context.Context, keys []string, p PromoteOptions, maxTotal *float64) (BatchPromotion, error) {
	out := BatchPromotion{From: p.From, To: p.To, DryRun: p.Change.DryRun, Features: []PromotedChange{}}
	switch {
	case len(keys) == 0:
		return out, &feature.Error{Code: feature.EInvalid, Field: "features", Message: "name the features to promote"}
	case len(keys) > MaxBatchPromotion:
		return out, &feature.Error{Code: feature.EInvalid, Field: "features", Message: fmt.Sprintf("%d features: a batch promotes at most %d", len(keys), MaxBatchPromotion)}
	case p.From == p.To:
		return out, &feature.Error{Code: feature.EInvalid, Field: "to", Message: "a promotion goes from one environment to another: from and to are both " + p.From}
	}
	if err := validateComment(p.Change.Comment); err != nil {
		return out, err
	}
	src, err := e.Lookup(p.From)
	if err != nil {
		return out, err
	}
	dst, err := e.Lookup(p.To)
	if err != nil {
		return out, err
	}
	opts := p.Change
	if opts.gate, err = dst.gateFor(ctx, opts); err != nil {
		return out, err
	}
	if err := dst.mu.lock(ctx); err != nil {
		return out, err
	}
	defer dst.mu.Unlock()
	seen := map[string]bool{}
	var (
		ws    []BatchWrite
		nexts []*feature.Compiled
	)
	for _, key := range keys {
		if seen[key] {
			return out, &feature.Error{Code: feature.EInvalid, Field: "features", Message: fmt.Sprintf("feature %q is named twice", key)}
		}
		seen[key] = true
		source, err := src.Feature(ctx, key)
		if err != nil {
			return out, err
		}
		ch, err := Promotion(p.From, source, p.Include)
		if err != nil {
			return out, err
		}
		cur, err := dst.current(ctx, key, ChangeOptions{})
		if err != nil {
			return out, err
		}
		res, v, cc, err := dst.prepare(cur, ch, opts)
		if _, approval := err.(*needsApproval); approval || res.Needs == "approval" {
			return out, feature.Errorf(feature.EForbidden, "feature %q needs an approval in %s: a batch is not a change request; promote it alone (POST /api/features/%s/promote), which makes one, or ask an admin; nothing was changed", key, p.To, key)
		}
		if err != nil {
			return out, err
		}
		if len(differs(cur.Feature(), res.Feature)) == 0 {
			// Alike already: nothing to write.
			out.Features = append(out.Features, PromotedChange{Feature: key, FromVersion: cur.Feature().Version, ToVersion: cur.Feature().Version})
			continue
		}
		out.Features = append(out.Features, PromotedChange{Feature: key, FromVersion: cur.Feature().Version, ToVersion: v.Version, Churn: res.Report.Churn, Report: res.Report})
		out.TotalChurn += res.Report.Churn
		ws = append(ws, BatchWrite{Feature: res.Feature, Version: v})
		nexts = append(nexts, cc)
	}
	if maxTotal != nil && out.TotalChurn > *maxTotal {
		return out, feature.Errorf(feature.EChurn, "the promotion would move %.4f%% of users in all (the sum over its features), more than max_total_churn %.4f%%: nothing was changed", 100*out.TotalChurn, 100**maxTotal)
	}
	if opts.DryRun || len(ws) == 0 {
		return out, nil
	}
	out.Applied = true
	settles, err := opts.Idempotency.settlement(out, dst.now().UTC())
	if err != nil {
		return out, err
	}
	if err := dst.store.ApplyBatch(context.WithoutCancel(ctx), Batch{Features: ws, Settles: settles}); err != nil {
		return BatchPromotion{}, err
	}
	next := dst.Snapshot()
	for i, w := range ws {
		dst.retire(next.Compiled(w.Feature.Key))
		next = next.With(w.Feature.Key, nexts[i])
	}
	dst.snap.Store(next)
	dst.committed()
	return out, nil
}
