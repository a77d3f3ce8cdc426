package change

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/request"
)

// Change is one edit of a feature's configuration, with the one-line summary
// its version carries. Build one with the functions of this package; the
// zero Change is no edit (Apply panics).
type Change struct {
	summary string
	kind    audit.Kind // "": audit.Change
	apply   func(f *feature.Feature) error
	// spec is the change as data, for a change request to store and
	// apply later (see request.Spec); its Kind is "" for changes that
	// cannot be requested (see Spec).
	spec request.Spec
}

// Spec returns the change as data: what a change request stores. Its
// Kind is "" for a change that cannot be requested (SetLabels, Combine,
// RampFinal, a Rollback not given its spec).
func (c Change) Spec() request.Spec { return c.spec }

// Summary returns the change's one-line description.
func (c Change) Summary() string { return c.summary }

// Kind returns the kind of the audit event of the version the change
// makes; "" for an ordinary change (audit.Change, or audit.Create for a
// feature's first version).
func (c Change) Kind() audit.Kind { return c.kind }

// Apply makes the change to f, or returns why it cannot (a feature.Error).
// It does not validate the result: the caller does (feature.Validate).
func (c Change) Apply(f *feature.Feature) error { return c.apply(f) }

// As returns a copy of the change with the given summary and kind: the
// same edit, recorded otherwise (a scheduled change, a ramp's step).
func (c Change) As(summary string, kind audit.Kind) Change {
	c.summary, c.kind = summary, kind
	return c
}

// WithSpec returns a copy of the change that a change request stores as
// spec: the same edit, described as data otherwise (a rollback, whose
// spec names the version rather than its configuration).
func (c Change) WithSpec(spec request.Spec) Change {
	c.spec = spec
	return c
}

// AddBucket adds bucket b.
func AddBucket(b feature.Bucket) Change {
	b.Value = feature.CompactJSON(b.Value)
	return Change{
		spec:    request.Spec{Kind: request.SpecAddBucket, Bucket: &b},
		summary: "added bucket " + b.Name,
		apply: func(f *feature.Feature) error {
			if _, ok := f.Bucket(b.Name); ok {
				return feature.Errorf(feature.EConflict, "bucket %q already exists: change its replicas or value instead", b.Name)
			}
			f.Buckets = append(f.Buckets, b)
			return nil
		},
	}
}

// UpdateBucket changes the replicas of the named bucket when replicas is
// not nil, and its value when value is not nil.
func UpdateBucket(name string, replicas *int, value json.RawMessage) Change {
	// Its version's summary says what a change of replicas does in
	// percentages (audit.ShareSummary): the replicas themselves go unsaid.
	summary := "changed the share of " + name
	if value != nil {
		summary = fmt.Sprintf("changed the value of %s to %s", name, feature.Abbreviate(string(feature.CompactJSON(value))))
		if replicas != nil {
			summary = fmt.Sprintf("changed the share and the value of %s (to %s)", name, feature.Abbreviate(string(feature.CompactJSON(value))))
		}
	}
	return Change{
		spec:    request.Spec{Kind: request.SpecUpdateBucket, Name: name, Replicas: replicas, Value: feature.CompactJSON(value)},
		summary: summary,
		apply: func(f *feature.Feature) error {
			i := slices.IndexFunc(f.Buckets, func(b feature.Bucket) bool { return b.Name == name })
			if i < 0 {
				return feature.Errorf(feature.ENotFound, "feature %q has no bucket %q", f.Key, name)
			}
			if replicas == nil && value == nil {
				return feature.Errorf(feature.EInvalid, "nothing to change: give replicas, value or both")
			}
			if replicas != nil {
				f.Buckets[i].Replicas = *replicas
			}
			if value != nil {
				f.Buckets[i].Value = feature.CompactJSON(value)
			}
			return nil
		},
	}
}

// RemoveBucket removes the named bucket. It refuses to remove the last
// bucket, the fallback, or a bucket that overrides name.
func RemoveBucket(name string) Change {
	return Change{
		spec:    request.Spec{Kind: request.SpecRemoveBucket, Name: name},
		summary: "removed bucket " + name,
		apply: func(f *feature.Feature) error {
			i := slices.IndexFunc(f.Buckets, func(b feature.Bucket) bool { return b.Name == name })
			switch {
			case i < 0:
				return feature.Errorf(feature.ENotFound, "feature %q has no bucket %q", f.Key, name)
			case len(f.Buckets) == 1:
				return feature.Errorf(feature.EConflict, "bucket %q is the feature's last bucket: delete the feature instead", name)
			case f.Fallback == name:
				return feature.Errorf(feature.EConflict, "bucket %q is the fallback: change the fallback first", name)
			}
			n := 0
			for _, b := range f.Overrides {
				if b == name {
					n++
				}
			}
			if n > 0 {
				return feature.Errorf(feature.EConflict, "%d override(s) name bucket %q: clear them first", n, name)
			}
			f.Buckets = slices.Delete(f.Buckets, i, i+1)
			return nil
		},
	}
}

