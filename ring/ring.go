// Package ring is the consistent-hash ring that assigns users to a feature's
// buckets, and the exact arithmetic of what a change to it moves.
//
// A bucket named n with r replicas owns the points Hash(n+"#0") …
// Hash(n+"#(r-1)"). Points are ordered by (position, bucket name); a key is
// served by the first point at or after Hash(key), wrapping round to the
// first point. This matches the seed's reference ring bit for bit.
//
// Shares and churn are computed from the arcs between points with exact
// integer arithmetic over the 2^128 positions of the hash space, converted to
// float64 once at the end: no sampling.
package ring

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Bucket is a node of the ring: a name and how many points it owns.
type Bucket struct {
	Name     string
	Replicas int
}

// Errors returned by New and With for input that would corrupt a ring.
var (
	ErrEmptyName     = errors.New("ring: empty bucket name")
	ErrNameHasHash   = errors.New("ring: bucket name contains '#'")
	ErrNegative      = errors.New("ring: negative replicas")
	ErrDuplicate     = errors.New("ring: duplicate bucket")
	ErrTooManyPoints = errors.New("ring: too many points")
)

// MaxPoints bounds the points of one ring, so that no input can make a ring
// that exhausts memory.
const MaxPoints = 1 << 20

type point struct {
	pos    Position
	bucket int32 // index into Ring.buckets, which are sorted by name
}

// pointSet holds a ring's points compactly, as columns: the two words of
// each position and its bucket's index, in one byte when the ring has at
// most 256 buckets. A fine feature's ring of 4,000 points takes 17 bytes a
// point instead of the 24 of a []point, padding included.
type pointSet struct {
	hi, lo []uint64
	b8     []uint8 // bucket indexes, when there are at most 256 buckets
	b32    []int32 // else
}

// newPointSet returns a set of n points, all zero, for a ring of the
// given number of buckets.
func newPointSet(n, buckets int) pointSet {
	s := pointSet{hi: make([]uint64, n), lo: make([]uint64, n)}
	if buckets <= 256 {
		s.b8 = make([]uint8, n)
	} else {
		s.b32 = make([]int32, n)
	}
	return s
}

// set sets point i to p.
func (s *pointSet) set(i int, p point) {
	s.hi[i], s.lo[i] = p.pos.Hi, p.pos.Lo
	if s.b8 != nil {
		s.b8[i] = uint8(p.bucket)
	} else {
		s.b32[i] = p.bucket
	}
}

// before reports whether point i is before point j: by position, then
// bucket.
func (s *pointSet) before(i, j int) bool {
	if c := s.pos(i).Compare(s.pos(j)); c != 0 {
		return c < 0
	}
	return s.bucket(i) < s.bucket(j)
}

func (s *pointSet) swap(i, j int) {
	s.hi[i], s.hi[j] = s.hi[j], s.hi[i]
	s.lo[i], s.lo[j] = s.lo[j], s.lo[i]
	if s.b8 != nil {
		s.b8[i], s.b8[j] = s.b8[j], s.b8[i]
	} else {
		s.b32[i], s.b32[j] = s.b32[j], s.b32[i]
	}
}

func (s *pointSet) len() int { return len(s.hi) }

func (s *pointSet) pos(i int) Position { return Position{Hi: s.hi[i], Lo: s.lo[i]} }

func (s *pointSet) bucket(i int) int32 {
	if s.b32 != nil {
		return s.b32[i]
	}
	return int32(s.b8[i])
}

// less reports whether point i is before position h.
func (s *pointSet) less(i int, h Position) bool {
	return s.hi[i] < h.Hi || (s.hi[i] == h.Hi && s.lo[i] < h.Lo)
}

// Ring is an immutable consistent-hash ring. Methods that change it return a
// new Ring and leave the receiver as it was, so a *Ring is safe for any number
// of concurrent readers with no locking. The zero value is an empty ring.
type Ring struct {
	buckets []Bucket // sorted by name
	pts     pointSet // sorted by (position, bucket name)
	index   index    // where to start searching points; see index.go
}

// New returns a ring of the given buckets, in any order. It refuses an empty
// name, a name containing '#', negative replicas, a duplicate name and more
// than MaxPoints points in all. A bucket with 0 replicas is kept but owns no
// point.
func New(buckets ...Bucket) (*Ring, error) {
	return newRing(buckets, nil)
}

