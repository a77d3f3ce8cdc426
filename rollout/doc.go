// Package rollout is the domain of rollout: feature flags whose users are
// spread over buckets by a consistent-hash ring, changed with an exact
// account of which users each change moves. It imports no HTTP, SQL or
// HTML: package api serves it over HTTP, package store keeps it in SQLite
// or PostgreSQL, package web shows it, and cmd wires them together.
//
// # A map of the package
//
// Features and buckets (feature.go). A Feature holds its Buckets, each a
// node of the feature's ring (package ring) with a number of replicas and a
// JSON value; a salt that keys its users; a kill switch (Enabled), a
// Fallback bucket and per-user Overrides. Validate checks a configuration
// against the limits (MaxReplicas, MaxPoints, MaxBuckets, …); ValidateUser
// checks a user ID.
//
// Evaluation (evaluate.go, snapshot.go). A feature is compiled once per
// version into what evaluation needs; a Snapshot holds every compiled
// feature at one store revision and answers Evaluate, Peek and Shares from
// memory, without locks. Evaluation counts exposures in the snapshot as it
// serves them.
//
// Targeting (rules.go, target.go, targetchange.go, segment.go,
// pattern.go). A
// feature's Rules test the attributes of an evaluation's Context
// (Snapshot.EvaluateContext): overrides by user ID first, then the first
// rule whose Conditions all hold (serving a bucket or the ring), then the
// ring, which hashes the feature's BucketBy attribute when set. Conditions
// are parsed and compiled once per version; a Segment is a named set of
// conditions that rules use (in_segment), versioned, and a change of one
// is a new version of every feature using it. SetRules, SetBucketBy and
// RuleChanges (the populations a change of rules moves) are its changes.
// The cost of matches patterns is bounded by their compiled programs, per
// pattern, segment and feature, and by the bytes one condition reads; the
// conditions one evaluation tests by MaxConditionChecks, segments counted
// at each use (pattern.go); a context by MaxContextBytes (ValidateContext).
// Patterns and conditions stored before those limits load as conditions
// that never hold. Snapshot.Costly names the features whose evaluation may
// cost much (CostlyEvaluation), which a server may run apart.
//
// Changes and churn reports (change.go, report.go, service.go). A Change
// is one edit (AddBucket, UpdateBucket, RemoveBucket, SetBuckets, Patch,
// SetOverride, ClearOverride, Reshuffle). The Service applies changes one at
// a time (writelock.go: a write waits at most MaxWriteWait), each against
// the feature's current version (ChangeOptions.IfMatch, retried on a lost
// race), refused over ChangeOptions.MaxChurn; each applied change writes a
// Version with its Report, the exact fraction of users it moves, from which
// bucket to which, beside what modulo and range bucketing (RangeChurn)
// would move, and swaps in a new Snapshot.
//
// Versions and history (store.go, history.go). Every change is a Version of
// its feature: Service.Versions and Service.Changes (the audit log) read
// them, Service.Rollback makes an old one current again, and
// Service.UserHistory replays what one user was served, version by version.
//
// Plans (plan.go). PlanShares, PlanNew and Service.Plan find the replica
// counts that bring a feature's buckets to target shares within a
// tolerance (CheckTolerance is the one rule for a tolerance, of plans and
// ramps alike), moving as few users as they can; the search itself is
// package rollout/plan. In a mode (PlanOptions.Mode) plans are fine, to
// FineTolerance: ModeNested changes only the buckets that change (users
// move only into or out of them), ModeExact rebalances every bucket and
// lists its CrossMoves, ModeAuto offers both.
//
// Ramps (ramp.go). A Ramp grows one bucket to a list of shares at set
// times (or shrinks it: a ramp down), each step an ordinary change that
// only adds replicas to it (removes them), so that a user who enters the
// bucket stays in it; its step of 100 % leaves the other buckets at 0
// replicas; ApplyDueRamps applies the
// steps that are due, on whichever instance gets to them first, and
// RunRamps does so at an interval.
//
// Archive and audit (archive.go, audit.go). Archive stops serving a
// feature but keeps it and its history; Restore serves it again as a new
// version; Purge removes an archived one (ArchiveStore). Every action is an
// AuditEvent that the store writes in the action's own transaction and
// never edits or deletes (AuditStore): each version's (VersionEvent, its
// Kind), ramps' (RampEvent), tokens'; ShareSummary words a report in
// percentages.
//
// Settings and change requests (settings.go, request.go). An editor's
// change passes a gate: the editors' churn limit, reshuffles (a salt, the
// feature's or a rule's bucket_by) for admins only, and, where approvals
// cover the feature, a change request (Request) instead of the change,
// archive, restore and ramp included; a request records the feature's tag
// and the segments' versions it was previewed at, and an approval after
// either moved previews it again (EPrecondition). Each step of an
// editor's ramp is held to the limit, and an editor's ramp pauses, waiting
// for an approval, when approvals come to cover its feature.
//
// Webhooks (webhook.go). Admins register URLs (NewWebhook, Webhooks) that
// receive every audit event after it commits, signed (WebhookSignature)
// with a Slack-compatible text (WebhookBody); each webhook keeps a cursor
// in the audit trail, and a delivery worker (package webhook) claims it
// with a lease (WebhookStore), backs off after a failure (Outcome,
// WebhookBackoff) and pauses it after WebhookMaxFailures in a row.
//
// Tokens and sessions (token.go). API tokens have a Role (admin, editor,
// viewer, evaluate) that Allows a Permission; Tokens authenticates their
// secrets from memory and follows their changes, noting when each was last
// used; the dashboard's sessions
// that signed out are kept until they expire (TokenStore).
//
// Exposures (exposure.go). What evaluations served, counted by feature,
// version and bucket, are flushed to the store (FlushExposures) and read
// back as an ExposureReport, with a sample-ratio check of each version's
// counts against its exact shares (srm.go: CheckSRM, ChiSquareSF); in-app
// clients send theirs in batches (AddExposureBatch), each taken once.
//
// The change feed (feed.go). Several instances may share one database:
// every committed change writes a Commit to the store's feed, and
// Service.Sync and Service.Follow read the commits an instance has not
// seen and reload the features they name; Subscribe passes them on (the
// API's change streams).
//
// Sync forms (syncform.go). Apps that evaluate in their own process get
// each feature's sync form: its configuration without descriptions or
// actors, overrides keyed by a salted hash of the user ID, encoded once per
// version. A SyncDocument is every feature's at one revision; DecodeSync
// builds a Snapshot from it and ApplySync the next one from the changed
// features a stream carries, so that the app evaluates with this same code.
//
// Idempotency (idempotency.go). A request with an Idempotency-Key holds a
// Claim on it while it runs (IdempotencyStore); its answer is settled in
// the transaction of the change it made, so that a retry gets the same
// answer and makes no second change.
//
// The store (store.go). Store is the storage the Service needs: features,
// versions, the commit feed, exposures, ramps (RampStore) and idempotency
// keys (IdempotencyStore), each method atomic, with the errors it may
// return; Tokens need a TokenStore. They are declared here, where they are
// used; package store implements them.
//
// Errors (error.go). Every error meant for a user is an *Error with a code
// (EInvalid, ENotFound, EConflict, EPrecondition, EChurn, EUnavailable,
// EInternal) and a message that says what was wrong and how to fix it;
// ErrorCode and ErrorMessage read them through any wrapping. The API maps
// each code to one HTTP status.
package rollout