// SetBuckets replaces the feature's buckets with the given list. A bucket
// given without a value keeps the value of the current bucket of that name.
func SetBuckets(buckets []feature.Bucket) Change {
	names := make([]string, len(buckets))
	for i, b := range buckets {
		names[i] = b.Name
	}
	return Change{
		spec:    request.Spec{Kind: request.SpecSetBuckets, Buckets: slices.Clone(buckets)},
		summary: "set the buckets " + strings.Join(names, ", "),
		apply: func(f *feature.Feature) error {
			next := slices.Clone(buckets)
			for i, b := range next {
				if len(b.Value) == 0 {
					if cur, ok := f.Bucket(b.Name); ok {
						next[i].Value = cur.Value
					}
				}
				next[i].Value = feature.CompactJSON(next[i].Value)
			}
			f.Buckets = next
			return nil
		},
	}
}

// Patch changes the description, the kill switch and the fallback, each when
// not nil. An empty fallback clears it.
func Patch(description *string, enabled *bool, fallback *string) Change {
	var parts []string
	if enabled != nil {
		parts = append(parts, map[bool]string{true: "enabled", false: "disabled"}[*enabled])
	}
	if fallback != nil {
		if *fallback == "" {
			parts = append(parts, "cleared the fallback")
		} else {
			parts = append(parts, "fallback set to "+*fallback)
		}
	}
	if description != nil {
		parts = append(parts, "description changed")
	}
	return Change{
		spec:    request.Spec{Kind: request.SpecPatch, Description: description, Enabled: enabled, Fallback: fallback},
		summary: strings.Join(parts, ", "),
		apply: func(f *feature.Feature) error {
			if description == nil && enabled == nil && fallback == nil {
				return feature.Errorf(feature.EInvalid, "nothing to change: give description, enabled, fallback or bucket_by")
			}
			if description != nil {
				f.Description = *description
			}
			if enabled != nil {
				f.Enabled = *enabled
			}
			if fallback != nil {
				f.Fallback = *fallback
			}
			return nil
		},
	}
}

// SetOverride serves bucket to user whatever the ring says.
func SetOverride(user, bucket string) Change {
	return Change{
		spec:    request.Spec{Kind: request.SpecSetOverride, User: user, Name: bucket},
		summary: fmt.Sprintf("override: user %s → %s", feature.Abbreviate(user), bucket),
		kind:    audit.Override,
		apply: func(f *feature.Feature) error {
			if err := feature.ValidateUser(user); err != nil {
				return err
			}
			if _, ok := f.Bucket(bucket); !ok {
				return feature.Errorf(feature.EInvalid, "feature %q has no bucket %q", f.Key, bucket)
			}
			if f.Overrides == nil {
				f.Overrides = map[string]string{}
			}
			f.Overrides[user] = bucket
			return nil
		},
	}
}

// ClearOverride returns user to the ring.
func ClearOverride(user string) Change {
	return Change{
		spec:    request.Spec{Kind: request.SpecClearOverride, User: user},
		summary: fmt.Sprintf("override cleared: user %s", feature.Abbreviate(user)),
		kind:    audit.Override,
		apply: func(f *feature.Feature) error {
			if _, ok := f.Overrides[user]; !ok {
				return feature.Errorf(feature.ENotFound, "feature %q has no override for user %q", f.Key, user)
			}
			delete(f.Overrides, user)
			return nil
		},
	}
}

// Reshuffle sets a new salt: every user is hashed anew, as if the feature
// were new. It is the only change of the salt after creation.
func Reshuffle(salt string) Change {
	return Change{
		spec:    request.Spec{Kind: request.SpecReshuffle, Salt: salt},
		summary: "reshuffled users (new salt)",
		apply: func(f *feature.Feature) error {
			if salt == f.Salt {
				return feature.Errorf(feature.EInvalid, "the new salt is the current one: give another")
			}
			f.Salt = salt
			return nil
		},
	}
}

// Rollback restores old, the configuration of an earlier version; with
// keep, the current overrides whose bucket old has stay instead of its
// own. Its Spec is empty: the caller, which read old, gives it one that
// names the version (WithSpec).
func Rollback(old feature.Feature, keep bool) Change {
	summary := fmt.Sprintf("rolled back to version %d", old.Version)
	if keep {
		summary += ", keeping the pinned users"
	}
	return Change{
		summary: summary,
		kind:    audit.Rollback,
		apply: func(f *feature.Feature) error {
			f.Description = old.Description
			f.Enabled = old.Enabled
			f.Salt = old.Salt
			f.Fallback = old.Fallback
			f.Buckets = old.Clone().Buckets
			f.Rules, f.BucketBy = old.Clone().Rules, old.BucketBy
			if !keep {
				f.Overrides = old.Clone().Overrides
				return nil
			}
			for user, b := range f.Overrides {
				if _, ok := old.Bucket(b); !ok {
					delete(f.Overrides, user)
				}
			}
			return nil
		},
	}
}
