package ring

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSortPoints: the bin sort of New orders points as a comparison sort
// by (position, bucket) does, ties of position and crowded bins included,
// with bucket indexes kept in a byte or in an int32.
func TestSortPoints(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 3, 17, 1000, 20_000} {
		points := make([]point, n)
		for i := range points {
			points[i] = point{pos: Position{Hi: rng.Uint64(), Lo: rng.Uint64()}, bucket: int32(rng.IntN(8))}
			switch {
			case i > 0 && i%7 == 0: // the same position, another bucket
				points[i].pos, points[i].bucket = points[i-1].pos, (points[i-1].bucket+1)%8
			case i > 0 && i%5 == 0: // the same leading bits: a crowded bin
				points[i].pos.Hi = points[i-1].pos.Hi ^ uint64(rng.IntN(1<<16))
			}
		}
		want := slices.Clone(points)
		slices.SortFunc(want, func(a, b point) int {
			if c := a.pos.Compare(b.pos); c != 0 {
				return c
			}
			return int(a.bucket) - int(b.bucket)
		})
		for _, buckets := range []int{8, 300} { // bucket indexes in a byte, or not
			r := &Ring{pts: sortPoints(points, buckets)}
			if !slices.Equal(r.points(), want) {
				t.Errorf("%d points of %d buckets: the bin sort differs from the comparison sort", n, buckets)
			}
		}
	}
}