// ErrPositions is returned by NewHashed for positions that do not match
// the buckets.
var ErrPositions = errors.New("ring: fewer positions than replicas")

// NewHashed is New for buckets whose points' positions the caller has
// hashed: positions[i] holds those of buckets[i], Hash(name+"#"+r) for
// replica r, at least buckets[i].Replicas of them (see AppendPoints); only
// those are read. It returns the ring New would, without hashing again, for
// callers that hold the positions already, such as a planner that builds
// several rings of the same buckets.
func NewHashed(buckets []Bucket, positions [][]Position) (*Ring, error) {
	if len(positions) != len(buckets) {
		return nil, fmt.Errorf("%w: %d lists for %d buckets", ErrPositions, len(positions), len(buckets))
	}
	for i, b := range buckets {
		if b.Replicas > len(positions[i]) {
			return nil, fmt.Errorf("%w: %q has %d replicas and %d positions", ErrPositions, b.Name, b.Replicas, len(positions[i]))
		}
	}
	return newRing(buckets, positions)
}

// newRing is New, reading the positions of buckets[i]'s points from
// positions[i] when positions is not nil.
func newRing(buckets []Bucket, positions [][]Position) (*Ring, error) {
	order := make([]int, len(buckets)) // bs[k] is buckets[order[k]]
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(buckets[a].Name, buckets[b].Name) })
	bs := make([]Bucket, len(buckets))
	for k, i := range order {
		bs[k] = buckets[i]
	}
	total := 0
	for i, b := range bs {
		switch {
		case b.Name == "":
			return nil, ErrEmptyName
		case strings.Contains(b.Name, "#"):
			return nil, fmt.Errorf("%w: %q", ErrNameHasHash, b.Name)
		case b.Replicas < 0:
			return nil, fmt.Errorf("%w: %q has %d", ErrNegative, b.Name, b.Replicas)
		case i > 0 && bs[i-1].Name == b.Name:
			return nil, fmt.Errorf("%w: %q", ErrDuplicate, b.Name)
		}
		if b.Replicas > MaxPoints-total { // not total+b.Replicas, which can overflow
			return nil, fmt.Errorf("%w: more than %d", ErrTooManyPoints, MaxPoints)
		}
		total += b.Replicas
	}

	sc := scratchFor(total)
	points := sc.points[:0]
	buf := make([]byte, 0, 64)
	for i, b := range bs {
		if positions != nil {
			for _, pos := range positions[order[i]][:b.Replicas] {
				points = append(points, point{pos: pos, bucket: int32(i)})
			}
			continue
		}
		for r := range b.Replicas {
			buf = strconv.AppendInt(append(append(buf[:0], b.Name...), '#'), int64(r), 10)
			points = append(points, point{pos: HashBytes(buf), bucket: int32(i)})
		}
	}
	pts := sc.sortPoints(points, len(bs))
	if total <= maxScratch {
		sc.points = points[:0]
		scratchPool.Put(sc)
	}
	return &Ring{buckets: bs, pts: pts, index: newIndex(pts.hi)}, nil
}

// scratch holds the buffers New builds a ring in, kept for the next ring
// (see scratchPool): a server or client that compiles a thousand rings of
// thousands of points then leaves no garbage of them but the rings.
type scratch struct {
	points      []point
	start, next []int32
}

// scratchPool keeps scratch buffers between rings. Buffers of rings above
// maxScratch points are not kept.
var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

const maxScratch = 1 << 16

// scratchFor returns scratch buffers for a ring of n points: from the pool
// when n is at most maxScratch, else new ones that the pool will not keep.
func scratchFor(n int) *scratch {
	if n > maxScratch {
		return &scratch{points: make([]point, 0, n)}
	}
	sc := scratchPool.Get().(*scratch)
	if cap(sc.points) < n {
		sc.points = make([]point, 0, n)
	}
	return sc
}

// grow returns (*buf)[:n], reallocating *buf when it is too short.
func grow(buf *[]int32, n int) []int32 {
	if cap(*buf) < n {
		*buf = make([]int32, n)
	}
	return (*buf)[:n]
}

