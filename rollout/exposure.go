package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/feature/hll"
	"github.com/rollout/rollout/rollout/stats"
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

// BucketExposure is how many evaluations a bucket served at the feature's
// current version, to how many distinct users, and the share of users it
// gets exactly and as observed (of the users, or of the evaluations when
// no app counted users).
type BucketExposure struct {
	Bucket   *string `json:"bucket"` // null: no bucket
	Count    int64   `json:"count"`
	Users    int64   `json:"users"`
	Observed float64 `json:"observed_share"`
	Exact    float64 `json:"exact_share"`
}

// VersionExposure is the evaluations one version served from one bucket,
// and to how many distinct users (estimated, see package hll; 0 when the
// apps that counted them predate distinct users).
type VersionExposure struct {
	Version int    `json:"version"`
	Bucket  string `json:"bucket"`
	Count   int64  `json:"count"`
	Users   int64  `json:"users"`
}

// ExposureReport is what a feature served: per bucket at its current
// version, and the counts of every version.
type ExposureReport struct {
	Feature string `json:"feature"`
	Version int    `json:"version"`
	// Total is the evaluations of the current version, Users its
	// distinct users (estimated).
	Total    int64             `json:"total"`
	Users    int64             `json:"users"`
	Buckets  []BucketExposure  `json:"buckets"`
	Versions []VersionExposure `json:"versions"`
	// SRM is the sample-ratio check of the current version's distinct
	// users per bucket (null: nothing to test), VersionSRM those of
	// every version with users, newest first (see versionSRM).
	SRM        *stats.SRM  `json:"srm"`
	VersionSRM []stats.SRM `json:"version_srm"`
	// LastDay is the evaluations of the last 24 hours, of every version:
	// the counts stored for the hours that began in them, and those still
	// in memory; LastDayUsers their distinct users, every version and
	// bucket together (estimated): how the dashboard says users a day.
	LastDay      int64 `json:"last_day"`
	LastDayUsers int64 `json:"last_day_users"`
	// UsersError is the relative standard error of the users' estimates.
	UsersError float64 `json:"users_error"`
}

