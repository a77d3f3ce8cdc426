package change

import (
	"fmt"
	"strings"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/environment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/request"
)

// Promotion is the change that makes a feature's parts include as they are
// in source, the feature's configuration in the environment from.
func Promotion(from string, source feature.Feature, include []string) (Change, error) {
	include, err := environment.CheckParts(include)
	if err != nil {
		return Change{}, err
	}
	source = source.Clone()
	return Change{
		kind:    audit.Promote,
		spec:    request.Spec{Kind: request.SpecPromote, From: from, Include: include, Source: &source},
		summary: fmt.Sprintf("promoted %s from %s (version %d)", strings.Join(include, ", "), from, source.Version),
		apply: func(f *feature.Feature) error {
			environment.Promote(f, source, include)
			return nil
		},
	}, nil
}

// FromSpec makes the Change sp describes: what a change request stored. A
// rollback's is made by the caller, which reads the old version
// (Rollback); an archive, a restore and a ramp are no Change (EInternal):
// the caller makes them; any other kind is EInvalid.
func FromSpec(sp request.Spec) (Change, error) {
	switch sp.Kind {
	case request.SpecPatch:
		if sp.BucketBy != nil {
			return PatchBucketBy(sp.Description, sp.Enabled, sp.Fallback, *sp.BucketBy), nil
		}
		return Patch(sp.Description, sp.Enabled, sp.Fallback), nil
	case request.SpecSetRules:
		return SetRules(sp.Rules), nil
	case request.SpecSetPrerequisites:
		return SetPrerequisites(sp.Prerequisites), nil
	case request.SpecAddBucket:
		if sp.Bucket == nil {
			return Change{}, feature.Errorf(feature.EInvalid, "the requested add_bucket names no bucket")
		}
		return AddBucket(*sp.Bucket), nil
	case request.SpecUpdateBucket:
		return UpdateBucket(sp.Name, sp.Replicas, sp.Value), nil
	case request.SpecRemoveBucket:
		return RemoveBucket(sp.Name), nil
	case request.SpecSetBuckets:
		return SetBuckets(sp.Buckets), nil
	case request.SpecSetOverride:
		return SetOverride(sp.User, sp.Name), nil
	case request.SpecClearOverride:
		return ClearOverride(sp.User), nil
	case request.SpecReshuffle:
		return Reshuffle(sp.Salt), nil
	case request.SpecPromote:
		if sp.Source == nil {
			return Change{}, feature.Errorf(feature.EInvalid, "the requested promotion has no source configuration")
		}
		return Promotion(sp.From, *sp.Source, sp.Include)
	case request.SpecArchive, request.SpecRestore, request.SpecRamp:
		return Change{}, feature.Errorf(feature.EInternal, "a requested %s is made by the service, not as a change", sp.Words())
	}
	return Change{}, feature.Errorf(feature.EInvalid, "change kind %q cannot be requested", sp.Kind)
}
