// Package document is rollouts as code: a Document is the features and
// segments of a server written down as a file (YAML or JSON, one schema;
// package internal/docfile reads and writes the files): each feature's
// buckets with their shares (or replicas), values, overrides, kill switch,
// fallback, rules, description, tags and owner. It imports no part of the
// change pipeline: package rollout applies a document's plan
// (Service.PlanDocument, Service.ApplyDocument: every change as one batch
// of versions, each checked against the version its plan read, or none of
// them).
//
// A document is declarative about the features it lists: a field it leaves
// out takes its default (no description, no overrides, enabled), except
// the salt, which a listed feature keeps. Features of the server that it
// does not list are left alone (the plan names them as Unlisted).
//
// # A map of the package
//
// The document (document.go). Document, Feature, Segment and Bucket, and
// their limits (MaxBytes, MaxFeatures). Document.Validate checks each
// feature and segment as package feature does, at its place in the
// document (an *Error with its field path, features[2].buckets[0].share,
// and its YAML path), and what only a document has (shares, tolerance,
// each listed once); CheckSegments what needs the server's segments.
// Export writes a snapshot as a document, which plans to no change.
//
// The plan (plan.go). Document.Plan compares a document with a
// feature.Snapshot and tells, feature by feature and segment by segment,
// what would change (a Plan of FeatureChange and SegmentChange, each
// Before and After) and its exact churn: each bucket's share planned as
// package rollout/plan plans it (a BucketPlan), a share the feature's
// replicas already serve kept as it is.
package document
