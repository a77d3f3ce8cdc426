// Package history answers what a feature served one user at each version
// of its history, without compiling the versions: each ring point is
// hashed once per look-up, however many versions have it, and each
// version then costs one comparison per point, or none when its buckets
// and salt are those of the version before it (Lookup). Package rollout
// reads the versions (rollout.Service.UserHistory) and pages them as
// Assignments. The package is this file.
package history

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/rollout/rollout/ring"
	"github.com/rollout/rollout/rollout/feature"
)

// Assignment is what a feature served one user at one version.
type Assignment struct {
	Version int       `json:"version"`
	Time    time.Time `json:"time"`
	Summary string    `json:"summary"`
	Bucket  *string   `json:"bucket"` // null: no bucket
	Reason  string    `json:"reason"`
}

// Lookup is what one look-up of a user's history
// (rollout.Service.UserHistory) keeps from version to version: the
// positions of the ring points it has hashed, by bucket name and replica,
// which later versions with the same buckets reuse (up to maxLookupPoints
// of them), and the last version's ring, salt and owner, which the next
// version reuses whole when they are the same.
type Lookup struct {
	// Hashed, when not nil, counts the ring points the look-up hashes.
	Hashed *atomic.Int64

	points  map[string][]ring.Position
	kept    int // positions in points
	scratch [][]ring.Position
	buckets []feature.Bucket
	salt    string
	owner   string
	ok      bool
}

// maxLookupPoints bounds the positions one look-up keeps: 1.3 MB (16 bytes
// a position, 80,000 of them).
const maxLookupPoints = 4 * feature.MaxPoints

// Assign is what configuration f served user and why, as
// feature.Compiled's evaluation answers it, without compiling f.
func (l *Lookup) Assign(f feature.Feature, user string) (bucket, reason string) {
	if !f.Enabled {
		return f.Fallback, feature.ReasonDisabled
	}
	if b, ok := f.Overrides[user]; ok {
		return b, feature.ReasonOverride
	}
	if l.ok && l.salt == f.Salt && slices.EqualFunc(l.buckets, f.Buckets, sameRingBucket) {
		return l.owner, feature.ReasonRing
	}
	if l.points == nil {
		l.points = map[string][]ring.Position{}
	}
	l.scratch = l.scratch[:0]
	for _, b := range f.Buckets {
		ps := l.points[b.Name]
		if n := b.Replicas - len(ps); n > 0 {
			if l.Hashed != nil {
				l.Hashed.Add(int64(n))
			}
			if l.kept+n <= maxLookupPoints {
				ps = ring.AppendPoints(ps, b.Name, len(ps), b.Replicas)
				l.points[b.Name], l.kept = ps, l.kept+n
			} else { // for this version only
				ps = ring.AppendPoints(slices.Clip(ps), b.Name, len(ps), b.Replicas)
			}
		}
		l.scratch = append(l.scratch, ps)
	}
	prefix := ""
	if f.Salt != "" {
		prefix = f.Salt + ":"
	}
	owner, _ := ring.Owner(feature.RingBuckets(f.Buckets), l.scratch, ring.HashPrefixed(prefix, user))
	l.buckets, l.salt, l.owner, l.ok = f.Buckets, f.Salt, owner, true
	return owner, feature.ReasonRing
}

func sameRingBucket(a, b feature.Bucket) bool { return a.Name == b.Name && a.Replicas == b.Replicas }
