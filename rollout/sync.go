package rollout

import (
	"errors"
	"fmt"
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
