package rollout

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
)

// Syncing a copy of the features into another process. The sync API serves
// a SyncDocument; a client decodes it and builds a Snapshot with
// NewSnapshot, so that it evaluates with the same code as the server, and
// counts its evaluations in the snapshot for TakeExposures to collect.

// SyncDocument is everything a process needs to evaluate every feature:
// their configurations (sorted by key) and the store revision the server's
// snapshot had caught up with.
type SyncDocument struct {
	Revision int64     `json:"revision"`
	Features []Feature `json:"features"`
}

// Document returns s as a SyncDocument. The features are copies.
func (s *Snapshot) Document() SyncDocument {
	out := SyncDocument{Revision: s.revision, Features: make([]Feature, 0, len(s.keys))}
	for _, key := range s.keys {
		out.Features = append(out.Features, s.features[key].feature.Clone())
	}
	return out
}

// NewSnapshot builds a snapshot of features at a store revision. A feature
// that does not validate, or whose key came before, is left out and named
// in the returned error; the snapshot holds all the others, so one bad
// feature never stops the rest from being served. The snapshot is never
// nil.
func NewSnapshot(features []Feature, revision int64) (*Snapshot, error) {
	all := make(map[string]*compiled, len(features))
	var errs []error
	for _, f := range features {
		if err := f.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("feature %q left out: %w", f.Key, err))
			continue
		}
		if _, dup := all[f.Key]; dup {
			errs = append(errs, fmt.Errorf("feature %q left out: the key appears twice", f.Key))
			continue
		}
		all[f.Key] = compile(f.Clone())
	}
	return newSnapshot(all, revision), errors.Join(errs...)
}

// Changed returns the keys of the features that next serves differently
// from s, sorted: those created, deleted, or at another version or ID.
func (s *Snapshot) Changed(next *Snapshot) []string {
	var out []string
	for key, c := range s.features {
		n, ok := next.features[key]
		if !ok || n.feature.ID != c.feature.ID || n.feature.Version != c.feature.Version {
			out = append(out, key)
		}
	}
	for key := range next.features {
		if _, ok := s.features[key]; !ok {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// TakeExposures appends to out the evaluations Evaluate counted in s since
// the last take, per feature, version and bucket, and resets those counts.
// Counts made concurrently are taken by this call or the next, never lost
// or taken twice.
func (s *Snapshot) TakeExposures(out []Exposure) []Exposure {
	var taken []pending
	for _, key := range s.keys {
		taken = s.features[key].take(taken[:0])
		for _, p := range taken {
			f := &p.c.feature
			out = append(out, Exposure{Feature: f.Key, FeatureID: f.ID, Version: f.Version, Bucket: p.c.bucketName(p.bucket), Count: p.n})
		}
	}
	return out
}

// Limits on one batch of exposures.
const (
	MaxExposureBatch = 10_000 // counts in one batch
	maxFeatureID     = 64
)

var batchPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{8,64}$`)

// ValidateExposureBatch reports, as an EInvalid *Error, what is wrong with a
// batch of evaluation counts sent by an app: its ID must be 8 to 64
// characters of A-Z, a-z, 0-9, '_' and '-', and each count must name a
// feature ID, a version, a bucket ("" for none) and a positive count.
func ValidateExposureBatch(batch string, counts []Exposure) error {
	if !batchPattern.MatchString(batch) {
		return Errorf(EInvalid, "batch ID %q is invalid: use 8 to 64 characters of A-Z, a-z, 0-9, '_', '-' (a random ID per batch, the same on a retry)", batch)
	}
	if len(counts) > MaxExposureBatch {
		return Errorf(EInvalid, "a batch holds at most %d counts, got %d", MaxExposureBatch, len(counts))
	}
	for i, e := range counts {
		switch {
		case e.FeatureID == "" || len(e.FeatureID) > maxFeatureID:
			return Errorf(EInvalid, "count %d: feature_id must be the feature's ID, 1 to %d bytes", i, maxFeatureID)
		case e.Version < 1:
			return Errorf(EInvalid, "count %d: version must be at least 1, got %d", i, e.Version)
		case e.Bucket != "" && !bucketPattern.MatchString(e.Bucket):
			return Errorf(EInvalid, "count %d: bucket %q is not a bucket name (\"\" counts evaluations that served no bucket)", i, e.Bucket)
		case e.Count < 1:
			return Errorf(EInvalid, "count %d: count must be positive, got %d", i, e.Count)
		}
	}
	return nil
}
