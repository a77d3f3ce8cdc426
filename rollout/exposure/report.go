// Package exposure is what rollout reports of the evaluations its
// features served: per bucket of a feature's current version and per
// version (Report, made by NewReport from the counts and sketches of
// distinct users that package rollout keeps), with the sample-ratio checks
// of each version's users against its exact shares (package
// rollout/stats), and what became of a batch of counts an in-app client
// sent (BatchResult, CheckBatch). It reads no store:
// rollout.Service.Exposures and AddExposureBatch gather what it needs and
// hand it over.
//
// report.go holds the report and how it is made; batch.go how a batch's
// counts are checked and the answer to it; estimate.go how many
// evaluations a day the rules a change of rules moves served
// (EstimateRules).
package exposure

import (
	"slices"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/feature/hll"
	"github.com/rollout/rollout/rollout/stats"
)

// Bucket is how many evaluations a bucket served at the feature's
// current version, to how many distinct users, and the share of users it
// gets exactly and as observed (of the users, or of the evaluations when
// no app counted users).
type Bucket struct {
	Bucket   *string `json:"bucket"` // null: no bucket
	Count    int64   `json:"count"`
	Users    int64   `json:"users"`
	Observed float64 `json:"observed_share"`
	Exact    float64 `json:"exact_share"`
}

// Version is the evaluations one version served from one bucket, and to
// how many distinct users (estimated, see package hll; 0 when the apps
// that counted them predate distinct users).
type Version struct {
	Version int    `json:"version"`
	Bucket  string `json:"bucket"`
	Count   int64  `json:"count"`
	Users   int64  `json:"users"`
}

// Report is what a feature served: per bucket at its current version,
// and the counts of every version.
type Report struct {
	Feature string `json:"feature"`
	Version int    `json:"version"`
	// Total is the evaluations of the current version, Users its
	// distinct users (estimated).
	Total    int64     `json:"total"`
	Users    int64     `json:"users"`
	Buckets  []Bucket  `json:"buckets"`
	Versions []Version `json:"versions"`
	// SRM is the sample-ratio check of the current version's distinct
	// users per bucket (null: nothing to test), VersionSRM those of
	// every version with users, newest first (see MaxSRMVersions).
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

// Counts are what a report of the feature Current is made of at time Now.
type Counts struct {
	// Current is the feature as it is served now.
	Current *feature.Compiled
	// Stored are the stored counts of the feature's key, one per version,
	// bucket and hour (rollout.ExposureStore.Exposures); those of another
	// feature once under the key are left out.
	Stored []feature.Exposure
	// StoredUsers are the stored sketches of its distinct users, per
	// version and bucket (Hour zero) and per hour since a day before Now
	// (rollout.ExposureStore.ExposureUsers).
	StoredUsers []feature.Exposure
	// InMemory are Current and its versions swapped out lately, whose
	// counters may hold counts not yet stored.
	InMemory []*feature.Compiled
	Now      time.Time
}

// MaxSRMVersions bounds how many old versions one report reads from the
// history to check (the most recent with counts); older ones get no
// check.
const MaxSRMVersions = 32

// SharesAt returns the exact shares of the ring the feature served at an
// old version, as its history keeps it, and false when the history lacks
// that version (or it is another feature's).
type SharesAt func(version int) (shares map[string]float64, ok bool, err error)

// NewReport makes the report of c's counts: those stored (every hour's,
// added up) and those still in memory. Totals saturate at math.MaxInt64;
// none is ever negative. sharesAt reads the shares of old versions for
// their sample-ratio checks, at most MaxSRMVersions of them.
func NewReport(c Counts, sharesAt SharesAt) (Report, error) {
	cur := c.Current
	dayAgo := c.Now.Add(-24 * time.Hour)
	counts := map[vb]int64{}
	var lastDay int64
	for _, e := range c.Stored {
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
	for _, e := range c.StoredUsers {
		if e.FeatureID != cur.Feature().ID {
			continue
		}
		if e.Hour.IsZero() {
			_ = sketch(vb{e.Version, e.Bucket}).UnmarshalBinary(e.Users)
		} else if e.Hour.After(dayAgo) {
			_ = day.UnmarshalBinary(e.Users)
		}
	}
	for _, m := range c.InMemory {
		for _, e := range m.Counts(nil) {
			k := vb{e.Version, e.Bucket}
			counts[k] = feature.AddCounts(counts[k], e.Count)
			lastDay = feature.AddCounts(lastDay, e.Count)
		}
		for bucket, u := range m.Users() {
			sketch(vb{m.Feature().Version, bucket}).Merge(u)
			day.Merge(u)
		}
	}

	rep := Report{Feature: cur.Feature().Key, Version: cur.Feature().Version, Versions: []Version{},
		LastDay: lastDay, LastDayUsers: day.Count(), UsersError: hll.RelativeError}
	current := new(hll.Sketch)
	for k, n := range counts {
		v := Version{Version: k.version, Bucket: k.bucket, Count: n}
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
	slices.SortFunc(rep.Versions, func(a, b Version) int {
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
		b := Bucket{Bucket: nullable(name), Count: n, Exact: served[name]}
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
	var err error
	if rep.VersionSRM, err = versionSRM(cur, byVersion, sharesAt); err != nil {
		return Report{}, err
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

// versionSRM returns the sample-ratio checks of the versions of the
// feature c with distinct users (version → bucket → users, estimated by
// sketches: see stats.CheckSRMEstimated), newest first: the current one's
// from memory, at most MaxSRMVersions older ones' from sharesAt (the most
// recent; a version the history lacks is left out).
func versionSRM(c *feature.Compiled, counts map[int]map[string]int64, sharesAt SharesAt) ([]stats.SRM, error) {
	versions := make([]int, 0, len(counts))
	for v := range counts {
		versions = append(versions, v)
	}
	slices.Sort(versions)
	slices.Reverse(versions)
	var out []stats.SRM
	lookups := MaxSRMVersions
	for _, v := range versions {
		var shares map[string]float64
		switch {
		case v == c.Feature().Version:
			shares = c.ServedRing().Shares() // built when c was compiled
		case lookups > 0:
			lookups--
			s, ok, err := sharesAt(v)
			if err != nil {
				return nil, err
			}
			if !ok {
				continue
			}
			shares = s
		default:
			continue
		}
		if r, ok := stats.CheckSRMEstimated(v, counts[v], shares, hll.RelativeError); ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// nullable is s, or nil for "" (no bucket).
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
