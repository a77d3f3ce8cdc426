package rollout

import (
	"context"
	"time"
)

// Version is one entry of a feature's history: the configuration a change
// produced, who made it and when, and what it did to users.
type Version struct {
	Version int       `json:"version"`
	Actor   string    `json:"actor"`
	Time    time.Time `json:"time"`
	Summary string    `json:"summary"`
	Config  Feature   `json:"config"`
	Report  Report    `json:"report"`
}

// Store keeps features and their history. Each method is atomic: a change's
// feature row, version and report are written together or not at all.
//
// Errors: an *Error with ENotFound when the feature or version does not
// exist, EConflict when CreateFeature meets an existing key or
// UpdateFeature/DeleteFeature find the stored version is not the expected
// one, EUnavailable when the database cannot be reached or written (busy,
// locked, full, read-only); anything else is a failure of the store.
type Store interface {
	// Features returns the current configuration of every feature.
	Features(ctx context.Context) ([]Feature, error)
	// CreateFeature stores a new feature at version 1 with its first
	// history entry.
	CreateFeature(ctx context.Context, f Feature, v Version) error
	// UpdateFeature replaces the stored feature, which must be at version
	// f.Version-1, with f and appends v (v.Version == f.Version).
	UpdateFeature(ctx context.Context, f Feature, v Version) error
	// DeleteFeature removes the feature at the given version and its
	// history.
	DeleteFeature(ctx context.Context, key string, version int) error
	// Versions returns the feature's history, newest first, at most limit
	// entries (all when limit <= 0) with a version below before (no bound
	// when before <= 0).
	Versions(ctx context.Context, key string, before, limit int) ([]Version, error)
	// Version returns one entry of the feature's history.
	Version(ctx context.Context, key string, version int) (Version, error)
	// AddExposures adds counts of evaluations to the stored ones; counts of
	// features that no longer exist are dropped.
	AddExposures(ctx context.Context, counts []Exposure) error
	// Exposures returns the stored counts of a feature, newest version
	// first.
	Exposures(ctx context.Context, key string) ([]Exposure, error)
}

// Exposure is a count of evaluations a feature served at one version from
// one bucket ("" for no bucket).
type Exposure struct {
	Feature   string `json:"-"`
	FeatureID string `json:"-"`
	Version   int    `json:"version"`
	Bucket    string `json:"bucket"`
	Count     int64  `json:"count"`
}

// Clock tells the time of changes; tests set their own.
type Clock func() time.Time