// Exposures returns the evaluation counts and distinct users of the
// feature key: those stored (every hour's, added up) and those still in
// memory. Totals saturate at math.MaxInt64; none is ever negative.
func (s *Service) Exposures(ctx context.Context, key string) (ExposureReport, error) {
	cur, err := s.known(ctx, key)
	if err != nil {
		return ExposureReport{}, err
	}
	stored, err := s.store.Exposures(ctx, key)
	if err != nil {
		return ExposureReport{}, err
	}
	now := s.now().UTC()
	dayAgo := now.Add(-24 * time.Hour)
	storedUsers, err := s.store.ExposureUsers(ctx, key, dayAgo)
	if err != nil {
		return ExposureReport{}, err
	}
	counts := map[vb]int64{}
	var lastDay int64
	for _, e := range stored {
		if e.FeatureID == cur.Feature().ID {
			k := vb{e.Version, e.Bucket}
			counts[k] = feature.AddCounts(counts[k], e.Count)
			if e.Hour.After(dayAgo) {
				lastDay = feature.AddCounts(lastDay, e.Count)
			}
		}
	}
	users := map[vb]*hll.Sketch{}
	day := new(hll.Sketch)
	sketch := func(k vb) *hll.Sketch {
		if users[k] == nil {
			users[k] = new(hll.Sketch)
		}
		return users[k]
	}
	for _, e := range storedUsers {
		if e.FeatureID != cur.Feature().ID {
			continue
		}
		if e.Hour.IsZero() {
			_ = sketch(vb{e.Version, e.Bucket}).UnmarshalBinary(e.Users)
		} else if e.Hour.After(dayAgo) {
			_ = day.UnmarshalBinary(e.Users)
		}
	}
	for _, c := range s.inMemory(cur) {
		for _, e := range c.Counts(nil) {
			k := vb{e.Version, e.Bucket}
			counts[k] = feature.AddCounts(counts[k], e.Count)
			lastDay = feature.AddCounts(lastDay, e.Count)
		}
		for bucket, u := range c.Users() {
			sketch(vb{c.Feature().Version, bucket}).Merge(u)
			day.Merge(u)
		}
	}

	rep := ExposureReport{Feature: key, Version: cur.Feature().Version, Versions: []VersionExposure{},
		LastDay: lastDay, LastDayUsers: day.Count(), UsersError: hll.RelativeError}
	current := new(hll.Sketch)
	for k, n := range counts {
		v := VersionExposure{Version: k.version, Bucket: k.bucket, Count: n}
		if u := users[k]; u != nil {
			v.Users = u.Count()
		}
		rep.Versions = append(rep.Versions, v)
		if k.version == rep.Version {
			rep.Total = feature.AddCounts(rep.Total, n)
			if u := users[k]; u != nil {
				current.Merge(u)
			}
		}
	}
	rep.Users = current.Count()
	slices.SortFunc(rep.Versions, func(a, b VersionExposure) int {
		if a.Version != b.Version {
			return b.Version - a.Version
		}
		return strings.Compare(a.Bucket, b.Bucket)
	})
	served := cur.ServedRing().Shares() // the ring built when cur was compiled
	names := make([]string, 0, len(cur.Feature().Buckets)+1)
	for _, b := range cur.Feature().Buckets {
		names = append(names, b.Name)
	}
	slices.Sort(names) // as the ring orders them
	var usersTotal int64
	for _, name := range names {
		if u := users[vb{rep.Version, name}]; u != nil {
			usersTotal += u.Count()
		}
	}
	for _, name := range append(names, "") {
		k := vb{rep.Version, name}
		n := counts[k]
		if name == "" && n == 0 {
			continue
		}
		b := BucketExposure{Bucket: nullable(name), Count: n, Exact: served[name]}
		if u := users[k]; u != nil {
			b.Users = u.Count()
		}
		if name == "" && len(served) == 0 {
			b.Exact = 1
		}
		switch {
		case usersTotal > 0:
			b.Observed = float64(b.Users) / float64(usersTotal)
		case rep.Total > 0:
			b.Observed = float64(n) / float64(rep.Total)
		}
		rep.Buckets = append(rep.Buckets, b)
	}
	byVersion := map[int]map[string]int64{}
	for k, u := range users {
		if byVersion[k.version] == nil {
			byVersion[k.version] = map[string]int64{}
		}
		byVersion[k.version][k.bucket] = u.Count()
	}
	if rep.VersionSRM, err = s.versionSRM(ctx, cur, byVersion); err != nil {
		return ExposureReport{}, err
	}
	if rep.VersionSRM == nil {
		rep.VersionSRM = []stats.SRM{}
	}
	if len(rep.VersionSRM) > 0 && rep.VersionSRM[0].Version == rep.Version {
		rep.SRM = &rep.VersionSRM[0]
	}
	return rep, nil
}

