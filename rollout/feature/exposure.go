package feature

import (
	"math"
	"regexp"
	"time"

	"github.com/rollout/rollout/rollout/feature/hll"
)

// Exposure is a count of evaluations a feature served at one version from
// one bucket ("" for no bucket).
type Exposure struct {
	Feature   string `json:"-"`
	FeatureID string `json:"-"`
	Version   int    `json:"version"`
	Bucket    string `json:"bucket"`
	// Hour is the start of the UTC hour in which the counts were stored;
	// zero for counts stored before hours were kept. Stores keep one
	// total per feature, version, bucket and hour.
	Hour  time.Time `json:"-"`
	Count int64     `json:"count"`
	// Rule is the outcome that served these evaluations: the name of the
	// rule, or "" for the ring, an override or the default. nil: not known
	// (the batch of an app whose client predates rules' counts); such a
	// count adds to its bucket's only. Stores keep one total per feature,
	// version, rule and hour as well (see Store.RuleExposures).
	Rule *string `json:"rule,omitempty"`
	// Users is the distinct users of these evaluations, a sketch in its
	// binary form (hll.Sketch.MarshalBinary); nil: not known (a count
	// from an app whose client predates distinct users). Stores merge
	// the sketches per feature, version, bucket and hour.
	Users []byte `json:"-"`
}

// pending is the count of one bucket and rule of a compiled feature taken
// for a flush: the sum of the counters of its outcomes; on a failed flush
// it goes back to the counter of outcome.
type pending struct {
	c       *Compiled
	outcome int
	n       int64
	users   *hll.Sketch // nil: none
}

func (c *Compiled) bucketName(i int) string {
	if i == len(c.names) {
		return ""
	}
	return c.names[i]
}

// take resets c's counters and returns what they held, one pending per
// bucket and rule served.
func (c *Compiled) take(out []pending) []pending {
	start := len(out)
next:
	for i := range c.served {
		n := c.served[i].Swap(0)
		if n == 0 {
			continue
		}
		users := c.users[i].take()
		o := &c.outcomes[i]
		for j := start; j < len(out); j++ {
			if p := &out[j]; c.outcomes[p.outcome].bucket == o.bucket && c.outcomes[p.outcome].Rule == o.Rule {
				p.n = AddCounts(p.n, n)
				p.addUsers(users)
				c.users[i].recycle(users)
				continue next
			}
		}
		p := pending{c: c, outcome: i, n: n}
		p.addUsers(users)
		c.users[i].recycle(users)
		out = append(out, p)
	}
	return out
}

// addUsers merges the users of s (nil: none) into p's.
func (p *pending) addUsers(s *hll.Sketch) {
	if s == nil {
		return
	}
	if p.users == nil {
		p.users = new(hll.Sketch)
	}
	p.users.Merge(s)
}

// exposure is p as a count, in no hour yet.
func (p pending) exposure() Exposure {
	f, o := &p.c.feature, &p.c.outcomes[p.outcome]
	e := Exposure{Feature: f.Key, FeatureID: f.ID, Version: f.Version, Bucket: p.c.bucketName(o.bucket), Rule: &o.Rule, Count: p.n}
	if p.users != nil {
		e.Users = p.users.Append(nil)
	}
	return e
}

var batchPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{8,64}$`)

// ValidateExposureBatch reports, as an EInvalid *Error naming the first
// count at fault by its index, what is wrong with the form of a batch of
// evaluation counts sent by an app: its ID must be 8 to 64 characters of
// A-Z, a-z, 0-9, '_' and '-'; it holds 1 to MaxExposureBatch counts; each
// names a feature ID, the feature's key or nothing, a version from 1, a
// bucket name ("" for none), a count from 1 to MaxExposureCount and, if
// any, a sketch of its distinct users in hll's binary form. Whether
// the feature, version and bucket exist is AddExposureBatch's to check.
func ValidateExposureBatch(batch string, counts []Exposure) error {
	if !batchPattern.MatchString(batch) {
		return Errorf(EInvalid, "batch ID %q is invalid: use 8 to 64 characters of A-Z, a-z, 0-9, '_', '-' (a random ID per batch, the same on a retry)", batch)
	}
	switch {
	case len(counts) == 0:
		return Errorf(EInvalid, "the batch holds no counts: send a batch only when there are evaluations to count")
	case len(counts) > MaxExposureBatch:
		return Errorf(EInvalid, "a batch holds at most %d counts, got %d: split it", MaxExposureBatch, len(counts))
	}
	for i, e := range counts {
		switch {
		case e.FeatureID == "" || len(e.FeatureID) > maxFeatureID:
			return Errorf(EInvalid, "exposure %d: feature_id must be the feature's ID, 1 to %d bytes", i, maxFeatureID)
		case e.Feature != "" && !ValidKey(e.Feature):
			return Errorf(EInvalid, "exposure %d: feature %q is not a feature key (or leave it out)", i, e.Feature)
		case e.Version < 1 || e.Version > maxVersion:
			return Errorf(EInvalid, "exposure %d: version must be from 1 to the feature's current version, got %d", i, e.Version)
		case e.Bucket != "" && !ValidBucketName(e.Bucket):
			return Errorf(EInvalid, "exposure %d: bucket %q is not a bucket name (\"\" counts evaluations that served no bucket)", i, e.Bucket)
		case e.Rule != nil && *e.Rule != "" && !ValidRuleName(*e.Rule):
			return Errorf(EInvalid, "exposure %d: rule %q is not a rule name (\"\" counts evaluations the ring, an override or the default served; leave it out when unknown)", i, Abbreviate(*e.Rule))
		case e.Count < 1 || e.Count > MaxExposureCount:
			return Errorf(EInvalid, "exposure %d: count must be from 1 to %d, got %d", i, MaxExposureCount, e.Count)
		case e.Users != nil && hll.Check(e.Users) != nil:
			return Errorf(EInvalid, "exposure %d: users_sketch: %v", i, hll.Check(e.Users))
		}
	}
	return nil
}

// mergeUsers returns the binary sketch of the users of a and b (either
// nil: none).
func mergeUsers(a, b []byte) []byte {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	var s hll.Sketch
	_ = s.UnmarshalBinary(a)
	_ = s.UnmarshalBinary(b)
	return s.Append(nil)
}

// AddCounts returns a + b for counts (never negative), saturating at
// math.MaxInt64 instead of overflowing.
func AddCounts(a, b int64) int64 {
	a, b = max(a, 0), max(b, 0)
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Limits on the counts apps send (POST /api/exposures).
const (
	// MaxExposureBatch is how many counts one batch holds at most.
	MaxExposureBatch = 1_000
	// MaxExposureCount bounds one count of a batch: more evaluations than
	// any process makes between two flushes.
	MaxExposureCount = 1_000_000_000
	maxFeatureID     = 64
	// maxVersion is the highest version a store keeps (PostgreSQL's
	// integer): a count of a version above it is refused, never
	// truncated into another version.
	maxVersion = math.MaxInt32
)

// Counts appends to out the evaluations c has counted and not yet given
// up to TakeExposures, per bucket and rule, without taking them.
func (c *Compiled) Counts(out []Exposure) []Exposure {
	start := len(out)
next:
	for i := range c.served {
		n := c.served[i].Load()
		if n == 0 {
			continue
		}
		p := pending{c: c, outcome: i, n: n}
		p.addUsers(c.users[i].cur.Load())
		e := p.exposure()
		for j := start; j < len(out); j++ {
			if q := &out[j]; q.Bucket == e.Bucket && *q.Rule == *e.Rule {
				q.Count = AddCounts(q.Count, n)
				q.Users = mergeUsers(q.Users, e.Users)
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}

// TakeExposures appends to out the evaluations c has counted since the
// last take, per bucket and rule, and resets those counts. Counts made
// concurrently are taken by this call or the next, never lost or taken
// twice.
func (c *Compiled) TakeExposures(out []Exposure) []Exposure {
	var taken []pending
	for _, p := range c.take(taken) {
		out = append(out, p.exposure())
	}
	return out
}

// Restore adds counts taken from c by TakeExposures back to its counters
// (a flush that failed to store them), for the next take.
func (c *Compiled) Restore(counts []Exposure) {
	for _, e := range counts {
		for i := range c.outcomes {
			o := &c.outcomes[i]
			if c.bucketName(o.bucket) == e.Bucket && e.Rule != nil && o.Rule == *e.Rule {
				c.served[i].Add(e.Count)
				if e.Users != nil {
					c.users[i].merge(e.Users)
				}
				break
			}
		}
	}
}
