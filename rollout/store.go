package rollout

import (
	"context"
	"time"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/rollout/request"
)

// Version is one entry of a feature's history: the configuration a change
// produced, who made it and when, and what it did to users.
type Version struct {
	Version int       `json:"version"`
	Actor   string    `json:"actor"`
	Time    time.Time `json:"time"`
	Summary string    `json:"summary"`
	// Comment is what the change's author wrote about it; empty: none.
	Comment string          `json:"comment,omitempty"`
	Config  feature.Feature `json:"config"`
	// OverrideCount is how many overrides the version had: len of
	// Config.Overrides, also where a store leaves them out of Config
	// (Store.VersionSummaries, Store.Changes).
	OverrideCount int            `json:"override_count"`
	Report        feature.Report `json:"report"`
	// Seq orders versions of every feature in the order they were
	// written. Only Store.Changes sets it: it is the audit log's cursor.
	Seq int64 `json:"seq,omitempty"`
	// Kind is the kind of audit event that records the version (see
	// VersionEvent); "" for a change (a create at version 1). Stores do
	// not keep it in the version: its audit event holds it.
	Kind audit.Kind `json:"-"`
	// Subject is the Subject of its audit event: the schedule that made
	// it, say ("": none).
	Subject string `json:"-"`
	// Request, when not nil, is the approval that applies the version:
	// the store marks the request applied in the version's transaction,
	// or refuses the version with EConflict when the request is no
	// longer open, and records request_approve.
	Request *request.Decision `json:"-"`
	// Settles, when not nil, is the idempotency key of the request that
	// makes the version: the store marks it done with its answer in the
	// version's transaction (CreateFeature, UpdateFeature,
	// UpdateFeatureWith, RestoreFeature, ApplyRampStep), or refuses the
	// version with EKeyInUse when the key is no longer the request's. The
	// versions a segment's change or a batch writes beside their own
	// settle nothing: those writes take the key as an argument.
	Settles *idempotency.Settlement `json:"-"`
	// Elsewhere are the first versions of a created feature in the other
	// environments, written in the creation's transaction (CreateFeature
	// only).
	Elsewhere []Placed `json:"-"`
	// Environment, when not "", is the environment whose feature the
	// version is of, where a write spans environments (a segment's
	// change); "" is the store's own.
	Environment string `json:"-"`
}

// ChangeQuery selects entries of the audit log (Store.Changes).
type ChangeQuery struct {
	Feature string // only versions of this feature; "" for every feature
	Actor   string // only versions made by this actor; "" for anyone
	Before  int64  // only versions with a Seq below this; no bound when <= 0
	Limit   int    // at most this many; all when <= 0
}

// Store is what the Service needs of its storage: the small interfaces
// each part of it declares beside its code (features here, history,
// the change feed, exposures, segments, archive, audit trail, settings,
// requests, ramps, idempotency keys and documents' batches). Package
// store implements it; tokens (package auth) and webhooks (package
// webhook) declare their own. Each method is atomic: a change's feature
// row, version, audit event and report are written together or not at
// all.
//
// Every committed change of a feature (create, update, archive, restore,
// purge), of a segment, or of a token (create, revoke, a session signed
// out) also writes a Commit in the same transaction, numbered by a
// revision that grows by one with each commit, in commit order: a reader
// that sees revision n committed sees every commit below n too. Refused
// changes (ENotFound, EConflict) write no commit.
//
// Errors: a *feature.Error with ENotFound when the feature or version does
// not exist, EConflict when CreateFeature meets an existing key or
// UpdateFeature finds the stored version is not the expected one,
// EUnavailable when the database cannot be reached or written (busy,
// locked, full, read-only); anything else is a failure of the store.
type Store interface {
	FeatureStore
	HistoryStore
	FeedStore
	ExposureStore
	ArchiveStore
	AuditStore
	SettingsStore
	RequestStore
	RampStore
	ScheduleStore
	IdempotencyStore
	BatchStore
	SegmentStore
}

// FeatureStore keeps the served features, each with its history.
type FeatureStore interface {
	// Features returns the current configuration of every served feature:
	// archived ones are left out, and Feature, UpdateFeature and
	// UpdateFeatureWith answer ENotFound for them (see ArchiveStore).
	// Every write that appends a version also records its audit event
	// (VersionEvent) in the same transaction.
	Features(ctx context.Context) ([]feature.Feature, error)
	// Feature returns the current configuration of one feature.
	Feature(ctx context.Context, key string) (feature.Feature, error)
	// CreateFeature stores a new feature at version 1 with its first
	// history entry.
	CreateFeature(ctx context.Context, f feature.Feature, v Version) error
	// UpdateFeature replaces the stored feature, which must be at version
	// f.Version-1, with f and appends v (v.Version == f.Version).
	UpdateFeature(ctx context.Context, f feature.Feature, v Version) error
	// UpdateFeatureWith reads the feature key and writes the version next
	// makes of it, as UpdateFeature does, holding the feature from the
	// read to the write so that no other write of it, by any process, comes
	// between: it never fails with EConflict for a version that moved on.
	// next's error is returned as is, and nothing is written then.
	UpdateFeatureWith(ctx context.Context, key string, next func(cur feature.Feature) (feature.Feature, Version, error)) error
}

// CommitKind says what a commit changed.
type CommitKind string

// The kinds of commits.
const (
	CommitFeature CommitKind = "feature" // a feature was created, changed or deleted
	CommitToken   CommitKind = "token"   // a token was created or revoked, or a session signed out
	// CommitEnvironment: an environment was created, changed or deleted.
	CommitEnvironment CommitKind = "environment"
)

// Commit is one committed change in the store's feed: its revision, what it
// changed (the feature's key or the token's name) and when.
type Commit struct {
	Revision int64      `json:"revision"`
	Kind     CommitKind `json:"kind"`
	Key      string     `json:"key"`
	Time     time.Time  `json:"time"`
}

// ExposureBatchMemory is how long a store remembers the ID of a batch of
// exposures, and so how long an app may retry sending one without it
// counting twice.
const ExposureBatchMemory = 24 * time.Hour

// Clock tells the time of changes; tests set their own.
type Clock func() time.Time
