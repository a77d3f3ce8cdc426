package rollout

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rollout/rollout/rollout/exposure"
	"github.com/rollout/rollout/rollout/feature"
)

// Evaluations are counted in memory, per feature version and bucket, by the
// compiled feature that served them, and flushed to the store at a short
// interval and at shutdown. A crash loses at most the counts of one
// interval; configuration is never at stake.

// ExposureStore keeps the counts of evaluations.
type ExposureStore interface {
	// AddExposures adds counts of evaluations to the stored ones of their
	// feature, version, bucket and hour (Exposure.Hour, truncated to the
	// hour), saturating at math.MaxInt64; counts of features that no
	// longer exist are dropped.
	AddExposures(ctx context.Context, counts []feature.Exposure) error
	// AddExposureBatch adds counts as AddExposures does, at most once per
	// batch ID: it records the ID, received at time at, in the same
	// transaction, and a batch whose ID it has recorded adds nothing and
	// returns false. IDs are kept for ExposureBatchMemory after at, and
	// those older are removed.
	AddExposureBatch(ctx context.Context, batch string, at time.Time, counts []feature.Exposure) (added bool, err error)
	// Exposures returns the stored counts of a feature, one per version,
	// bucket and hour: newest version first, then by bucket, then oldest
	// hour first. A count is never negative, whatever the database holds.
	Exposures(ctx context.Context, key string) ([]feature.Exposure, error)
	// RuleExposures returns the stored counts of the feature key per
	// version, rule and hour, for the hours that start at since or later
	// (Exposure.Bucket is "" and Rule set).
	RuleExposures(ctx context.Context, key string, since time.Time) ([]feature.Exposure, error)
	// ExposureUsers returns the distinct users of the feature key as
	// sketches (Exposure.Users; Count 0) per version and bucket for
	// every hour (Hour zero), and per version, bucket and hour for the
	// hours that start at since or later (hourly ones are kept for two
	// days).
	ExposureUsers(ctx context.Context, key string, since time.Time) ([]feature.Exposure, error)
}

// retired is a compiled feature swapped out of the snapshot. Evaluations
// that loaded the old snapshot may still count on it for a moment, so it is
// flushed twice before it is dropped.
type retired struct {
	c       *feature.Compiled
	flushes int
}

// retire remembers c, which the caller (holding s.mu) has just swapped out.
func (s *Service) retire(c *feature.Compiled) {
	if c != nil {
		s.retired = append(s.retired, retired{c: c})
	}
}

