// Package feature is what a feature flag is and how it is evaluated: its
// buckets on a consistent-hash ring (package ring), its rules, the
// segments they use and the contexts they test, its validation, its
// compiled form and the snapshots that evaluate every feature from
// memory, the sync form that in-app clients evaluate with the same code,
// the churn report of a change, and the one error type. It imports ring
// and the standard library only: the server (package rollout and its
// adapters), the in-app client (package client) and its OpenFeature
// provider all build on it, so that they answer alike, bit for bit.
//
// # A map of the package
//
// Features and buckets (feature.go, labels.go). A Feature holds its
// Buckets, each a node of the feature's ring with a number of replicas and
// a JSON value; a salt that keys its users; a kill switch (Enabled), a
// Fallback bucket, per-user Overrides, and Tags and an Owner. Validate
// checks a configuration against the limits (MaxReplicas, MaxPoints,
// MaxBuckets, MaxTags, …) and ValidateStored one that a store holds from
// before some of them; ValidateUser checks a user ID, ValidKey and
// ValidBucketName a key and a bucket's name.
//
// Targeting (rules.go, target.go, pattern.go, anyof.go, split.go). A feature's Rules test the
// attributes of an evaluation's Context: overrides by user ID first, then
// the first rule whose Conditions all hold (serving a bucket or the ring),
// then the ring, which hashes the feature's BucketBy attribute when set. A
// Segment is a named set of conditions that rules use (in_segment). A
// condition may be an any-of of others, and compare strings ignoring
// case (anyof.go). A rule may serve a split of its population: a fine
// ring of its own that the server plans, hashed apart from the feature's
// ring and from the rule's name (split.go; SplitChanges are the exact
// moves of a change of it).
// Conditions are parsed and compiled once per version; the cost of
// matches patterns is bounded by their compiled programs, per pattern,
// segment and feature (Compiled.CheckPatterns), and by the bytes one
// condition reads; the conditions
// one evaluation tests by MaxConditionChecks, a segment's counted at each
// use. Patterns and conditions stored before those limits compile as
// conditions that never hold. ValidateContext and ContextFromJSON bound a
// context (MaxContextBytes among others); Snapshot.Costly names the
// features whose evaluation may cost much (CostlyEvaluation), which a
// server may run apart. DescribeRule and DescribeConditions say rules in
// words.
//
// Evaluation (evaluate.go, snapshot.go). Compile makes a feature at one
// version, with the segments its rules use (CompileSegment), a Compiled:
// its ring built, its Outcomes made, counters of the evaluations it
// serves. A Snapshot holds every compiled feature and segment at one store
// revision and answers Evaluate, EvaluateContext, Peek and Shares from
// memory, without locks; it is immutable, and With, WithSegments and At
// make the next one. Evaluation.OpenFeatureReason names an evaluation's
// reason as OpenFeature does (STATIC, SPLIT, TARGETING_MATCH, …), for the
// server's OFREP API and the OpenFeature provider alike.
//
// User lists (userlist.go). A segment may list up to MaxListUsers users
// instead of conditions (Segment.List): a UserList holds them hashed as
// overrides are (ListUserHash), matched by the feature's bucketing key
// with one hash and one look-up, whatever the list's size; Diff and Edit
// count and make a change of it exactly.
//
// Prerequisites (prerequisite.go). A feature's Prerequisites are other
// features that must serve the user some of their buckets; else it
// serves its fallback, ReasonPrerequisiteFailed. A Snapshot evaluates
// them from memory within MaxPrerequisiteDepth and
// MaxPrerequisiteEvaluations; CheckPrerequisites refuses loops and long
// chains (EPrerequisites); DependantChangeOf reckons the users a change of
// a prerequisite flips.
//
// Explanations (explain.go). Snapshot.Explain says why a feature serves
// a user what it does, step by step, each condition with why it held or
// not.
//
// Sync forms (syncform.go). Apps that evaluate in their own process get
// each feature's sync form: its configuration without descriptions or
// actors, overrides keyed by a salted hash of the user ID (OverrideHash),
// encoded once per version. A SyncDocument is every feature's at one
// revision (AppendSync, SyncTag); DecodeSync builds a Snapshot from it and
// ApplySync the next one from the changed features a stream carries.
//
// Exposures (exposure.go, users.go). What a compiled feature served,
// counted per bucket and rule, evaluations and distinct users (a
// HyperLogLog sketch per outcome, package hll), both by Compiled.count,
// the one place every serving path counts: Snapshot.TakeExposures and
// Compiled.TakeExposures take the counts as Exposures, Counts reads them, Restore puts back those a
// flush could not store; ValidateExposureBatch checks the form of a batch
// an app sends (at most MaxExposureBatch counts).
//
// Churn reports (report.go). Compiled.ReportFrom is the exact Report of a
// change between two compiled versions: the fraction of users it moves,
// from which bucket to which (Moves), beside what modulo and range
// bucketing (RangeChurn) would move, the overridden users it moves, and
// the populations a change of rules moves (RuleChanges).
//
// Errors (error.go). Every error meant for a user is an *Error with a code
// (EInvalid, ENotFound, EConflict, EPrecondition, EChurn, EUnavailable,
// EForbidden, EInternal) and a message that says what was wrong and how
// to fix it; ErrorCode and ErrorMessage read them through any wrapping.
// The API maps each code to one HTTP status. Validation is said once,
// here, for the API's bodies, documents and the in-app client alike: what
// Feature.Validate and Segment.Validate refuse is an EInvalid *Error whose
// Field is the place of the mistake ("buckets[1].name",
// "rules[0].conditions[1].value", `overrides["u1"]`), which its message
// starts with; Error.Within places it within what holds the feature (a
// document's "features[2]").
package feature
