package rollout

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"
)

// Evaluations are counted in memory, per feature version and bucket, by the
// compiled feature that served them, and flushed to the store at a short
// interval and at shutdown. A crash loses at most the counts of one
// interval; configuration is never at stake.

// retired is a compiled feature swapped out of the snapshot. Evaluations
// that loaded the old snapshot may still count on it for a moment, so it is
// flushed twice before it is dropped.
type retired struct {
	c       *compiled
	flushes int
}

// retire remembers c, which the caller (holding s.mu) has just swapped out.
func (s *Service) retire(c *compiled) {
	if c != nil {
		s.retired = append(s.retired, retired{c: c})
	}
}

// pending is one counter's value taken for a flush.
type pending struct {
	c      *compiled
	bucket int
	n      int64
}

func (c *compiled) bucketName(i int) string {
	if i == len(c.names) {
		return ""
	}
	return c.names[i]
}

// take resets c's counters and returns what they held.
func (c *compiled) take(out []pending) []pending {
	for i := range c.served {
		if n := c.served[i].Swap(0); n > 0 {
			out = append(out, pending{c: c, bucket: i, n: n})
		}
	}
	return out
}

// FlushExposures writes the evaluation counts gathered since the last flush
// to the store. On failure the counts are kept for the next try.
func (s *Service) FlushExposures(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()

	s.mu.Lock()
	targets := slices.Collect(maps.Values(s.Snapshot().features))
	nRetired := len(s.retired)
	for _, r := range s.retired {
		targets = append(targets, r.c)
	}
	s.mu.Unlock()

	var taken []pending
	for _, c := range targets {
		taken = c.take(taken)
	}
	if len(taken) > 0 {
		counts := make([]Exposure, len(taken))
		for i, p := range taken {
			f := &p.c.feature
			counts[i] = Exposure{Feature: f.Key, FeatureID: f.ID, Version: f.Version, Bucket: p.c.bucketName(p.bucket), Count: p.n}
		}
		if err := s.store.AddExposures(ctx, counts); err != nil {
			for _, p := range taken {
				p.c.served[p.bucket].Add(p.n)
			}
			return err
		}
	}

	s.mu.Lock()
	kept := s.retired[:0]
	for i, r := range s.retired {
		if i < nRetired {
			r.flushes++
		}
		if r.flushes < 2 {
			kept = append(kept, r)
		}
	}
	clear(s.retired[len(kept):])
	s.retired = kept
	s.mu.Unlock()
	return nil
}

// FlushExposuresEvery flushes the counts every interval until ctx is done,
// then once more. Failures go to report, and their counts wait for the next
// flush.
func (s *Service) FlushExposuresEvery(ctx context.Context, interval time.Duration, report func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if err := s.FlushExposures(ctx); err != nil {
				report(err)
			}
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := s.FlushExposures(final); err != nil {
				report(err)
			}
			return
		}
	}
}

// BucketExposure is how many evaluations a bucket served at the feature's
// current version, and the share of users it gets exactly and as observed.
type BucketExposure struct {
	Bucket   *string `json:"bucket"` // null: no bucket
	Count    int64   `json:"count"`
	Observed float64 `json:"observed_share"`
	Exact    float64 `json:"exact_share"`
}

// ExposureReport is what a feature served: per bucket at its current
// version, and the counts of every version.
type ExposureReport struct {
	Feature  string           `json:"feature"`
	Version  int              `json:"version"`
	Total    int64            `json:"total"`
	Buckets  []BucketExposure `json:"buckets"`
	Versions []Exposure       `json:"versions"`
}

// Exposures returns the evaluation counts of the feature key: those stored
// and those still in memory.
func (s *Service) Exposures(ctx context.Context, key string) (ExposureReport, error) {
	cur, err := s.known(ctx, key)
	if err != nil {
		return ExposureReport{}, err
	}
	stored, err := s.store.Exposures(ctx, key)
	if err != nil {
		return ExposureReport{}, err
	}
	type vb struct {
		version int
		bucket  string
	}
	counts := map[vb]int64{}
	for _, e := range stored {
		if e.FeatureID == cur.feature.ID {
			counts[vb{e.Version, e.Bucket}] += e.Count
		}
	}
	s.mu.Lock()
	inMemory := []*compiled{cur}
	for _, r := range s.retired {
		if r.c.feature.ID == cur.feature.ID {
			inMemory = append(inMemory, r.c)
		}
	}
	s.mu.Unlock()
	for _, c := range inMemory {
		for i := range c.served {
			if n := c.served[i].Load(); n > 0 {
				counts[vb{c.feature.Version, c.bucketName(i)}] += n
			}
		}
	}

	rep := ExposureReport{Feature: key, Version: cur.feature.Version, Versions: []Exposure{}}
	for k, n := range counts {
		rep.Versions = append(rep.Versions, Exposure{Version: k.version, Bucket: k.bucket, Count: n})
		if k.version == rep.Version {
			rep.Total += n
		}
	}
	slices.SortFunc(rep.Versions, func(a, b Exposure) int {
		if a.Version != b.Version {
			return b.Version - a.Version
		}
		return strings.Compare(a.Bucket, b.Bucket)
	})
	served := cur.servedRing().Shares() // the ring built when cur was compiled
	for _, name := range append(slices.Clone(cur.names), "") {
		n := counts[vb{rep.Version, name}]
		if name == "" && n == 0 {
			continue
		}
		b := BucketExposure{Bucket: nullable(name), Count: n, Exact: served[name]}
		if name == "" && len(served) == 0 {
			b.Exact = 1
		}
		if rep.Total > 0 {
			b.Observed = float64(n) / float64(rep.Total)
		}
		rep.Buckets = append(rep.Buckets, b)
	}
	return rep, nil
}

// AddExposureBatch adds the counts of evaluations an app made from its own
// copy of the features (package client) to the stored ones, once per batch
// ID: a batch sent again, because its answer was lost, adds nothing and
// returns false. Counts of features that no longer exist are dropped. It
// returns an EInvalid *Error for a malformed batch (see
// ValidateExposureBatch).
func (s *Service) AddExposureBatch(ctx context.Context, batch string, counts []Exposure) (bool, error) {
	if err := ValidateExposureBatch(batch, counts); err != nil {
		return false, err
	}
	return s.store.AddExposureBatch(ctx, batch, counts)
}
