// Package rollout is the change pipeline of rollout: the Service that
// changes feature flags (package feature: what a feature is and how it is
// evaluated) one version at a time, with an exact account of which users
// each change moves, and keeps them, their history, ramps, requests,
// settings, audit trail and exposure counts in a Store. It imports
// no HTTP, SQL or HTML: package api serves it over HTTP, package store
// keeps it in SQLite or PostgreSQL, package web shows it, and cmd wires
// them together.
//
// # A map of the package
//
// The service and its changes (service.go, targetchange.go, labels.go,
// writelock.go, every.go). A change.Change is one edit (package
// rollout/change, the vocabulary of edits: AddBucket, UpdateBucket,
// RemoveBucket, SetBuckets, Patch, SetOverride, ClearOverride, Reshuffle,
// SetRules, SetBucketBy, SetLabels, Combine, and FromSpec, the change a
// request's spec describes). labels.go keeps what the service says of a
// feature's use (Now, LastEvaluated).
// The Service applies changes one at a time (writelock.go: a write waits
// at most MaxWriteWait), each against the feature's current version
// (ChangeOptions.IfMatch, retried on a lost race), refused over
// ChangeOptions.MaxChurn; each applied change writes a Version with its
// Report (package feature), estimates the evaluations a change of rules
// moves (targetchange.go), and swaps in a new feature.Snapshot. The
// background jobs (ramps, sweeps, flushes) loop with every.
//
// Prerequisites (prerequisite.go). change.SetPrerequisites is the change
// of a feature's prerequisites; every change checks that they fit the other
// features (no loop, chains of at most 5 links), its report names the
// dependants whose answers it may change, and Archive refuses a feature
// others require.
//
// Segments (segment.go). Service.CreateSegment, UpdateSegment and
// DeleteSegment change the segments rules use; a change of one is a new
// version of every feature using it, in one transaction (SegmentStore).
// User lists (userlist.go) are segments of users rather than conditions:
// CreateUserList, ReplaceUserList and EditUserList change them the same
// way, counting the users that enter and leave the list.
//
// Versions and history (store.go, history.go). Every change is a Version
// of its feature: Service.Versions and Service.Changes (the audit log)
// read them, Service.Rollback makes an old one current again, and
// Service.UserHistory replays what one user was served, version by
// version (package rollout/history: history.Assignment, history.Lookup).
//
// Plans (plan.go). Service.Plan finds the replica counts that bring a
// feature's buckets to target shares within a tolerance, moving as few
// users as it can, with the report of applying them: package rollout/plan
// plans (plan.For, plan.New, the modes, and plan.CheckTolerance, the one
// rule for a tolerance of plans and ramps alike).
//
// Ramps (ramp.go). A ramp (ramp.Ramp) grows one bucket to a list of shares at set
// times (or shrinks it: a ramp down), each step an ordinary change that
// only adds replicas to it (removes them), so that a user who enters the
// bucket stays in it; its step of 100 % leaves the other buckets at 0
// replicas; ApplyDueRamps applies the steps that are due, on whichever
// instance gets to them first, and RunRamps does so at an interval.
// Package rollout/ramp says what a ramp is (ramp.Ramp, as stored, with
// its audit events) and reckons it: what a ramp asks for (ramp.Spec), its
// steps and states, its tolerance, each step's replicas and preview. The
// store takes a ramp's approval and idempotency settlement as arguments
// of its write (RampStore), as it does an archive's.
//
// Scheduled changes (schedule.go). Package rollout/schedule says what a
// schedule is: a change of a feature (the body of a route, parsed by the
// route's own parser, a ScheduleParser) to apply at a set time
// (schedule.Schedule, schedule.Spec). The Service makes them
// (CreateSchedule), and ApplyDueSchedules claims the due ones in the store
// (ScheduleStore), so that each applies on one instance only, as actor
// schedule.Actor or fails with the reason; RunSchedules does so at an
// interval.
//
// Documents (ascode.go). A document.Document (package rollout/document:
// features and segments as code, their validation, plan and export) is
// planned against the features as the service holds them
// (Service.PlanDocument), and Service.ApplyDocument applies its plan as
// one commit of a Batch (BatchStore), each feature and segment at the
// version the plan read.
//
// Archive and audit (archive.go, audit.go). Archive stops serving a
// feature but keeps it and its history; Restore serves it again as a new
// version; Purge removes an archived one (ArchiveStore). Every action is
// an audit.Event (package rollout/audit: its kinds, events and queries,
// and the words of a report in percentages, audit.ShareSummary) that the
// store writes in the action's own transaction and never edits or
// deletes: each version's (VersionEvent, its Kind), ramps' (RampEvent),
// segments' (SegmentEvent); Service.AuditEvents reads the trail
// (AuditStore).
//
// Settings and change requests (settings.go, request.go). An editor's
// change (ChangeOptions.Role, an auth.Role of package rollout/auth, which
// keeps API tokens and sessions) passes a gate: the settings (package
// rollout/settings: the editors' churn limit, reshuffles for admins only,
// and the approvals policy) decide it, and where approvals cover the
// feature it becomes a change request (package rollout/request) instead
// of the change, archive, restore and ramp included; a request records
// the feature's tag and the segments' versions it was previewed at, and
// an approval after either moved previews it again (EPrecondition). Each
// step of an editor's ramp is held to the limit, and an editor's ramp
// pauses, waiting for an approval, when approvals come to cover its
// feature.
//
// Exposures (exposure.go). What evaluations served, counted by each
// compiled feature, are flushed to the store (FlushExposures,
// ExposureStore) and read back as an exposure.Report (package
// rollout/exposure, with a sample-ratio check of each version's distinct
// users against its exact shares); in-app clients send theirs in batches
// (AddExposureBatch), each taken once. Users are counted beside
// evaluations as sketches (package rollout/feature/hll), merged per
// version, bucket and hour: the report's users and users a day.
//
// Experiments are package rollout/experiment's: they read a Service's
// features and its snapshots' served hook, and write nothing through it.
//
// The change feed (feed.go). Several instances may share one database:
// every committed change writes a Commit to the store's feed, and
// Service.Sync and Service.Follow read the commits an instance has not
// seen and reload the features they name; Subscribe passes them on (the
// API's change streams).
//
// Idempotency (idempotency.go). A request with an Idempotency-Key holds
// an idempotency.Claim on it while it runs (IdempotencyStore; package
// rollout/idempotency). The claim travels in its change's options
// (ChangeOptions, ApplyOptions, RampOptions: an idempotency.Key); the
// service makes the request's answer once and hands it to the store in
// the value it writes (an idempotency.Settlement), whose transaction
// commits the key done with it together with the change. A retry gets
// that answer and makes no second change.
//
// The store (store.go). Store is the storage the Service needs, made of
// the small interfaces each part declares beside its code (FeatureStore,
// HistoryStore, FeedStore, ExposureStore, SegmentStore, ArchiveStore,
// AuditStore, SettingsStore, RequestStore, RampStore, IdempotencyStore,
// BatchStore), each method atomic, with the errors it may return
// (feature.Error codes); package store implements them. Tokens (package
// rollout/auth) and webhooks (package webhook, which delivers the audit
// trail) declare their own.
package rollout