// FlushExposures writes the evaluation counts gathered since the last flush
// to the store. On failure the counts are kept for the next try.
func (s *Service) FlushExposures(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()

	s.mu.Lock()
	snap := s.Snapshot()
	targets := make([]*feature.Compiled, 0, snap.Len()+len(s.retired))
	for _, key := range snap.Keys() {
		targets = append(targets, snap.Compiled(key))
	}
	nRetired := len(s.retired)
	for _, r := range s.retired {
		targets = append(targets, r.c)
	}
	s.mu.Unlock()

	// taken[i] are the counts taken from targets[i].
	var counts []feature.Exposure
	taken := make([][]feature.Exposure, len(targets))
	for i, c := range targets {
		start := len(counts)
		counts = c.TakeExposures(counts)
		taken[i] = counts[start:len(counts):len(counts)]
	}
	if len(counts) > 0 {
		hour := s.now().UTC()
		for i := range counts {
			counts[i].Hour = hour
		}
		if err := s.store.AddExposures(ctx, counts); err != nil {
			for i, c := range targets {
				c.Restore(taken[i])
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
	every(ctx, interval, false, s.FlushExposures, report)
	final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.FlushExposures(final); err != nil && report != nil {
		report(err)
	}
}

// Exposures returns the evaluation counts and distinct users of the
// feature key (exposure.NewReport): those stored (every hour's, added up)
// and those still in memory. Totals saturate at math.MaxInt64; none is
// ever negative.
func (s *Service) Exposures(ctx context.Context, key string) (exposure.Report, error) {
	cur, err := s.known(ctx, key)
	if err != nil {
		return exposure.Report{}, err
	}
	stored, err := s.store.Exposures(ctx, key)
	if err != nil {
		return exposure.Report{}, err
	}
	now := s.now().UTC()
	storedUsers, err := s.store.ExposureUsers(ctx, key, now.Add(-24*time.Hour))
	if err != nil {
		return exposure.Report{}, err
	}
	counts := exposure.Counts{Current: cur, Stored: stored, StoredUsers: storedUsers, InMemory: s.inMemory(cur), Now: now}
	return exposure.NewReport(counts, func(v int) (map[string]float64, bool, error) {
		ver, err := s.store.Version(ctx, key, v)
		if feature.ErrorCode(err) == feature.ENotFound || err == nil && ver.Config.ID != "" && ver.Config.ID != cur.Feature().ID {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		return ver.Config.ServedRing().Shares(), true, nil
	})
}

// inMemory returns cur and the retired versions of its feature, whose
// counters may hold counts not yet stored.
func (s *Service) inMemory(cur *feature.Compiled) []*feature.Compiled {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []*feature.Compiled{cur}
	for _, r := range s.retired {
		if r.c.Feature().ID == cur.Feature().ID {
			out = append(out, r.c)
		}
	}
	return out
}

// Limits of AddExposureBatch's work per batch.
const (
	// maxReloads bounds how many features one batch reads again from the
	// store (counts of features this instance may not have caught up
	// with), and maxVersionLookups how many old versions it reads from
	// their history; see AddExposureBatch.
	maxReloads        = 16
	maxVersionLookups = 32
	// versionBucketsKept bounds the bucket names of old versions kept in
	// memory.
	versionBucketsKept = 4096
)

// exposureChecks is what AddExposureBatch keeps between batches: the
// features of a snapshot by ID, and the bucket names of old versions
// (versions never change).
type exposureChecks struct {
	byID atomic.Pointer[featureIndex]

	mu      sync.Mutex
	buckets map[featureVersion]exposure.Names
}

type featureIndex struct {
	snap *feature.Snapshot
	byID map[string]*feature.Compiled
}

type featureVersion struct {
	id      string
	version int
}

// featuresByID returns the snapshot's features by ID.
func (s *Service) featuresByID() map[string]*feature.Compiled {
	snap := s.Snapshot()
	if idx := s.exposures.byID.Load(); idx != nil && idx.snap == snap {
		return idx.byID
	}
	idx := &featureIndex{snap: snap, byID: make(map[string]*feature.Compiled, snap.Len())}
	for _, key := range snap.Keys() {
		c := snap.Compiled(key)
		idx.byID[c.Feature().ID] = c
	}
	s.exposures.byID.Store(idx)
	return idx.byID
}

// AddExposureBatch adds the counts of evaluations an app made from its own
// copy of the features (package client) to the stored ones, in the hour
// they arrive, once per batch ID: a batch sent again, because its answer
// was lost, adds nothing (Added is false).
//
// Each count must name an existing feature (its key, if given, must be
// the feature's), a version from 1 to the feature's current one, and a
// bucket the feature had at that version ("" for none). A batch with a
// count that does not is refused whole with an EInvalid *Error naming the
// count's index, and nothing is added; so is a malformed batch (see
// ValidateExposureBatch). Counts of features that no longer exist are
// skipped and reported, not refused.
//
// This instance may lag behind another that the app read its copy from:
// counts of a feature it does not know, or at a version it has not seen,
// make it read that feature again from the store first (for at most
// maxReloads features per batch). Checking buckets of old versions reads
// their history; a batch that needs more than maxVersionLookups such
// reads at once gets EUnavailable after them, and succeeds when sent
// again.
func (s *Service) AddExposureBatch(ctx context.Context, batch string, counts []feature.Exposure) (exposure.BatchResult, error) {
	if err := feature.ValidateExposureBatch(batch, counts); err != nil {
		return exposure.BatchResult{}, err
	}
	if err := s.catchUpWith(ctx, counts); err != nil {
		return exposure.BatchResult{}, err
	}
	byID := s.featuresByID()
	now := s.now().UTC()
	lookups := maxVersionLookups
	kept, res, err := exposure.CheckBatch(counts, byID, now, func(c *feature.Compiled, version int) (exposure.Names, error) {
		return s.bucketsAt(ctx, c, version, &lookups)
	})
	if err != nil {
		return exposure.BatchResult{}, err
	}
	if len(kept) == 0 {
		return res, nil
	}
	added, err := s.store.AddExposureBatch(ctx, batch, now, kept)
	if err != nil {
		return exposure.BatchResult{}, err
	}
	if added {
		res.Added, res.Counted = true, len(kept)
	}
	return res, nil
}

// catchUpWith reads again from the store the features of counts that this
// instance's snapshot does not know, or knows at an older version than
// the count's, at most maxReloads of them: another instance may have
// created or changed them a moment ago.
func (s *Service) catchUpWith(ctx context.Context, counts []feature.Exposure) error {
	byID := s.featuresByID()
	var keys []string
	for _, e := range counts {
		key := e.Feature
		if c := byID[e.FeatureID]; c != nil {
			if e.Version <= c.Feature().Version {
				continue
			}
			key = c.Feature().Key
		}
		if key != "" && !slices.Contains(keys, key) {
			if keys = append(keys, key); len(keys) == maxReloads {
				break
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range keys {
		if _, err := s.reload(ctx, key); err != nil && feature.ErrorCode(err) == feature.EUnavailable {
			return err
		}
	}
	return nil
}

// bucketsAt returns the bucket and rule names feature c had at version (at most its
// current one): from memory for the current version, versions this
// instance served recently and old versions looked up before, and
// otherwise from the feature's history, counting the lookup against
// *lookups. It returns ENotFound when the history lacks the version, and
// EUnavailable when *lookups is spent.
func (s *Service) bucketsAt(ctx context.Context, c *feature.Compiled, version int, lookups *int) (exposure.Names, error) {
	if version == c.Feature().Version {
		return exposure.NamesOf(c.Feature()), nil
	}
	key := featureVersion{c.Feature().ID, version}
	s.mu.Lock()
	for _, r := range s.retired {
		if r.c.Feature().ID == key.id && r.c.Feature().Version == version {
			s.mu.Unlock()
			return exposure.NamesOf(r.c.Feature()), nil
		}
	}
	s.mu.Unlock()
	x := &s.exposures
	x.mu.Lock()
	names, ok := x.buckets[key]
	x.mu.Unlock()
	if ok {
		return names, nil
	}
	if *lookups <= 0 {
		return exposure.Names{}, feature.Errorf(feature.EUnavailable, "the batch counts more old versions than one request checks (%d): send it again", maxVersionLookups)
	}
	*lookups--
	v, err := s.store.Version(ctx, c.Feature().Key, version)
	if err != nil {
		return exposure.Names{}, err
	}
	if v.Config.ID != "" && v.Config.ID != key.id {
		return exposure.Names{}, feature.NotFound(c.Feature().Key) // the key's history is another feature's
	}
	names = exposure.NamesOf(v.Config)
	x.mu.Lock()
	if x.buckets == nil || len(x.buckets) >= versionBucketsKept {
		x.buckets = map[featureVersion]exposure.Names{}
	}
	x.buckets[key] = names
	x.mu.Unlock()
	return names, nil
}