// sortPoints returns points sorted by (position, bucket), as a pointSet
// for a ring of the given number of buckets. MD5 positions are uniform, so
// it deals them into about as many bins as points by their leading bits,
// in one pass, straight into the set's columns, and sorts each bin, of one
// or two points on average, by insertion: linear time instead of a
// comparison sort's n·log n, and no copy of the points but the set. The
// order is the one a comparison sort gives: points are distinct by
// (position, bucket).
func (sc *scratch) sortPoints(points []point, buckets int) pointSet {
	s := newPointSet(len(points), buckets)
	if len(points) == 0 {
		return s
	}
	k := uint(bits.Len(uint(len(points))))
	shift := 64 - k
	start := grow(&sc.start, 1<<k+1)
	clear(start)
	for _, p := range points {
		start[p.pos.Hi>>shift+1]++
	}
	for j := 1; j < len(start); j++ {
		start[j] += start[j-1]
	}
	next := grow(&sc.next, len(start)-1)
	copy(next, start)
	for _, p := range points {
		j := p.pos.Hi >> shift
		s.set(int(next[j]), p)
		next[j]++
	}
	for j := range len(start) - 1 {
		for a := int(start[j]) + 1; a < int(start[j+1]); a++ {
			for c := a; c > int(start[j]) && s.before(c, c-1); c-- {
				s.swap(c, c-1)
			}
		}
	}
	return s
}

// With returns a copy of r in which bucket b is added, or replaces the bucket
// of the same name.
func (r *Ring) With(b Bucket) (*Ring, error) {
	bs := slices.DeleteFunc(r.Buckets(), func(x Bucket) bool { return x.Name == b.Name })
	return New(append(bs, b)...)
}

// Without returns a copy of r without the named bucket; without such a bucket
// it returns r itself. The other buckets keep their points unchanged.
func (r *Ring) Without(name string) *Ring {
	gone, ok := r.bucketIndex(name)
	if !ok {
		return r
	}
	buckets := slices.Delete(slices.Clone(r.buckets), gone, gone+1)
	pts := newPointSet(r.pts.len()-r.buckets[gone].Replicas, len(buckets))
	n := 0
	for i := range r.pts.len() {
		p := point{pos: r.pts.pos(i), bucket: r.pts.bucket(i)}
		switch {
		case int(p.bucket) == gone:
			continue
		case int(p.bucket) > gone:
			p.bucket--
		}
		pts.set(n, p)
		n++
	}
	return &Ring{buckets: buckets, pts: pts, index: newIndex(pts.hi)}
}

// Buckets returns the ring's buckets sorted by name. The slice is the
// caller's to keep.
func (r *Ring) Buckets() []Bucket {
	if r == nil {
		return nil
	}
	return slices.Clone(r.buckets)
}

// Len returns the number of points on the ring.
func (r *Ring) Len() int {
	if r == nil {
		return 0
	}
	return r.pts.len()
}

// Lookup returns the bucket that serves key. On a ring with no points it
// returns ok == false.
func (r *Ring) Lookup(key string) (bucket string, ok bool) {
	return r.LookupPosition(Hash(key))
}

// LookupPosition returns the bucket that serves the key at position h: the
// owner of the first point at or after h, wrapping round. It does not
// allocate.
func (r *Ring) LookupPosition(h Position) (bucket string, ok bool) {
	if r == nil || r.pts.len() == 0 {
		return "", false
	}
	return r.buckets[r.pts.bucket(r.search(h))].Name, true
}

// LookupIndex is LookupPosition returning the bucket's index in Buckets()
// instead of its name, for callers that keep per-bucket data in a slice.
func (r *Ring) LookupIndex(h Position) (i int, ok bool) {
	if r == nil || r.pts.len() == 0 {
		return 0, false
	}
	return int(r.pts.bucket(r.search(h))), true
}

// search returns the index of the first point at or after h, or 0 past the
// last point.
func (r *Ring) search(h Position) int {
	lo, hi := r.index.bounds(h)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.pts.less(m, h) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == r.pts.len() {
		return 0
	}
	return lo
}

func (r *Ring) bucketIndex(name string) (int, bool) {
	if r == nil {
		return 0, false
	}
	return slices.BinarySearchFunc(r.buckets, name, func(b Bucket, n string) int { return strings.Compare(b.Name, n) })
}
