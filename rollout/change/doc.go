// Package change is the vocabulary of edits of a feature's configuration:
// a Change is one edit, with the one-line summary its version carries, the
// kind of its audit event, and its spec, the edit as data that a change
// request stores (package rollout/request). It is pure: it reads and
// writes no store, and a Change does nothing until a caller applies it to
// a copy of a feature (Change.Apply) and validates the result. Package
// rollout's Service applies changes one version at a time.
//
// # A map of the package
//
// The type and the edits of buckets, overrides and the salt (change.go):
// Change with its Spec, Summary, Kind, Apply, and the copies As and
// WithSpec; AddBucket, UpdateBucket, RemoveBucket, SetBuckets, Patch,
// SetOverride, ClearOverride, Reshuffle, and Rollback to an old version's
// configuration.
//
// The edits of targeting (target.go): SetRules, SetBucketBy,
// PatchBucketBy, SetPrerequisites, Combine (several changes as one
// version), and AbbreviateSummary, the bound of a summary made of a list.
//
// Labels (labels.go): SetLabels, the tags and the owner.
//
// Ramps (ramp.go): RampStep and RampFinal, a ramp's steps.
//
// Requests (spec.go): Promotion, the change a promotion from another
// environment makes, and FromSpec, the change a request's spec describes.
package change