// vb is a version and bucket of a feature.
type vb struct {
	version int
	bucket  string
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

// ExposureBatchResult is what AddExposureBatch did with a batch.
type ExposureBatchResult struct {
	// Added is false when the batch added nothing: its ID had been
	// counted already, or every count was skipped.
	Added bool
	// Counted is how many of the batch's counts were added.
	Counted int
	// Skipped are the counts left out, by index.
	Skipped []SkippedExposure
}

// SkippedExposure is a count of a batch that was left out, and why: its
// feature no longer exists (deleted since the app's copy was made), or
// its version is missing from the feature's history. These are not
// errors: an app may well have counted a feature that was deleted since,
// and its batch must not be refused for it, again and again.
type SkippedExposure struct {
	Index     int    `json:"index"`
	FeatureID string `json:"feature_id"`
	Reason    string `json:"reason"`
}

// exposureChecks is what AddExposureBatch keeps between batches: the
// features of a snapshot by ID, and the bucket names of old versions
// (versions never change).
type exposureChecks struct {
	byID atomic.Pointer[featureIndex]

	mu      sync.Mutex
	buckets map[featureVersion]versionNames
}

// versionNames are the bucket and rule names of a feature at a version.
type versionNames struct {
	buckets, rules []string
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
func (s *Service) AddExposureBatch(ctx context.Context, batch string, counts []feature.Exposure) (ExposureBatchResult, error) {
	if err := feature.ValidateExposureBatch(batch, counts); err != nil {
		return ExposureBatchResult{}, err
	}
	if err := s.catchUpWith(ctx, counts); err != nil {
		return ExposureBatchResult{}, err
	}
	byID := s.featuresByID()
	now := s.now().UTC()
	var res ExposureBatchResult
	kept := make([]feature.Exposure, 0, len(counts))
	lookups := maxVersionLookups
	for i, e := range counts {
		c := byID[e.FeatureID]
		if c == nil {
			res.Skipped = append(res.Skipped, SkippedExposure{Index: i, FeatureID: e.FeatureID,
				Reason: "no feature has this ID: it was deleted, or never existed"})
			continue
		}
		f := c.Feature()
		switch {
		case e.Feature != "" && e.Feature != f.Key:
			return ExposureBatchResult{}, feature.Errorf(feature.EInvalid, "exposure %d: feature_id %q is the ID of feature %q, not %q", i, e.FeatureID, f.Key, e.Feature)
		case e.Version > f.Version:
			return ExposureBatchResult{}, feature.Errorf(feature.EInvalid, "exposure %d: feature %q is at version %d: version %d does not exist", i, f.Key, f.Version, e.Version)
		}
		if e.Bucket != "" || e.Rule != nil && *e.Rule != "" {
			names, err := s.bucketsAt(ctx, c, e.Version, &lookups)
			switch {
			case feature.ErrorCode(err) == feature.ENotFound:
				res.Skipped = append(res.Skipped, SkippedExposure{Index: i, FeatureID: e.FeatureID,
					Reason: fmt.Sprintf("version %d of feature %q is not in its history", e.Version, f.Key)})
				continue
			case err != nil:
				return ExposureBatchResult{}, err
			case e.Bucket != "" && !slices.Contains(names.buckets, e.Bucket):
				return ExposureBatchResult{}, feature.Errorf(feature.EInvalid, "exposure %d: feature %q had no bucket %q at version %d (it had %s)", i, f.Key, e.Bucket, e.Version, strings.Join(names.buckets, ", "))
			case e.Rule != nil && *e.Rule != "" && !slices.Contains(names.rules, *e.Rule):
				return ExposureBatchResult{}, feature.Errorf(feature.EInvalid, "exposure %d: feature %q had no rule %q at version %d", i, f.Key, *e.Rule, e.Version)
			}
		}
		e.Feature, e.Hour = f.Key, now
		kept = append(kept, e)
	}
	if len(kept) == 0 {
		return res, nil
	}
	added, err := s.store.AddExposureBatch(ctx, batch, now, kept)
	if err != nil {
		return ExposureBatchResult{}, err
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
func (s *Service) bucketsAt(ctx context.Context, c *feature.Compiled, version int, lookups *int) (versionNames, error) {
	if version == c.Feature().Version {
		return bucketNames(c.Feature()), nil
	}
	key := featureVersion{c.Feature().ID, version}
	s.mu.Lock()
	for _, r := range s.retired {
		if r.c.Feature().ID == key.id && r.c.Feature().Version == version {
			s.mu.Unlock()
			return bucketNames(r.c.Feature()), nil
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
		return versionNames{}, feature.Errorf(feature.EUnavailable, "the batch counts more old versions than one request checks (%d): send it again", maxVersionLookups)
	}
	*lookups--
	v, err := s.store.Version(ctx, c.Feature().Key, version)
	if err != nil {
		return versionNames{}, err
	}
	if v.Config.ID != "" && v.Config.ID != key.id {
		return versionNames{}, feature.NotFound(c.Feature().Key) // the key's history is another feature's
	}
	names = bucketNames(v.Config)
	x.mu.Lock()
	if x.buckets == nil || len(x.buckets) >= versionBucketsKept {
		x.buckets = map[featureVersion]versionNames{}
	}
	x.buckets[key] = names
	x.mu.Unlock()
	return names, nil
}

func bucketNames(f feature.Feature) versionNames {
	names := versionNames{buckets: make([]string, len(f.Buckets)), rules: make([]string, len(f.Rules))}
	for i, b := range f.Buckets {
		names.buckets[i] = b.Name
	}
	for i, r := range f.Rules {
		names.rules[i] = r.Name
	}
	return names
}
